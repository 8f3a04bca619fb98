// gpuleak's entry point: parses the command line and runs one subcommand.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "command.h"
#include "version.h"

namespace {

constexpr const char* kDescription =
    "gpuleak finds, explains and prevents GPU memory leaks in CUDA programs and PyTorch jobs.";

}  // namespace

int main(int argc, char** argv) {
  using namespace gpuleak::cli;
  CLI::App app{kDescription, "gpuleak"};
  app.set_version_flag("--version", std::string(gpuleak::kVersion));
  app.require_subcommand(1);
  app.fallthrough(false);

  CommandAction action;
  add_run_command(app, action);
  add_report_command(app, action);
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
    std::fprintf(stderr, "gpuleak: %s\nRun 'gpuleak --help' for usage.\n", e.what());
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
}
