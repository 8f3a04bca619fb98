// A progress line for work a person waits for (reading a large trace,
// linting a big tree). It draws on stderr only when stderr is a terminal, at
// most ten times a second, and erases itself when done; in pipes and CI logs
// it prints nothing.
//
// Not thread-safe: one owner updates it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gpuleak::cli {

class Progress {
 public:
  enum class Unit { kBytes, kFiles, kItems };

  // `total` may be 0 when unknown; then only the count is shown.
  Progress(std::string label, std::uint64_t total, Unit unit);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(std::uint64_t done);
  void finish();

  static bool stderr_is_terminal();

 private:
  void draw(std::uint64_t done);

  std::string label_;
  std::uint64_t total_;
  Unit unit_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace gpuleak::cli
