// The Python source that `gpuleak attach` has a Python process run at its
// next safe point (attach/attach.h, schedule_python_source): it imports
// gpuleak's package from this installation and calls
// gpuleak._attach_agent.start(settings).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpuleak::cli {

// The boot source for `settings` (python_dir: the folder that holds the
// package; the rest is _attach_agent.start()'s). It runs in the program's
// __main__ but binds no name there (the work happens inside an exec with
// its own namespace), and it catches everything: PyRun_SimpleString would
// print an exception on the program's stderr, and a SystemExit would end
// the program.
std::string python_boot_source(const nlohmann::json& settings);

}  // namespace gpuleak::cli
