// What the HTML report's script draws beyond the JSON report it embeds: the
// flame graphs of each process (growth per step, live at exit, live at the
// peak) as trees for d3-flame-graph, the live bytes of each followed site
// at every timeline row (the per-site chart), and the driver's memory over
// time for a run without steps (the chart of a short CUDA program).
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/export_detail.h"
#include "analysis/model/report_model.h"

namespace gpuleak::report {

// {"flame": {"growth-per-step": tree|null, "live-at-exit": ..., "live-at-peak": ...},
//  "site_series": {"sites": [{site_id, label, function, file, growing}], "live_bytes":
//  [[...]]}|null, "driver_memory": {"time_s": [...], "tensor_bytes": [...], "driver_bytes":
//  [...]}|null}
// A tree node is {"name", "value" (its subtree's bytes), "children"}.
nlohmann::json html_page_data(const analysis::ProcessReport& process);

// What the page needs of the analysis's second reading of a trace
// (analysis/export_detail.h): the followed sites' series and the live set
// at the peak. A process read without it gets no per-site chart and no
// peak flame graph.
analysis::ExportRequest html_page_request(const analysis::ProcessReport& first);

}  // namespace gpuleak::report
