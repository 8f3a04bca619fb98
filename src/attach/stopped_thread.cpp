#include "attach/stopped_thread.h"

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace gpuleak::attach {

namespace {

using Clock = std::chrono::steady_clock;

// The x87/SSE/AVX(-512) state fits in this (the kernel says how much it wrote).
constexpr std::size_t kExtendedStateBytes = 16384;

long trace(__ptrace_request request, int tid, std::uint64_t address, std::uint64_t data) {
  return ::ptrace(request, tid,
                  reinterpret_cast<void*>(address),  // NOLINT(performance-no-int-to-ptr)
                  reinterpret_cast<void*>(data));    // NOLINT(performance-no-int-to-ptr)
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

bool StoppedThread::stop(int pid, int tid, std::chrono::milliseconds limit, std::string* why) {
  pid_ = pid;
  tid_ = tid;
  // No options: above all not PTRACE_O_EXITKILL, so that gpuleak dying
  // detaches the process instead of killing it.
  if (trace(PTRACE_SEIZE, tid, 0, 0) != 0) {
    int error = errno;
    *why = error == EPERM
               ? "the kernel does not allow gpuleak to trace this process (ptrace: Operation not "
                 "permitted): in a container, run with CAP_SYS_PTRACE; the process may also have "
                 "made itself undumpable (PR_SET_DUMPABLE 0) or live in another user namespace"
               : "ptrace(PTRACE_SEIZE) failed: " + std::string(std::strerror(error));
    return false;
  }
  seized_ = true;
  if (trace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
    *why = "ptrace(PTRACE_INTERRUPT) failed: " + errno_text();
    return false;
  }
  Stop first = wait_for_stop(limit);
  if (first.outcome != Outcome::kStopped) {
    *why = first.outcome == Outcome::kEnded ? "the process ended"
           : first.outcome == Outcome::kTimedOut
               ? "its thread did not stop within " + std::to_string(limit.count()) + " ms"
               : "waiting for its thread to stop failed: " + errno_text();
    return false;
  }
  saved_ = first.registers;
  saved_extended_.assign(kExtendedStateBytes, 0);
  iovec state{saved_extended_.data(), saved_extended_.size()};
  saved_extended_kind_ = NT_X86_XSTATE;
  if (trace(PTRACE_GETREGSET, tid, NT_X86_XSTATE, reinterpret_cast<std::uint64_t>(&state)) != 0) {
    saved_extended_kind_ = NT_PRFPREG;
    state = {saved_extended_.data(), saved_extended_.size()};
    if (trace(PTRACE_GETREGSET, tid, NT_PRFPREG, reinterpret_cast<std::uint64_t>(&state)) != 0) {
      *why = "cannot read the thread's floating-point registers: " + errno_text();
      return false;
    }
  }
  saved_extended_.resize(state.iov_len);
  return true;
}

StoppedThread::Stop StoppedThread::wait_for_stop(std::chrono::milliseconds limit) {
  Stop stop;
  auto deadline = Clock::now() + limit;
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    int status = 0;
    pid_t got = ::waitpid(tid_, &status, __WALL | WNOHANG);
    if (got < 0) {
      stop.outcome = errno == ECHILD ? Outcome::kEnded : Outcome::kFailed;
      if (errno == ECHILD) seized_ = false;
      return stop;
    }
    if (got == tid_) {
      if (WIFEXITED(status) || WIFSIGNALED(status)) {
        seized_ = stopped_ = false;
        stop.outcome = Outcome::kEnded;
        return stop;
      }
      if (WIFSTOPPED(status)) {
        stopped_ = true;
        stop.signal = WSTOPSIG(status);
        // A signal-delivery stop carries no event; an interrupt or
        // group stop carries PTRACE_EVENT_STOP, and its "signal" is not
        // one to deliver.
        bool event_stop = (status >> 16) == PTRACE_EVENT_STOP;
        if (event_stop) stop.signal = 0;
        if (trace(PTRACE_GETREGS, tid_, 0, reinterpret_cast<std::uint64_t>(&stop.registers)) != 0) {
          stop.outcome = Outcome::kFailed;
          return stop;
        }
        stop.outcome = Outcome::kStopped;
        return stop;
      }
    }
    if (Clock::now() >= deadline) {
      stop.outcome = Outcome::kTimedOut;
      return stop;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

StoppedThread::Stop StoppedThread::resume(const user_regs_struct& registers, bool single_step,
                                          int wanted_signal, std::chrono::milliseconds limit) {
  Stop stop;
  if (!stopped_) return stop;
  user_regs_struct wanted = registers;
  modified_ = true;
  if (trace(PTRACE_SETREGS, tid_, 0, reinterpret_cast<std::uint64_t>(&wanted)) != 0) return stop;
  auto deadline = Clock::now() + limit;
  for (bool first = true;; first = false) {
    // Stops that keep coming (a signal storm, repeated event stops) end at
    // the deadline too; the thread is stopped here, and the destructor puts
    // its registers back.
    if (!first && Clock::now() >= deadline) {
      stop.outcome = Outcome::kTimedOut;
      return stop;
    }
    stopped_ = false;
    if (trace(single_step ? PTRACE_SINGLESTEP : PTRACE_CONT, tid_, 0, 0) != 0) {
      stop.outcome = Outcome::kFailed;
      return stop;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    stop = wait_for_stop(std::max(left, std::chrono::milliseconds(0)));
    if (stop.outcome == Outcome::kTimedOut) {
      // Take the thread back where it is; the destructor puts its registers back.
      if (trace(PTRACE_INTERRUPT, tid_, 0, 0) == 0) (void)wait_for_stop(std::chrono::seconds(2));
      stop.outcome = Outcome::kTimedOut;
      return stop;
    }
    if (stop.outcome != Outcome::kStopped) return stop;
    if (stop.signal == wanted_signal) return stop;
    if (stop.signal == 0) {
      // An event stop (a late interrupt, a job-control stop) before the
      // step or call was done: go on from where the thread is.
      if (single_step && stop.registers.rip != registers.rip) return stop;
      continue;
    }
    // Another signal for this thread: the program gets it at the detach.
    held_signals_.push_back(stop.signal);
    if (single_step && stop.registers.rip != registers.rip) {
      stop.signal = SIGTRAP;  // the step completed before the signal came
      return stop;
    }
  }
}

bool StoppedThread::write_memory(std::uint64_t address, const std::string& bytes,
                                 std::string* why) {
  iovec local{const_cast<char*>(bytes.data()), bytes.size()};
  // The address is the other process's: no pointer of ours.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  iovec remote{reinterpret_cast<void*>(address), bytes.size()};
  ssize_t wrote = ::process_vm_writev(tid_, &local, 1, &remote, 1, 0);
  if (wrote == static_cast<ssize_t>(bytes.size())) return true;
  // Some kernels (and seccomp profiles) refuse process_vm_writev; a tracer
  // may always write through /proc/PID/mem.
  int fd = ::open(("/proc/" + std::to_string(tid_) + "/mem").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    wrote = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(address));
    ::close(fd);
    if (wrote == static_cast<ssize_t>(bytes.size())) return true;
  }
  *why = "cannot write into the process's memory: " + errno_text();
  return false;
}

void StoppedThread::give_back() {
  if (!seized_) return;
  if (!stopped_ && trace(PTRACE_INTERRUPT, tid_, 0, 0) == 0) {
    Stop stop = wait_for_stop(std::chrono::seconds(2));
    if (stop.signal != 0) held_signals_.push_back(stop.signal);
  }
  if (stopped_ && modified_) {
    (void)trace(PTRACE_SETREGS, tid_, 0, reinterpret_cast<std::uint64_t>(&saved_));
    if (!saved_extended_.empty()) {
      iovec state{saved_extended_.data(), saved_extended_.size()};
      (void)trace(PTRACE_SETREGSET, tid_, static_cast<std::uint64_t>(saved_extended_kind_),
                  reinterpret_cast<std::uint64_t>(&state));
    }
  }
  int deliver = held_signals_.empty() ? 0 : held_signals_.front();
  (void)trace(PTRACE_DETACH, tid_, 0, static_cast<std::uint64_t>(deliver));
  for (std::size_t i = 1; i < held_signals_.size(); ++i)
    (void)::syscall(SYS_tgkill, pid_, tid_, held_signals_[i]);
  seized_ = stopped_ = false;
}

StoppedThread::~StoppedThread() { give_back(); }

}  // namespace gpuleak::attach
