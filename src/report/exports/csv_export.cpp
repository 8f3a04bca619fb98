// The CSV export (RFC 4180): one row per followed site per kept step
// boundary, for spreadsheets and pandas. The followed sites are the growing
// ones, or the largest live at the end when nothing grows
// (report/exports.h, export_request).
#include <fmt/format.h>

#include <map>

#include "report/exports/writers.h"

namespace gpuleak::report {

namespace {

// Quoted when it holds a comma, a quote or a line break; quotes doubled.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

}  // namespace

void write_csv(const ProcessList& processes, const ExportOptions&, std::ostream& out) {
  out << "pid,step,time_s,site_id,site,function,growing,live_bytes\r\n";
  for (const analysis::ProcessReport* p : processes) {
    if (!p->export_detail) continue;
    const analysis::ExportDetail& d = *p->export_detail;
    std::map<std::uint32_t, bool> growing;
    for (const analysis::SiteGrowth& s : p->growth.sites) growing[s.site_id] = true;
    const analysis::Timeline& t = p->timeline;
    for (std::size_t i = 0; i < t.step.size() && i < t.site_live_bytes.size(); ++i) {
      for (std::size_t s = 0; s < d.series_site_ids.size() && s < t.site_live_bytes[i].size();
           ++s) {
        std::uint32_t id = d.series_site_ids[s];
        auto site = d.sites.find(id);
        std::string label = site != d.sites.end() ? site->second.label() : "?";
        std::string function = site != d.sites.end() ? site->second.function : "";
        out << p->process.pid << ',' << t.step[i] << ',' << fmt::format("{:.6f}", t.time_s[i])
            << ',' << id << ',' << csv_field(label) << ',' << csv_field(function) << ','
            << (growing.count(id) ? "yes" : "no") << ',' << t.site_live_bytes[i][s] << "\r\n";
      }
    }
  }
}

}  // namespace gpuleak::report
