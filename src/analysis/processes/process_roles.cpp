#include "analysis/processes/process_roles.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace gpuleak::analysis {

namespace {

constexpr const char* kDataLoaderThreadName = "pt_data_worker";

bool any_argument_contains(const std::vector<std::string>& argv, const char* needle) {
  return std::any_of(argv.begin(), argv.end(),
                     [&](const std::string& a) { return a.find(needle) != std::string::npos; });
}

// A Python frame in `file_suffix` (a path ending) running `function`.
bool has_python_frame(const std::vector<Frame>& frames, const char* file_suffix,
                      const char* function) {
  return std::any_of(frames.begin(), frames.end(), [&](const Frame& f) {
    return f.language == Frame::Language::kPython && f.file.ends_with(file_suffix) &&
           (function == nullptr || f.function == function);
  });
}

ProcessRole make(RoleKind kind, int of_pid, std::string text) {
  return ProcessRole{kind, of_pid, std::move(text)};
}

// A process id from an annotation; 0 when there is none or it cannot be one.
int pid_or_zero(const std::optional<std::int64_t>& pid) {
  return pid && *pid > 0 && *pid <= INT_MAX ? static_cast<int>(*pid) : 0;
}

std::string of_text(int of_pid) { return of_pid > 0 ? fmt::format(" of PID {}", of_pid) : ""; }

}  // namespace

const char* role_kind_name(RoleKind kind) {
  switch (kind) {
    case RoleKind::kMain:
      return "main";
    case RoleKind::kDataLoaderWorker:
      return "dataloader_worker";
    case RoleKind::kPoolWorker:
      return "pool_worker";
    case RoleKind::kMultiprocessingWorker:
      return "multiprocessing_worker";
    case RoleKind::kMultiprocessingHelper:
      return "multiprocessing_helper";
    case RoleKind::kRank:
      return "rank";
    case RoleKind::kForkedChild:
      return "forked_child";
    case RoleKind::kSubprocess:
      return "subprocess";
    case RoleKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::vector<std::string> split_command_line(const std::string& command_line) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < command_line.size()) {
    std::size_t end = command_line.find(' ', at);
    if (end == std::string::npos) end = command_line.size();
    if (end > at) out.push_back(command_line.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

ProcessRole classify_role(const RoleEvidence& p, const RoleEvidence* parent, int main_pid) {
  if (p.pid == main_pid && main_pid > 0) return make(RoleKind::kMain, 0, "main program");

  const auto* multiprocessing =
      p.role && p.role->multiprocessing ? &*p.role->multiprocessing : nullptr;
  std::string mp_name = multiprocessing ? multiprocessing->name.value_or("") : "";
  // multiprocessing's own idea of the parent is the process that created this
  // one (the program, also for forkserver children); else the parent pid.
  int owner = multiprocessing ? pid_or_zero(multiprocessing->parent_pid) : 0;
  bool parent_is_forkserver =
      parent && any_argument_contains(parent->argv, "multiprocessing.forkserver");
  if (owner <= 0)
    owner = parent_is_forkserver && parent->parent_pid > 1 ? parent->parent_pid : p.parent_pid;

  // DataLoader workers: the package's annotation, PyTorch's thread name, or
  // the worker loop on the stack of the first CUDA use.
  if (p.role && p.role->dataloader_worker) {
    std::optional<std::int64_t> id = p.role->dataloader_worker->id;
    return make(RoleKind::kDataLoaderWorker, owner,
                (id && *id >= 0 ? fmt::format("DataLoader worker {}", *id)
                                : std::string("DataLoader worker")) +
                    of_text(owner));
  }
  if (p.comm == kDataLoaderThreadName ||
      has_python_frame(p.frames, "torch/utils/data/_utils/worker.py", "_worker_loop")) {
    return make(RoleKind::kDataLoaderWorker, owner, "DataLoader worker" + of_text(owner));
  }

  // Pool workers.
  bool pool_name = mp_name.find("PoolWorker-") != std::string::npos;
  if (pool_name || has_python_frame(p.frames, "multiprocessing/pool.py", "worker") ||
      has_python_frame(p.frames, "concurrent/futures/process.py", "_process_worker")) {
    return make(RoleKind::kPoolWorker, owner,
                "pool worker" + of_text(owner) + (pool_name ? " (" + mp_name + ")" : ""));
  }

  // Ranks of a distributed job.
  if (p.distributed && p.distributed->rank && *p.distributed->rank >= 0) {
    std::int64_t rank = *p.distributed->rank;
    std::int64_t world = p.distributed->world_size.value_or(0);
    return make(
        RoleKind::kRank, owner,
        world > 0 ? fmt::format("rank {} of {}", rank, world) : fmt::format("rank {}", rank));
  }

  // torch.multiprocessing.spawn's processes, and other multiprocessing children.
  if (has_python_frame(p.frames, "torch/multiprocessing/spawn.py", "_wrap")) {
    return make(RoleKind::kMultiprocessingWorker, owner,
                "torch.multiprocessing.spawn process" + of_text(owner));
  }
  bool helper = any_argument_contains(p.argv, "multiprocessing.resource_tracker") ||
                any_argument_contains(p.argv, "multiprocessing.semaphore_tracker") ||
                any_argument_contains(p.argv, "multiprocessing.forkserver import main");
  if (helper) {
    return make(RoleKind::kMultiprocessingHelper, p.parent_pid,
                "multiprocessing helper" + of_text(p.parent_pid));
  }
  bool spawned = any_argument_contains(p.argv, "multiprocessing.spawn import spawn_main") ||
                 any_argument_contains(p.argv, "--multiprocessing-fork");
  if ((!mp_name.empty() && mp_name != "MainProcess") || spawned || parent_is_forkserver ||
      has_python_frame(p.frames, "multiprocessing/process.py", "_bootstrap")) {
    return make(RoleKind::kMultiprocessingWorker, owner,
                "multiprocessing worker" + of_text(owner) +
                    (!mp_name.empty() && mp_name != "MainProcess" ? " (" + mp_name + ")" : ""));
  }

  if (parent && !p.argv.empty() && parent->argv == p.argv) {
    return make(RoleKind::kForkedChild, p.parent_pid, "forked child" + of_text(p.parent_pid));
  }
  if (parent || p.parent_pid > 1) {
    std::string program = p.argv.empty() ? p.comm : p.argv.front();
    auto slash = program.rfind('/');
    if (slash != std::string::npos) program = program.substr(slash + 1);
    return make(
        RoleKind::kSubprocess, p.parent_pid,
        "subprocess" + of_text(p.parent_pid) + (program.empty() ? "" : " (" + program + ")"));
  }
  return make(RoleKind::kUnknown, 0, "process of the job");
}

}  // namespace gpuleak::analysis
