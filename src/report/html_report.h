// One self-contained HTML file: memory timeline plots (uPlot, inlined at
// build time from npm), the growing sites with their stacks, the verdict
// and the cause. No network access is needed to open it.
#pragma once

#include <ostream>
#include <vector>

#include "analysis/model/report_model.h"

namespace gpuleak::report {

// `unusable`: traces that gave no report; the page names them.
void write_html_report(std::ostream& out, const std::vector<analysis::ProcessReport>& reports,
                       const std::vector<analysis::UnusableTrace>& unusable = {});
// With the job: a table of every process (role, device memory, first CUDA
// use) and the process findings first; sections only for processes that did
// GPU work.
void write_html_report(std::ostream& out, const std::vector<analysis::ProcessReport>& reports,
                       const analysis::JobReport& job,
                       const std::vector<analysis::UnusableTrace>& unusable = {});

}  // namespace gpuleak::report
