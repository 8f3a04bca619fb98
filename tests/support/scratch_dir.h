// Temporary files for tests: a fresh directory per test, removed with its
// contents when the object goes away (also when the test fails).
#pragma once

#include <string>

namespace gpuleak::testing {

class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `text` to `path` (created or truncated); throws when it cannot.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace gpuleak::testing
