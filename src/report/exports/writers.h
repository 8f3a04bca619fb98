// The writer of each export format (report/exports.h dispatches to them).
#pragma once

#include <ostream>
#include <vector>

#include "analysis/model/report_model.h"
#include "report/exports.h"

namespace gpuleak::report {

using ProcessList = std::vector<const analysis::ProcessReport*>;

void write_memory_viz(const analysis::ProcessReport& process, const ExportOptions& options,
                      std::ostream& out);
void write_perfetto(const ProcessList& processes, const ExportOptions& options, std::ostream& out);
void write_speedscope(const ProcessList& processes, const ExportOptions& options,
                      std::ostream& out);
void write_folded(const ProcessList& processes, const ExportOptions& options, std::ostream& out);
void write_pprof(const ProcessList& processes, const ExportOptions& options, std::ostream& out);
void write_csv(const ProcessList& processes, const ExportOptions& options, std::ostream& out);

}  // namespace gpuleak::report
