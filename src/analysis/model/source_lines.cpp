#include "analysis/model/source_lines.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <vector>

#include "trace/records.h"

namespace gpuleak::analysis {

namespace {

// Trimmed of blanks, and at most kMaxSourceLineBytes, cut on a UTF-8
// character boundary.
std::string tidy_line(std::string text) {
  auto begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return {};
  auto end = text.find_last_not_of(" \t\r");
  text = text.substr(begin, end - begin + 1);
  if (text.size() > trace::kMaxSourceLineBytes) {
    std::size_t cut = trace::kMaxSourceLineBytes - 3;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "...";
  }
  return text;
}

// Files whose size or content the kernel makes up: never sources.
bool on_pseudo_file_system(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return true;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::map<std::uint32_t, std::string> read_source_lines(const std::string& path,
                                                       const std::set<std::uint32_t>& wanted) {
  std::map<std::uint32_t, std::string> found;
  if (path.empty() || wanted.empty() || *wanted.rbegin() == 0) return found;
  // O_NONBLOCK: a FIFO must not wait for a writer before fstat refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return found;
  struct stat st {};
  bool usable = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
                static_cast<std::uint64_t>(st.st_size) <= kMaxSourceFileBytes &&
                !on_pseudo_file_system(fd);
  if (!usable) {
    ::close(fd);
    return found;
  }
  std::uint32_t last_wanted = *wanted.rbegin();
  std::uint32_t line = 1;
  std::string current;
  bool keep = wanted.count(1) > 0;
  std::vector<char> buffer(64 << 10);
  std::uint64_t read_total = 0;
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    read_total += static_cast<std::uint64_t>(n);
    for (ssize_t i = 0; i < n; ++i) {
      char c = buffer[static_cast<std::size_t>(i)];
      if (c == '\n') {
        if (keep) found[line] = tidy_line(std::move(current));
        current.clear();
        if (++line > last_wanted) break;
        keep = wanted.count(line) > 0;
      } else if (keep && current.size() <= trace::kMaxSourceLineBytes * 4) {
        current += c;  // a longer line is shortened anyway
      }
    }
    if (line > last_wanted || read_total >= kMaxSourceFileBytes) break;
  }
  if (keep && line <= last_wanted && !current.empty()) found[line] = tidy_line(std::move(current));
  ::close(fd);
  return found;
}

std::optional<std::string> find_in_checkout(const std::string& root,
                                            const std::string& traced_path) {
  char resolved_root[PATH_MAX];
  if (root.empty() || traced_path.empty() || !::realpath(root.c_str(), resolved_root))
    return std::nullopt;
  std::string inside = std::string(resolved_root);
  if (inside != "/") inside += '/';

  // The path's components; "." dropped, ".." refused (no climbing out).
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (at <= traced_path.size()) {
    std::size_t slash = traced_path.find('/', at);
    if (slash == std::string::npos) slash = traced_path.size();
    std::string part = traced_path.substr(at, slash - at);
    if (part == "..") return std::nullopt;
    if (!part.empty() && part != ".") parts.push_back(part);
    at = slash + 1;
  }
  constexpr std::size_t kMaxTails = 64;
  std::size_t first = parts.size() > kMaxTails ? parts.size() - kMaxTails : 0;
  for (std::size_t skip = first; skip < parts.size(); ++skip) {
    std::string candidate = inside;
    for (std::size_t k = skip; k < parts.size(); ++k)
      candidate += parts[k] + (k + 1 < parts.size() ? "/" : "");
    char resolved[PATH_MAX];
    if (!::realpath(candidate.c_str(), resolved)) continue;
    std::string real = resolved;
    if (real.rfind(inside, 0) != 0) continue;  // a link out of the checkout
    struct stat st {};
    if (::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    return real;
  }
  return std::nullopt;
}

}  // namespace gpuleak::analysis
