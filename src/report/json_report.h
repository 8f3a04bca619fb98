// The report for machines: schema "gpuleak-report/1", documented field by
// field in docs/json-schema.md. Strings are bytes from the trace: write the
// value with json_text() (report/json_text.h), which carries any bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "analysis/model/report_model.h"

namespace gpuleak::report {

inline constexpr const char* kReportSchema = "gpuleak-report/1";

nlohmann::json to_json(const std::vector<analysis::ProcessReport>& reports,
                       const std::vector<analysis::UnusableTrace>& unusable = {});
nlohmann::json to_json(const analysis::ProcessReport& report);
// With the job: every process's role and first CUDA use, and the top-level
// "job" object (processes, device memory as the driver counts it, findings).
nlohmann::json to_json(const std::vector<analysis::ProcessReport>& reports,
                       const analysis::JobReport& job,
                       const std::vector<analysis::UnusableTrace>& unusable = {});

}  // namespace gpuleak::report
