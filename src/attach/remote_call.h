// Running the target's own code on a StoppedThread (x86-64, System V ABI):
// a system call made by single-stepping a `syscall` instruction found in
// the target's code, and a function call whose return address is 0 (the
// return faults; the tracer catches the fault and it is never delivered).
// The thread's registers are put back by StoppedThread, not here.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "attach/process_maps.h"
#include "attach/stopped_thread.h"

namespace gpuleak::attach {

// The address of a `syscall` instruction (0f 05) in an executable mapping
// of the C library (or of any file when it has none), or 0.
std::uint64_t find_syscall_instruction(int pid, const std::vector<Mapping>& maps);

// The system call `number` with up to six arguments; `result` is what the
// kernel returned (-errno on failure).
bool remote_syscall(StoppedThread& thread, std::uint64_t syscall_instruction, long number,
                    const std::array<std::uint64_t, 6>& arguments, std::chrono::milliseconds limit,
                    long* result, std::string* why);

// Calls the function at `function` with up to six integer or pointer
// arguments, on a stack below the thread's own (past its red zone).
bool remote_function_call(StoppedThread& thread, std::uint64_t function,
                          const std::vector<std::uint64_t>& arguments,
                          std::chrono::milliseconds limit, std::uint64_t* result, std::string* why);

}  // namespace gpuleak::attach
