// Placeholder until the 'top' subcommand lands; it refuses to pretend.
#include <CLI/CLI.hpp>

#include "command.h"

namespace gpuleak::cli {

void add_top_command(CLI::App& app, CommandAction& action) {
  auto* sub = app.add_subcommand("top", "(not built yet)");
  sub->callback([&action] {
    action = [] () -> int { throw UsageError("'top' is not built yet"); };
  });
}

}  // namespace gpuleak::cli
