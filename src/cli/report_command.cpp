// Placeholder until the 'report' subcommand lands; it refuses to pretend.
#include <CLI/CLI.hpp>

#include "command.h"

namespace gpuleak::cli {

void add_report_command(CLI::App& app, CommandAction& action) {
  auto* sub = app.add_subcommand("report", "(not built yet)");
  sub->callback([&action] {
    action = [] () -> int { throw UsageError("'report' is not built yet"); };
  });
}

}  // namespace gpuleak::cli
