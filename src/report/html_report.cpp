// Placeholder until the HTML report with plots lands: the JSON report in a
// page. Replaced by the uPlot-based report.
#include "report/html_report.h"

#include "report/json_report.h"

namespace gpuleak::report {

void write_html_report(std::ostream& out, const std::vector<analysis::ProcessReport>& reports) {
  std::string json = to_json(reports).dump(1);
  out << "<!doctype html><meta charset=utf-8><title>gpuleak report</title><pre>";
  for (char c : json) {
    if (c == '<')
      out << "&lt;";
    else if (c == '&')
      out << "&amp;";
    else
      out << c;
  }
  out << "</pre>\n";
}

}  // namespace gpuleak::report
