// Recognizes code that starts processes: multiprocessing / torch.multiprocessing
// Process and Pool (directly or through a context), ProcessPoolExecutor,
// subprocess.Popen and os.fork, and the start method each one uses.
#pragma once

#include <string>

#include "file_analysis.h"

namespace gpuleak::lint {

enum class ProcessStart { kNone, kProcess, kPool, kExecutor, kPopen, kFork };

ProcessStart process_start_kind(const FileAnalysis& file, NodeId call);

// "fork", "spawn", "forkserver" for multiprocessing-style starts (the file's
// set_start_method, a get_context(...) receiver, mp_context=); "fork" for
// os.fork; "" for subprocess.Popen (a new program, not a fork of this one).
std::string start_method(const FileAnalysis& file, NodeId call, ProcessStart kind);

}  // namespace gpuleak::lint
