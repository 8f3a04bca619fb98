#include "attach/remote_call.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

namespace gpuleak::attach {

namespace {

// What the called code may use of the thread's stack lies below this much
// of it: the x86-64 red zone is 128 bytes, the rest is margin.
constexpr std::uint64_t kStackGapBytes = 1024;
constexpr std::uint64_t kSyscallInstructionBytes = 2;
constexpr std::size_t kMostCodeScannedBytes = 4u << 20;

// The syscall a stopped thread was in must not be restarted by the kernel
// when our registers run: orig_rax of -1 says "no system call".
constexpr unsigned long long kNoSystemCall = ~0ULL;

std::uint64_t scan_for_syscall(int mem_fd, const Mapping& m) {
  std::size_t length = std::min<std::size_t>(m.end - m.start, kMostCodeScannedBytes);
  std::string code(length, '\0');
  ssize_t got = ::pread(mem_fd, code.data(), length, static_cast<off_t>(m.start));
  if (got < 2) return 0;
  for (ssize_t i = 0; i + 1 < got; ++i) {
    if (code[i] == '\x0f' && code[i + 1] == '\x05') return m.start + static_cast<std::uint64_t>(i);
  }
  return 0;
}

bool is_c_library(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  return name.starts_with("libc.so") || name.starts_with("libc-");
}

}  // namespace

std::uint64_t find_syscall_instruction(int pid, const std::vector<Mapping>& maps) {
  int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::uint64_t found = 0;
  for (int pass = 0; pass < 2 && !found; ++pass) {
    for (const Mapping& m : maps) {
      if (!m.executable || !m.readable || m.path.empty() || m.path[0] != '/') continue;
      if (pass == 0 && !is_c_library(m.path)) continue;
      if ((found = scan_for_syscall(fd, m))) break;
    }
  }
  ::close(fd);
  return found;
}

bool remote_syscall(StoppedThread& thread, std::uint64_t syscall_instruction, long number,
                    const std::array<std::uint64_t, 6>& arguments, std::chrono::milliseconds limit,
                    long* result, std::string* why) {
  user_regs_struct registers = thread.saved_registers();
  registers.rip = syscall_instruction;
  registers.rax = static_cast<unsigned long long>(number);
  registers.orig_rax = kNoSystemCall;
  registers.rdi = arguments[0];
  registers.rsi = arguments[1];
  registers.rdx = arguments[2];
  registers.r10 = arguments[3];
  registers.r8 = arguments[4];
  registers.r9 = arguments[5];
  StoppedThread::Stop stop = thread.resume(registers, /*single_step=*/true, SIGTRAP, limit);
  if (stop.outcome == StoppedThread::Outcome::kEnded) {
    *why = "the process ended";
    return false;
  }
  if (stop.outcome != StoppedThread::Outcome::kStopped ||
      stop.registers.rip != syscall_instruction + kSyscallInstructionBytes) {
    *why = stop.outcome == StoppedThread::Outcome::kTimedOut
               ? "a system call in the process did not return within " +
                     std::to_string(limit.count()) + " ms"
               : "a system call in the process did not complete";
    return false;
  }
  *result = static_cast<long>(stop.registers.rax);
  return true;
}

bool remote_function_call(StoppedThread& thread, std::uint64_t function,
                          const std::vector<std::uint64_t>& arguments,
                          std::chrono::milliseconds limit, std::uint64_t* result,
                          std::string* why) {
  if (arguments.size() > 6) {
    *why = "at most six arguments";
    return false;
  }
  user_regs_struct registers = thread.saved_registers();
  // At a function's first instruction, rsp + 8 is 16-byte aligned; the
  // return address at rsp is 0.
  std::uint64_t stack = ((registers.rsp - kStackGapBytes) & ~std::uint64_t{15}) - 8;
  if (!thread.write_memory(stack, std::string(8, '\0'), why)) return false;
  registers.rsp = stack;
  registers.rip = function;
  registers.rax = 0;  // no vector registers used by a variadic call
  registers.orig_rax = kNoSystemCall;
  unsigned long long* argument_registers[] = {&registers.rdi, &registers.rsi, &registers.rdx,
                                              &registers.rcx, &registers.r8,  &registers.r9};
  for (std::size_t i = 0; i < arguments.size(); ++i) *argument_registers[i] = arguments[i];
  StoppedThread::Stop stop = thread.resume(registers, /*single_step=*/false, SIGSEGV, limit);
  switch (stop.outcome) {
    case StoppedThread::Outcome::kStopped:
      if (stop.registers.rip == 0) {
        *result = stop.registers.rax;
        return true;
      }
      *why = "the called function faulted in the process (the fault was caught and not delivered)";
      return false;
    case StoppedThread::Outcome::kEnded:
      *why = "the process ended";
      return false;
    case StoppedThread::Outcome::kTimedOut:
      *why = "a call in the process did not return within " + std::to_string(limit.count()) +
             " ms (it was abandoned and the thread put back where it was)";
      return false;
    case StoppedThread::Outcome::kFailed:
      break;
  }
  *why = "ptrace failed while a call ran in the process";
  return false;
}

}  // namespace gpuleak::attach
