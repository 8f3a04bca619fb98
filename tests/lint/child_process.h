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

// argv[0] is the program path. Stdin is `input` (less than 64 KiB, written
// before the child's output is read), or /dev/null when it is empty.
// `cwd` empty: inherit.
ChildResult run_child(const std::vector<std::string>& argv, const std::string& cwd = {},
                      const std::string& input = {});

}  // namespace gpuleak::lint::testing
