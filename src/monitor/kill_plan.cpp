#include "monitor/kill_plan.h"

#include <fmt/format.h>

#include "monitor/process_tree.h"

namespace gpuleak::monitor {

std::vector<KillCandidate> plan_orphan_kills(const DoctorReport& report, const RawSample& raw,
                                             const KillContext& context) {
  std::vector<KillCandidate> candidates;
  ProcessTree tree(raw.table);
  for (const auto& finding : report.findings) {
    if (finding.kind != FindingKind::kOrphan) continue;
    const ProcessInfo* info = raw.table.find(finding.pid);
    if (!info) continue;
    const ProcessView* view = nullptr;
    for (const auto& candidate_view : report.sample.processes) {
      if (candidate_view.pid == finding.pid) view = &candidate_view;
    }
    KillCandidate candidate;
    candidate.user = view ? view->user : "?";
    candidate.target.pid = info->pid;
    candidate.target.start_ticks = info->start_ticks;
    candidate.target.description = fmt::format("{}, user {}", info->command_line(), candidate.user);
    candidate.gpu_memory_bytes = finding.memory_bytes;
    // The policy re-checks everything, including that this is an orphan.
    candidate.decision = decide_kill(*info, view && view->orphan.orphaned,
                                     tree.is_namespace_init(info->pid), context, candidate.user);
    candidates.push_back(std::move(candidate));
  }
  return candidates;
}

}  // namespace gpuleak::monitor
