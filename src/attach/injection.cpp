// The two injections of attach.h: a Python source string queued on the
// interpreter's pending calls, and a shared library loaded with dlopen.
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <thread>

#include "attach/attach.h"
#include "attach/elf_symbols.h"
#include "attach/process_maps.h"
#include "attach/remote_call.h"
#include "attach/stopped_thread.h"

namespace gpuleak::attach {

namespace {

constexpr std::uint64_t kPageBytes = 4096;
// A raw system call returns -errno as an unsigned value in this range.
constexpr long kMostErrno = 4095;

bool failed_syscall(long result) { return result < 0 && result >= -kMostErrno; }

// Maps a private read-write page run in the process, big enough for `bytes`.
bool map_page(StoppedThread& thread, std::uint64_t syscall_instruction, std::size_t bytes,
              const Limits& limits, std::uint64_t* page, std::string* why) {
  std::uint64_t length = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  long result = 0;
  if (!remote_syscall(
          thread, syscall_instruction, SYS_mmap,
          {0, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, ~std::uint64_t{0}, 0},
          limits.remote_call, &result, why))
    return false;
  if (failed_syscall(result)) {
    *why = "mmap in the process failed: " + std::string(std::strerror(static_cast<int>(-result)));
    return false;
  }
  *page = static_cast<std::uint64_t>(result);
  return true;
}

std::string with_context(const std::string& context, const std::string& why) {
  return context + ": " + why;
}

// System calls a thread waits in without holding the C library's allocator
// or loader locks: a safe place to call dlopen from.
bool waits_without_allocator_locks(long syscall_number) {
  static const std::set<long> kWaiting = {
      SYS_read,   SYS_poll,        SYS_select,          SYS_nanosleep,  SYS_pause,
      SYS_wait4,  SYS_futex,       SYS_clock_nanosleep, SYS_epoll_wait, SYS_pselect6,
      SYS_ppoll,  SYS_epoll_pwait, SYS_rt_sigtimedwait, SYS_recvfrom,   SYS_recvmsg,
      SYS_accept, SYS_accept4};
  return kWaiting.count(syscall_number) > 0;
}

// The system call thread `tid` is blocked in (/proc/PID/task/TID/syscall), or -1.
long blocked_syscall(int pid, int tid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/syscall");
  std::string first;
  if (!(in >> first) || first == "running") return -1;
  try {
    return std::stol(first);
  } catch (...) {
    return -1;
  }
}

std::vector<int> threads_of(int pid) {
  std::vector<int> tids = {pid};  // the main thread first
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    int tid = std::atoi(entry.path().filename().c_str());
    if (tid > 0 && tid != pid) tids.push_back(tid);
  }
  return tids;
}

std::uint64_t symbol_address(int pid, const std::vector<Mapping>& maps, const std::string& path,
                             const std::string& name) {
  ElfSymbols symbols;
  std::string unused;
  if (!symbols.open(path_seen_from_here(pid, path), &unused)) return 0;
  auto offsets = symbols.file_offsets_of({name});
  return offsets.count(name) ? address_of_file_offset(maps, path, offsets[name]) : 0;
}

// An address of `name` in the process's C library, or 0.
std::uint64_t c_library_function(int pid, const std::vector<Mapping>& maps,
                                 const std::string& name) {
  std::set<std::string> tried;
  for (const Mapping& m : maps) {
    std::string base = m.path.substr(m.path.find_last_of('/') + 1);
    if (!(base.starts_with("libc.so") || base.starts_with("libc-")) || !tried.insert(m.path).second)
      continue;
    if (std::uint64_t at = symbol_address(pid, maps, m.path, name)) return at;
  }
  return 0;
}

}  // namespace

bool schedule_python_source(int pid, const PythonInterpreter& python, const std::string& source,
                            const Limits& limits, std::string* why) {
  std::vector<Mapping> maps = read_process_maps(pid);
  std::uint64_t syscall_instruction = find_syscall_instruction(pid, maps);
  if (!syscall_instruction) {
    *why = "no system call instruction found in the code of PID " + std::to_string(pid);
    return false;
  }
  StoppedThread thread;
  if (!thread.stop(pid, pid, limits.stop_thread, why)) {
    *why = with_context("cannot stop the main thread of PID " + std::to_string(pid), *why);
    return false;
  }
  std::uint64_t page = 0;
  if (!map_page(thread, syscall_instruction, source.size() + 1, limits, &page, why)) return false;
  if (!thread.write_memory(page, source + '\0', why)) return false;
  std::uint64_t queued = 0;
  if (!remote_function_call(thread, python.add_pending_call, {python.run_simple_string, page},
                            limits.remote_call, &queued, why))
    return false;
  if (static_cast<int>(queued) != 0) {
    *why = "the interpreter's queue of pending calls is full (Py_AddPendingCall returned " +
           std::to_string(static_cast<int>(queued)) + "); try again in a moment";
    return false;
  }
  return true;
}

bool load_library(int pid, const std::string& path, const std::vector<std::string>& environment,
                  const std::string& entry, const Limits& limits, long* entry_result,
                  std::string* why) {
  std::vector<Mapping> maps = read_process_maps(pid);
  std::uint64_t syscall_instruction = find_syscall_instruction(pid, maps);
  std::uint64_t dlopen_at = c_library_function(pid, maps, "dlopen");
  if (!dlopen_at) dlopen_at = c_library_function(pid, maps, "__libc_dlopen_mode");
  std::uint64_t putenv_at = c_library_function(pid, maps, "putenv");
  if (!syscall_instruction || !dlopen_at || !putenv_at) {
    *why = "PID " + std::to_string(pid) +
           " has no C library with dlopen and putenv (a static or non-glibc program)";
    return false;
  }
  // A thread blocked in a waiting system call is checked again once
  // stopped: the kernel's orig_rax then names the call it was in. One that
  // moved on is given back (by its destructor) and another one tried.
  // The whole search is bounded: at most find_waiting_thread, plus one
  // thread's stop and give-back when the last one tried does not stop.
  using Clock = std::chrono::steady_clock;
  const auto give_up = Clock::now() + limits.find_waiting_thread;
  std::unique_ptr<StoppedThread> chosen;
  for (bool first = true; !chosen; first = false) {
    if (!first) {
      if (Clock::now() >= give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (::kill(pid, 0) != 0 && errno == ESRCH) {
      *why = "PID " + std::to_string(pid) + " ended";
      return false;
    }
    for (int tid : threads_of(pid)) {
      if (!waits_without_allocator_locks(blocked_syscall(pid, tid))) continue;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
      if (left <= std::chrono::milliseconds(0)) break;
      auto candidate = std::make_unique<StoppedThread>();
      std::string stop_why;
      if (!candidate->stop(pid, tid, std::min(limits.stop_thread, left), &stop_why)) {
        if (stop_why.find("not permitted") != std::string::npos) {
          *why = stop_why;
          return false;
        }
        continue;
      }
      if (waits_without_allocator_locks(static_cast<long>(candidate->saved_registers().orig_rax))) {
        chosen = std::move(candidate);
        break;
      }
    }
  }
  if (!chosen) {
    *why = "no thread of PID " + std::to_string(pid) +
           " waits in a system call that is safe to load a library from within " +
           std::to_string(limits.find_waiting_thread.count()) +
           " ms (all are running); try again when the program waits (for the GPU, for I/O)";
    return false;
  }
  StoppedThread& thread = *chosen;
  std::string strings = path + '\0';
  for (const std::string& variable : environment) strings += variable + '\0';
  std::uint64_t page = 0;
  if (!map_page(thread, syscall_instruction, strings.size(), limits, &page, why)) return false;
  if (!thread.write_memory(page, strings, why)) return false;
  std::uint64_t at = page + path.size() + 1;
  std::uint64_t result = 0;
  for (const std::string& variable : environment) {
    // putenv keeps the pointer: the page stays mapped for the life of the process.
    if (!remote_function_call(thread, putenv_at, {at}, limits.remote_call, &result, why))
      return false;
    at += variable.size() + 1;
  }
  if (!remote_function_call(thread, dlopen_at, {page, RTLD_NOW}, limits.remote_call, &result, why))
    return false;
  if (result == 0) {
    *why = "dlopen of " + path + " failed in PID " + std::to_string(pid);
    return false;
  }
  std::uint64_t entry_at = symbol_address(pid, read_process_maps(pid), path, entry);
  if (!entry_at) {
    *why = path + " was loaded into PID " + std::to_string(pid) + " but has no function " + entry;
    return false;
  }
  if (!remote_function_call(thread, entry_at, {}, limits.remote_call, &result, why)) return false;
  *entry_result = static_cast<long>(result);
  return true;
}

}  // namespace gpuleak::attach
