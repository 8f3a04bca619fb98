#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include "quantity/units.h"

namespace gpuleak::cli {

Progress::Progress(std::string label, std::uint64_t total, Unit unit)
    : label_(std::move(label)),
      total_(total),
      unit_(unit),
      enabled_(stderr_is_terminal()),
      started_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { finish(); }

bool Progress::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void Progress::update(std::uint64_t done) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  // Stay silent for quick jobs: only start drawing after half a second.
  if (!drawn_ && now - started_ < std::chrono::milliseconds(500)) return;
  last_draw_ = now;
  draw(done);
}

void Progress::draw(std::uint64_t done) {
  std::string count;
  switch (unit_) {
    case Unit::kBytes:
      count = quantity::format_bytes(done);
      if (total_ > 0) count += " of " + quantity::format_bytes(total_);
      break;
    case Unit::kFiles:
    case Unit::kItems:
      count = std::to_string(done);
      if (total_ > 0) count += " of " + std::to_string(total_);
      count += unit_ == Unit::kFiles ? " files" : "";
      break;
  }
  int percent =
      total_ > 0 ? static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total_))
                 : -1;
  if (percent >= 0) {
    std::fprintf(stderr, "\r\033[K%s: %s (%d%%)", label_.c_str(), count.c_str(), percent);
  } else {
    std::fprintf(stderr, "\r\033[K%s: %s", label_.c_str(), count.c_str());
  }
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (enabled_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  drawn_ = false;
  enabled_ = false;
}

}  // namespace gpuleak::cli
