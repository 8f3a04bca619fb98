#include "monitor/doctor_json.h"

#include "monitor/sample_json.h"

namespace gpuleak::monitor {

using nlohmann::json;

json doctor_to_json(const DoctorReport& report, const KillRecord& kills) {
  SampleJsonOptions options;
  options.include_trends = false;
  json out = sample_to_json(report.sample, options);
  out.erase("sample");
  out.erase("elapsed_s");
  for (std::size_t i = 0; i < report.sample.processes.size(); ++i) {
    out["processes"][i]["verdict"] = report.verdicts[i];
  }
  json findings = json::array();
  for (const auto& finding : report.findings) {
    findings.push_back({
        {"kind", finding_kind_name(finding.kind)},
        {"severity", severity_name(finding.severity)},
        {"pid", finding.pid > 0 ? json(finding.pid) : json(nullptr)},
        {"device_index", finding.device_index ? json(*finding.device_index) : json(nullptr)},
        {"memory_bytes", finding.memory_bytes ? json(*finding.memory_bytes) : json(nullptr)},
        {"summary", finding.summary},
        {"evidence", finding.evidence},
        {"cause", finding.cause},
        {"action", finding.action},
        {"can_kill", finding.can_kill},
    });
  }
  out["findings"] = std::move(findings);
  out["has_problems"] = report.has_problems();
  out["gpu_memory_examined"] = report.gpu_memory_examined();

  json kill = {{"requested", kills.requested}};
  if (kills.requested) {
    json candidates = json::array();
    for (const auto& candidate : kills.candidates) {
      candidates.push_back({
          {"pid", candidate.target.pid},
          {"user", candidate.user},
          {"allowed", candidate.decision.allowed},
          {"reason", candidate.decision.allowed ? json(nullptr) : json(candidate.decision.reason)},
      });
    }
    json outcomes = json::array();
    for (const auto& outcome : kills.outcomes) {
      outcomes.push_back({{"pid", outcome.pid},
                          {"result", end_result_name(outcome.result)},
                          {"message", outcome.message}});
    }
    kill["candidates"] = std::move(candidates);
    kill["outcomes"] = std::move(outcomes);
    kill["log"] = kills.log;
    kill["refused"] = kills.refused.empty() ? json(nullptr) : json(kills.refused);
  }
  out["kill_orphans"] = std::move(kill);
  return out;
}

}  // namespace gpuleak::monitor
