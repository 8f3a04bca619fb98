// Placeholder until the 'run' subcommand lands; it refuses to pretend.
#include <CLI/CLI.hpp>

#include "command.h"

namespace gpuleak::cli {

void add_run_command(CLI::App& app, CommandAction& action) {
  auto* sub = app.add_subcommand("run", "(not built yet)");
  sub->callback([&action] {
    action = [] () -> int { throw UsageError("'run' is not built yet"); };
  });
}

}  // namespace gpuleak::cli
