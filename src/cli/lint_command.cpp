// Placeholder until the 'lint' subcommand lands; it refuses to pretend.
#include <CLI/CLI.hpp>

#include "command.h"

namespace gpuleak::cli {

void add_lint_command(CLI::App& app, CommandAction& action) {
  auto* sub = app.add_subcommand("lint", "(not built yet)");
  sub->callback([&action] {
    action = [] () -> int { throw UsageError("'lint' is not built yet"); };
  });
}

}  // namespace gpuleak::cli
