// One thread of another process, held stopped under ptrace while gpuleak
// works on it, and always given back as it was.
//
// stop() seizes the thread (PTRACE_SEIZE: no SIGSTOP is sent) and
// interrupts it; its general registers and its whole x87/SSE/AVX state
// are saved then. The destructor puts both back and detaches, on every
// path: signals that arrived for the thread while it was held are
// delivered then, so the program sees them late but sees them.
//
// Not thread-safe; the thread that called stop() must make every other
// call (ptrace belongs to the tracing thread).
#pragma once

#include <sys/user.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gpuleak::attach {

class StoppedThread {
 public:
  StoppedThread() = default;
  StoppedThread(const StoppedThread&) = delete;
  StoppedThread& operator=(const StoppedThread&) = delete;
  ~StoppedThread();

  // Seizes and stops thread `tid` of process `pid`; false with `why`
  // (ptrace refused, the thread ended, it did not stop within `limit`).
  bool stop(int pid, int tid, std::chrono::milliseconds limit, std::string* why);

  int tid() const { return tid_; }
  // The registers as they were when the thread was stopped.
  const user_regs_struct& saved_registers() const { return saved_; }

  // How a resume() ended.
  enum class Outcome { kStopped, kEnded, kTimedOut, kFailed };
  struct Stop {
    Outcome outcome = Outcome::kFailed;
    int signal = 0;  // the signal of the stop (SIGTRAP after a single step)
    user_regs_struct registers{};
  };

  // Sets the registers (the saved ones are put back by the destructor) and
  // lets the thread run (one instruction when `single_step`) until it stops
  // with `wanted_signal`, the thread ends, or `limit` passes (then it is
  // interrupted again). Other signals meanwhile are held for the detach.
  Stop resume(const user_regs_struct& registers, bool single_step, int wanted_signal,
              std::chrono::milliseconds limit);

  // Writes `bytes` at `address` of the process (process_vm_writev, then
  // /proc/PID/mem). False with `why`.
  bool write_memory(std::uint64_t address, const std::string& bytes, std::string* why);

 private:
  // Waits until the thread is in a ptrace stop, up to `limit`.
  Stop wait_for_stop(std::chrono::milliseconds limit);
  void give_back();

  int pid_ = 0;
  int tid_ = 0;
  bool seized_ = false;
  bool stopped_ = false;   // in a ptrace stop now
  bool modified_ = false;  // registers differ from the saved ones
  user_regs_struct saved_{};
  std::vector<unsigned char> saved_extended_;  // NT_X86_XSTATE (or NT_PRFPREG) as read
  int saved_extended_kind_ = 0;
  std::vector<int> held_signals_;
};

}  // namespace gpuleak::attach
