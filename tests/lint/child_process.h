// Runs a program as a real child process and collects what it printed and
// how it exited; the CLI tests use it on the built gpuleak binary.
#pragma once

#include <string>
#include <vector>

namespace gpuleak::lint::testing {

struct ChildResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that killed it, if any
  std::string out;
  std::string err;
};

// argv[0] is the program path. Stdin is /dev/null. `cwd` empty: inherit.
ChildResult run_child(const std::vector<std::string>& argv, const std::string& cwd = {});

}  // namespace gpuleak::lint::testing
