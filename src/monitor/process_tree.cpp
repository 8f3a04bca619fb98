#include "monitor/process_tree.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpuleak::monitor {

namespace {

constexpr const char* kDataLoaderThreadName = "pt_data_worker";
constexpr std::size_t kDescribeCommandChars = 60;

bool any_argument_contains(const ProcessInfo& info, const char* needle) {
  return std::any_of(info.argv.begin(), info.argv.end(),
                     [&](const std::string& arg) { return arg.find(needle) != std::string::npos; });
}

std::string shortened(std::string text, std::size_t limit) {
  if (text.size() <= limit) return text;
  text.resize(limit - 3);
  return text + "...";
}

}  // namespace

const char* relation_kind_name(RelationKind kind) {
  switch (kind) {
    case RelationKind::kNone:
      return "none";
    case RelationKind::kDataLoaderWorker:
      return "dataloader_worker";
    case RelationKind::kMultiprocessingWorker:
      return "multiprocessing_worker";
    case RelationKind::kForkedChild:
      return "forked_child";
    case RelationKind::kChild:
      return "child";
  }
  return "none";
}

bool is_forkserver(const ProcessInfo& info) {
  return any_argument_contains(info, "multiprocessing.forkserver import main");
}

bool is_spawned_worker(const ProcessInfo& info) {
  return any_argument_contains(info, "--multiprocessing-fork") ||
         any_argument_contains(info, "multiprocessing.spawn import spawn_main");
}

ProcessTree::ProcessTree(const ProcessTable& table) : table_(table) {
  for (const auto& [pid, info] : table.processes) children_[info.ppid].push_back(pid);
}

const std::vector<int>& ProcessTree::children(int pid) const {
  static const std::vector<int> kNone;
  auto it = children_.find(pid);
  return it == children_.end() ? kNone : it->second;
}

std::vector<int> ProcessTree::ancestors(int pid) const {
  std::vector<int> chain;
  const ProcessInfo* info = find(pid);
  // The bound guards against a cycle in a table read while processes changed.
  while (info && info->ppid > 0 && chain.size() < 4096) {
    chain.push_back(info->ppid);
    info = find(info->ppid);
  }
  return chain;
}

bool ProcessTree::is_namespace_init(int pid) const {
  if (pid == 1) return true;
  const ProcessInfo* info = find(pid);
  return info && info->namespace_pid == 1;
}

std::string ProcessTree::describe(int pid) const {
  const ProcessInfo* info = find(pid);
  if (!info) return fmt::format("PID {}", pid);
  return fmt::format("PID {} ({})", pid, shortened(info->command_line(), kDescribeCommandChars));
}

Relation ProcessTree::relation(int pid) const {
  Relation relation;
  const ProcessInfo* info = find(pid);
  if (!info || info->ppid <= 0) return relation;
  const ProcessInfo* parent = find(info->ppid);
  // Workers of a forkserver work for the program that started the forkserver.
  int owner = info->ppid;
  if (parent && is_forkserver(*parent) && parent->ppid > 1) owner = parent->ppid;
  bool parent_is_init = is_namespace_init(info->ppid);

  if (info->comm == kDataLoaderThreadName) {
    relation.kind = RelationKind::kDataLoaderWorker;
  } else if (is_spawned_worker(*info) || (parent && is_forkserver(*parent))) {
    relation.kind = RelationKind::kMultiprocessingWorker;
  } else if (parent && !parent_is_init && !info->argv.empty() && parent->argv == info->argv) {
    relation.kind = RelationKind::kForkedChild;
  } else if (parent && !parent_is_init) {
    relation.kind = RelationKind::kChild;
  } else {
    return relation;
  }
  relation.of_pid = owner;
  switch (relation.kind) {
    case RelationKind::kDataLoaderWorker:
      relation.text = parent_is_init ? "DataLoader worker whose parent is gone"
                                     : fmt::format("DataLoader worker of PID {}", owner);
      break;
    case RelationKind::kMultiprocessingWorker:
      relation.text = parent_is_init ? "multiprocessing worker whose parent is gone"
                                     : fmt::format("multiprocessing worker of PID {}", owner);
      break;
    case RelationKind::kForkedChild:
      relation.text = fmt::format("forked child of PID {}", owner);
      break;
    default:
      relation.text = fmt::format("child of PID {} ({})", owner, parent ? parent->comm : "?");
      break;
  }
  if (parent_is_init) relation.of_pid = 0;
  return relation;
}

OrphanAssessment ProcessTree::assess_orphan(int pid) const {
  OrphanAssessment result;
  const ProcessInfo* info = find(pid);
  if (!info || info->kernel_thread || info->is_zombie() || is_namespace_init(pid)) return result;
  // Parent outside our PID namespace: we cannot see who it is.
  if (info->ppid <= 0) return result;
  // Services and shell jobs lead their own session or group; they were started that way.
  if (info->sid == pid || info->pgid == pid) return result;
  const ProcessInfo* parent = find(info->ppid);
  if (!parent) return result;  // the parent vanished during the scan; look again next time

  const ProcessInfo* group_leader = find(info->pgid);
  bool group_leader_gone = group_leader == nullptr || group_leader->is_zombie();
  std::string group_words =
      group_leader_gone
          ? fmt::format("the process that started its process group (PID {}) has exited",
                        info->pgid)
          : fmt::format("its process group is led by {}", describe(info->pgid));

  if (is_namespace_init(info->ppid)) {
    // Started straight into init's own group: init (a container's shell) ran it.
    if (info->pgid == parent->pgid) return result;
    result.orphaned = true;
    result.evidence.push_back(
        fmt::format("its parent is {}, the init process that adopts processes whose parent exited",
                    describe(info->ppid)));
    result.evidence.push_back(group_words);
    return result;
  }

  if (parent->start_ticks > info->start_ticks) {
    result.evidence.push_back(
        fmt::format("its parent {} started after it did, so it was adopted, not created, by it",
                    describe(info->ppid)));
  }
  if (parent->sid != info->sid) {
    result.evidence.push_back(
        fmt::format("it is in session {} but its parent {} is in session {}; a child keeps its "
                    "parent's session unless it starts its own",
                    info->sid, describe(info->ppid), parent->sid));
  }
  if (group_leader_gone && parent->pgid != info->pgid) {
    result.evidence.push_back(group_words + ", and its current parent " + describe(info->ppid) +
                              " is in another process group");
  }
  result.orphaned = !result.evidence.empty();
  if (result.orphaned) {
    result.evidence.insert(result.evidence.begin(),
                           fmt::format("it was re-parented to {} (a subreaper) after its "
                                       "parent exited",
                                       describe(info->ppid)));
  }
  return result;
}

}  // namespace gpuleak::monitor
