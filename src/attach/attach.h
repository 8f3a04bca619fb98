// Joining a running process from outside: gpuleak's own ptrace injector
// (x86_64 Linux only; no gdb needed), used by `gpuleak attach PID`.
//
// What it does to the target, and only that:
//   * stops one thread for a few milliseconds (PTRACE_SEIZE + PTRACE_INTERRUPT:
//     no SIGSTOP is sent, the parent sees no stop);
//   * maps one private read-write page with a remote mmap(2), made by
//     single-stepping a `syscall` instruction that is already in the
//     target's code (no code is ever written into the target);
//   * calls one or two functions of the target on that thread, with a
//     return address of 0: the return faults, the fault is caught by the
//     tracer and never delivered;
//   * restores every register (general, x87/SSE/AVX state) and detaches.
// Signals that arrive for the thread meanwhile are held and delivered at
// detach. Every wait is bounded (Limits); a call that does not return in
// time is abandoned: the thread's registers are put back and it goes on
// from where it was stopped.
//
// Contract: every function returns false (or a non-empty reason) with one
// sentence a user can act on; none throws. A process is never left traced:
// detaching is done by the destructor of the stopped thread on every path,
// including errors. Not thread-safe: one injection at a time per process.
// Callers should block SIGINT/SIGTERM while an injection runs (a tracer
// killed between setting registers and restoring them leaves the thread
// running the injected call with a return address of 0: it would crash);
// SIGKILL cannot be blocked, which is why the window is kept to milliseconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gpuleak::attach {

// Why gpuleak may not join `pid`, or "" when it may: no such process, our
// own, another user's (unless we are root), a kernel thread, stopped (job
// control), already traced (TracerPid), Yama's ptrace_scope, not x86_64.
// ptrace itself may still refuse (a container's seccomp, PR_SET_DUMPABLE 0,
// another user namespace); inject_* then says so.
std::string why_not_attachable(int pid);

// The CPython interpreter found in a process's memory maps.
struct PythonInterpreter {
  int major = 0;
  int minor = 0;
  std::string file;                     // the ELF file that holds the C API (binary or libpython)
  std::uint64_t add_pending_call = 0;   // Py_AddPendingCall, in the target's address space
  std::uint64_t run_simple_string = 0;  // PyRun_SimpleString
};

// The Python versions schedule_python_source knows (CPython's pending calls
// and PyRun_SimpleString behave the same from 3.9 to 3.14).
inline constexpr int kOldestPythonMinor = 9;
inline constexpr int kNewestPythonMinor = 14;

// Finds CPython in `pid` (its executable or a libpython it mapped). False
// with `why` when there is none, or its version cannot be told.
bool find_python_interpreter(int pid, PythonInterpreter* found, std::string* why);

// Bounds on each step of an injection.
struct Limits {
  std::chrono::milliseconds stop_thread{2000};  // for the thread to stop after PTRACE_INTERRUPT
  std::chrono::milliseconds remote_call{5000};  // for one remote syscall or function call
  // load_library: for one of the threads to wait in a safe system call
  // (a busy program is looked at again every 10 ms until then).
  std::chrono::milliseconds find_waiting_thread{3000};
};

// Has the interpreter run `source` on its main thread at its next safe
// point (Py_AddPendingCall(PyRun_SimpleString, page)), with the GIL held;
// returns once it is queued, before it runs. The page stays mapped (the
// interpreter reads it when the call runs); `source` must catch every
// exception itself (PyRun_SimpleString prints and swallows them, and a
// SystemExit would end the process).
bool schedule_python_source(int pid, const PythonInterpreter& python, const std::string& source,
                            const Limits& limits, std::string* why);

// Loads the shared library `path` into `pid` with dlopen, called on a thread
// that is blocked in a system call that holds no allocator lock (futex,
// poll, nanosleep, read...), after putenv() of each "NAME=value" in
// `environment`; then calls `entry` (a function of no arguments in that
// library) on the same thread. For processes that run no Python. Returns
// the entry's return value in `entry_result`.
bool load_library(int pid, const std::string& path, const std::vector<std::string>& environment,
                  const std::string& entry, const Limits& limits, long* entry_result,
                  std::string* why);

}  // namespace gpuleak::attach
