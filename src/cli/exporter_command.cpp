// Placeholder until the 'exporter' subcommand lands; it refuses to pretend.
#include <CLI/CLI.hpp>

#include "command.h"

namespace gpuleak::cli {

void add_exporter_command(CLI::App& app, CommandAction& action) {
  auto* sub = app.add_subcommand("exporter", "(not built yet)");
  sub->callback([&action] {
    action = [] () -> int { throw UsageError("'exporter' is not built yet"); };
  });
}

}  // namespace gpuleak::cli
