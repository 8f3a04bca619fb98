#include "monitor/process_info.h"

#include <cstdlib>
#include <sstream>

namespace gpuleak::monitor {

namespace {

// The PF_KTHREAD bit of the flags field.
constexpr unsigned long kKernelThreadFlag = 0x00200000UL;

std::string status_field(const std::string& status_text, const char* name) {
  std::string key = std::string(name) + ":";
  std::size_t at = 0;
  while (at < status_text.size()) {
    std::size_t end = status_text.find('\n', at);
    if (end == std::string::npos) end = status_text.size();
    if (status_text.compare(at, key.size(), key) == 0) {
      return status_text.substr(at + key.size(), end - at - key.size());
    }
    at = end + 1;
  }
  return {};
}

}  // namespace

std::string ProcessInfo::command_line() const {
  if (argv.empty()) return "[" + comm + "]";
  std::string text;
  for (const auto& arg : argv) {
    if (!text.empty()) text += ' ';
    text += arg;
  }
  return text;
}

bool parse_proc_stat(const std::string& line, long page_size_bytes, ProcessInfo& out) {
  std::size_t open = line.find('(');
  std::size_t close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  out.pid = std::atoi(line.c_str());
  out.comm = line.substr(open + 1, close - open - 1);
  // Fields after the name, numbered as in proc(5): 3 state, 4 ppid, 5 pgrp,
  // 6 session, 9 flags, 14 utime, 15 stime, 20 num_threads, 22 starttime, 24 rss.
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  std::string field;
  while (rest >> field && fields.size() < 22) fields.push_back(field);
  if (fields.size() < 22) return false;
  auto number = [&](int proc_field) {
    return std::strtoull(fields[proc_field - 3].c_str(), nullptr, 10);
  };
  auto signed_number = [&](int proc_field) {
    return std::strtoll(fields[proc_field - 3].c_str(), nullptr, 10);
  };
  out.state = fields[0].empty() ? '?' : fields[0][0];
  out.ppid = static_cast<int>(signed_number(4));
  out.pgid = static_cast<int>(signed_number(5));
  out.sid = static_cast<int>(signed_number(6));
  out.kernel_thread = (number(9) & kKernelThreadFlag) != 0;
  out.cpu_ticks = number(14) + number(15);
  out.threads = static_cast<int>(signed_number(20));
  out.start_ticks = number(22);
  long long rss_pages = signed_number(24);
  out.rss_bytes = rss_pages > 0 ? static_cast<std::uint64_t>(rss_pages) *
                                      static_cast<std::uint64_t>(page_size_bytes)
                                : 0;
  return out.pid > 0;
}

int parse_innermost_namespace_pid(const std::string& status_text) {
  std::istringstream values(status_field(status_text, "NSpid"));
  int pid = 0, last = 0;
  while (values >> pid) last = pid;
  return last;
}

std::optional<uid_t> parse_real_uid(const std::string& status_text) {
  std::string values = status_field(status_text, "Uid");
  if (values.empty()) return std::nullopt;
  char* end = nullptr;
  unsigned long uid = std::strtoul(values.c_str(), &end, 10);
  if (end == values.c_str()) return std::nullopt;
  return static_cast<uid_t>(uid);
}

}  // namespace gpuleak::monitor
