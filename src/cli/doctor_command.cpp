// Placeholder until the 'doctor' subcommand lands; it refuses to pretend.
#include <CLI/CLI.hpp>

#include "command.h"

namespace gpuleak::cli {

void add_doctor_command(CLI::App& app, CommandAction& action) {
  auto* sub = app.add_subcommand("doctor", "(not built yet)");
  sub->callback([&action] {
    action = [] () -> int { throw UsageError("'doctor' is not built yet"); };
  });
}

}  // namespace gpuleak::cli
