// The contract between main() and the subcommands.
//
// Each subcommand lives in its own file and exposes one add_*_command()
// function. It declares its flags on a CLI11 sub-app and, when selected,
// stores the work to do in `action`; main() runs it after parsing, so flags
// are fully validated before anything starts.
//
// Errors a user can fix (bad input, missing file, no driver) are thrown as
// UsageError/InputError; main() prints them as one line and exits non-zero.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

namespace CLI {
class App;
}

namespace gpuleak::cli {

using CommandAction = std::function<int()>;

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;    // leaks found with --fail-on-leak, lint findings
inline constexpr int kExitUsage = 2;       // wrong flag, bad argument
inline constexpr int kExitInput = 3;       // unreadable/corrupt input, no driver, no permission
inline constexpr int kExitIncomplete = 4;  // doctor: GPU memory could not be examined (no driver)

// A problem with what the user asked for: printed as "gpuleak: <what>", exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A problem with the input or the environment: printed as "gpuleak: <what>", exit 3.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void add_run_command(CLI::App& app, CommandAction& action);
void add_attach_command(CLI::App& app, CommandAction& action);
void add_report_command(CLI::App& app, CommandAction& action);
void add_diff_command(CLI::App& app, CommandAction& action);
void add_top_command(CLI::App& app, CommandAction& action);
void add_doctor_command(CLI::App& app, CommandAction& action);
void add_exporter_command(CLI::App& app, CommandAction& action);
void add_lint_command(CLI::App& app, CommandAction& action);

}  // namespace gpuleak::cli
