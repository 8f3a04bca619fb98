// The process tree of one scan, and what it says about each process:
// whose worker it is, and whether it was orphaned.
//
// Worker detection (a DataLoader or multiprocessing worker that touches CUDA
// creates its own context, hundreds of MiB each):
//   * PyTorch (>= 2.1) names each DataLoader worker's main thread
//     "pt_data_worker", so /proc/PID/comm says so whatever the start method;
//   * multiprocessing's 'spawn' children run
//     "python -c 'from multiprocessing.spawn import spawn_main; ...' --multiprocessing-fork";
//   * 'forkserver' children are forked by the forkserver process
//     ("from multiprocessing.forkserver import main"), itself a child of the
//     program that asked for them, so they belong to the forkserver's parent;
//   * 'fork' children carry their parent's exact command line.
//
// Orphan detection: the kernel re-parents a process whose parent exits to
// the nearest "subreaper" or to PID 1 of its PID namespace. Nothing in /proc
// records the original parent, so the evidence is indirect, and each rule
// below is reported as evidence in words:
//   * its parent is PID 1 (or a container's init), and it leads neither its
//     own process group nor its own session (services and shell jobs do) and
//     was not started into its parent's group;
//   * or its parent started after it did (a parent always exists first);
//   * or it is in a different session than its parent without leading one
//     (a child keeps its parent's session unless it calls setsid());
//   * or the process that started its process group has exited and its
//     current parent belongs to another group.
// A process whose parent is outside our PID namespace (ppid 0) is never
// called an orphan: we cannot see its parent.
//
// Immutable after construction; thread-safe for reading. Holds a reference to
// the table it was built from, which must outlive it.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "monitor/proc_scanner.h"

namespace gpuleak::monitor {

enum class RelationKind {
  kNone,                   // no parent we can see, or a plain child of init
  kDataLoaderWorker,       // PyTorch DataLoader worker
  kMultiprocessingWorker,  // multiprocessing spawn/forkserver child
  kForkedChild,            // forked copy of its parent (same command line)
  kChild,                  // any other child
};

struct Relation {
  RelationKind kind = RelationKind::kNone;
  int of_pid = 0;    // the process the worker works for (its parent, or the forkserver's parent)
  std::string text;  // "DataLoader worker of PID 4700"; empty for kNone
};

struct OrphanAssessment {
  bool orphaned = false;
  std::vector<std::string> evidence;  // why we think so, in words; empty when not orphaned
};

// "relation_kind" strings used in JSON output.
const char* relation_kind_name(RelationKind kind);

class ProcessTree {
 public:
  explicit ProcessTree(const ProcessTable& table);

  const ProcessInfo* find(int pid) const { return table_.find(pid); }
  const std::vector<int>& children(int pid) const;
  // Parent first, up to (and including) the root of the visible tree.
  std::vector<int> ancestors(int pid) const;
  // True for PID 1 and for the init of a container (pid 1 in its own namespace).
  bool is_namespace_init(int pid) const;
  Relation relation(int pid) const;
  OrphanAssessment assess_orphan(int pid) const;
  // "PID 4700 (python3 train.py)", with the command line cut to a readable length.
  std::string describe(int pid) const;

 private:
  const ProcessTable& table_;
  std::unordered_map<int, std::vector<int>> children_;
};

// True when this process is multiprocessing's forkserver.
bool is_forkserver(const ProcessInfo& info);
// True when this process is a multiprocessing 'spawn' child.
bool is_spawned_worker(const ProcessInfo& info);

}  // namespace gpuleak::monitor
