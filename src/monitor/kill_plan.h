// What `gpuleak doctor --kill-orphans` would do: every orphan the diagnosis
// found, each with the kill policy's decision, and afterwards what happened.
// Plain values; building a plan reads nothing but its inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "monitor/doctor.h"
#include "monitor/kill_policy.h"
#include "monitor/process_ender.h"
#include "monitor/sample_reader.h"

namespace gpuleak::monitor {

struct KillCandidate {
  EndTarget target;
  std::string user;
  std::optional<std::uint64_t> gpu_memory_bytes;
  KillDecision decision;
};

struct KillRecord {
  bool requested = false;
  std::vector<KillCandidate> candidates;
  std::vector<EndOutcome> outcomes;
  std::vector<std::string> log;  // every line logged while ending processes, in order
  std::string refused;           // why nothing was done at all (no confirmation); else empty
};

std::vector<KillCandidate> plan_orphan_kills(const DoctorReport& report, const RawSample& raw,
                                             const KillContext& context);

}  // namespace gpuleak::monitor
