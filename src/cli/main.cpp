// gpuleak's entry point: parses the command line and runs one subcommand.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "command.h"
#include "version.h"

namespace {

constexpr const char* kDescription =
    "gpuleak finds, explains and prevents GPU memory leaks in CUDA programs and PyTorch jobs.";

}  // namespace

// A function try block: whatever escapes (out of memory while the commands
// are set up, say) ends gpuleak with one line and status 1, never an abort.
int main(int argc, char** argv) try {
  using namespace gpuleak::cli;
  CLI::App app{kDescription, "gpuleak"};
  app.set_version_flag("--version", std::string(gpuleak::kVersion));
  app.require_subcommand(1);
  app.fallthrough(false);

  CommandAction action;
  add_run_command(app, action);
  add_attach_command(app, action);
  add_report_command(app, action);
  add_diff_command(app, action);
  add_top_command(app, action);
  add_doctor_command(app, action);
  add_exporter_command(app, action);
  add_lint_command(app, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 checks that a subcommand was given before it looks at words it
    // did not understand, so `gpuleak --bogus` would be told "A subcommand is
    // required": name the word it did not understand instead.
    std::string message = e.what();
    std::vector<std::string> unknown = app.remaining();
    if (dynamic_cast<const CLI::RequiredError*>(&e) && app.get_subcommands().empty() &&
        !unknown.empty()) {
      message =
          unknown.front() + (unknown.front().starts_with('-') ? " is not a known option"
                                                              : " is not a gpuleak subcommand");
    }
    std::fprintf(stderr, "gpuleak: %s (see 'gpuleak --help')\n", message.c_str());
    return kExitUsage;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gpuleak: %s\n", e.what());
    return kExitUsage;
  }

  try {
    return action ? action() : kExitUsage;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gpuleak: %s\n", e.what());
    return kExitUsage;
  } catch (const InputError& e) {
    std::fprintf(stderr, "gpuleak: %s\n", e.what());
    return kExitInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuleak: internal error: %s\n", e.what());
    return 1;
  }
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpuleak: internal error: %s\n", e.what());
  return 1;
} catch (...) {
  std::fprintf(stderr, "gpuleak: internal error\n");
  return 1;
}
