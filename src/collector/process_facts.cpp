#include "collector/process_facts.h"

#include <link.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <sstream>
#include <vector>

namespace gpuleak::collector {

namespace {

std::string read_link(const char* path) {
  char buffer[PATH_MAX];
  ssize_t n = ::readlink(path, buffer, sizeof buffer - 1);
  if (n <= 0) return {};
  return std::string(buffer, static_cast<std::size_t>(n));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct ModuleScan {
  const std::function<void(const trace::ModuleRecord&)>* visit = nullptr;
  std::string executable;
  unsigned long long adds = 0;
};

int visit_module(struct dl_phdr_info* info, size_t size, void* data) {
  auto* scan = static_cast<ModuleScan*>(data);
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds) {
    scan->adds = info->dlpi_adds;
  }
  if (!scan->visit) return 0;
  std::string path = info->dlpi_name ? info->dlpi_name : "";
  if (path.empty()) path = scan->executable;  // the main program has no name here
  if (path.empty() || path.find("linux-vdso") != std::string::npos) return 0;
  trace::ModuleRecord m;
  m.load_bias = info->dlpi_addr;
  m.low = UINT64_MAX;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    std::uint64_t start = info->dlpi_addr + ph.p_vaddr;
    m.low = std::min(m.low, start);
    m.high = std::max(m.high, start + ph.p_memsz);
  }
  if (m.low >= m.high) return 0;
  m.path = std::move(path);
  (*scan->visit)(m);
  return 0;
}

}  // namespace

trace::ProcessRecord describe_process(std::uint64_t monotonic_ns) {
  trace::ProcessRecord p;
  p.pid = static_cast<std::uint32_t>(::getpid());
  p.parent_pid = static_cast<std::uint32_t>(::getppid());
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  p.start_unix_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
                    static_cast<std::uint64_t>(ts.tv_nsec);
  p.start_monotonic_ns = monotonic_ns;
  p.executable = read_link("/proc/self/exe");
  std::string cmdline = read_file("/proc/self/cmdline");
  while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  p.command_line = cmdline;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) p.hostname = host;
  p.collector_version = "0.1.0";
  return p;
}

std::uint64_t host_rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::uint64_t size_pages = 0, resident_pages = 0;
  if (!(in >> size_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::string thread_name(std::uint32_t thread_id) {
  std::string name = read_file("/proc/self/task/" + std::to_string(thread_id) + "/comm");
  while (!name.empty() && (name.back() == '\n' || name.back() == '\0')) name.pop_back();
  return name;
}

unsigned long long for_each_loaded_module(
    const std::function<void(const trace::ModuleRecord&)>& visit) {
  // Only copy inside dl_iterate_phdr: its callback runs with the loader's
  // lock held, and anything that may take the loader's other lock there
  // (first use of a thread_local, dlopen) deadlocks against a dlopen in
  // another thread.
  std::vector<trace::ModuleRecord> modules;
  std::function<void(const trace::ModuleRecord&)> collect =
      [&modules](const trace::ModuleRecord& m) { modules.push_back(m); };
  ModuleScan scan;
  scan.visit = &collect;
  scan.executable = read_link("/proc/self/exe");
  modules.reserve(512);
  dl_iterate_phdr(visit_module, &scan);
  for (const auto& m : modules) visit(m);
  return scan.adds;
}

unsigned long long loaded_module_generation() {
  ModuleScan scan;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t size, void* data) -> int {
        auto* s = static_cast<ModuleScan*>(data);
        if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
          s->adds = info->dlpi_adds;
        return 1;  // the counter is the same in every entry: one is enough
      },
      &scan);
  return scan.adds;
}

}  // namespace gpuleak::collector
