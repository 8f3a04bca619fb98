#include "report/report_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "quantity/units.h"
#include "report/file_names.h"
#include "report/json_report.h"

namespace gpuleak::report {

using nlohmann::json;

namespace {

// A rate counts as changed when it moved by half or more (the trend's own
// spread between runs of one program is well below that).
constexpr double kRateChangeFactor = 1.5;

template <class T>
T field(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

// The program a process runs: the executable, and the script for an
// interpreter ("python3 train.py" and "python3 eval.py" differ).
std::string program_of(const json& process) {
  std::string program = base_name(field<std::string>(process, "executable", ""));
  std::string command = field<std::string>(process, "command_line", "");
  std::size_t at = 0;
  while (at < command.size()) {
    std::size_t end = command.find(' ', at);
    if (end == std::string::npos) end = command.size();
    std::string word = command.substr(at, end - at);
    if (word.size() > 3 && word.ends_with(".py")) {
      return program + " " + base_name(word);
    }
    at = end + 1;
  }
  return program;
}

bool did_gpu_work(const json& process) {
  const json& events = process.value("events", json::object());
  return field<std::uint64_t>(events, "allocations", 0) > 0;
}

struct SiteOf {
  std::string file, function, label;
  std::uint64_t line = 0;
  double rate = 0;
};

std::vector<SiteOf> growing_sites(const json& process) {
  std::vector<SiteOf> out;
  const json& growth = process.value("growth", json::object());
  for (const json& s : growth.value("sites", json::array())) {
    if (field<bool>(s, "bounded", false)) continue;  // grew and stopped: not growing now
    const json& site = s.value("site", json::object());
    SiteOf o;
    o.file = base_name(field<std::string>(site, "file", ""));
    o.function = field<std::string>(site, "function", "");
    o.line = field<std::uint64_t>(site, "line", 0);
    o.label = field<std::string>(site, "label", "?");
    o.rate = field<double>(s, "rate_bytes_per_step", 0);
    out.push_back(std::move(o));
  }
  return out;
}

ProcessDiff diff_process(const json& before, const json& after) {
  ProcessDiff d;
  d.pid_before = field<std::uint64_t>(before, "pid", 0);
  d.pid_after = field<std::uint64_t>(after, "pid", 0);
  d.program_before = program_of(before);
  d.program_after = program_of(after);
  const json& gb = before.value("growth", json::object());
  const json& ga = after.value("growth", json::object());
  d.verdict_before = field<std::string>(gb, "verdict", "?");
  d.verdict_after = field<std::string>(ga, "verdict", "?");
  d.rate_before_bytes_per_step = field<double>(gb, "rate_bytes_per_step", 0);
  d.rate_after_bytes_per_step = field<double>(ga, "rate_bytes_per_step", 0);
  std::vector<SiteOf> b = growing_sites(before), a = growing_sites(after);
  std::vector<bool> a_used(a.size(), false);
  auto pair_with = [&](const SiteOf& s, bool same_line) -> std::optional<std::size_t> {
    std::optional<std::size_t> found;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a_used[i] || a[i].file != s.file || a[i].function != s.function) continue;
      if (same_line && a[i].line != s.line) continue;
      if (found) return std::nullopt;  // two candidates: no guess
      found = i;
    }
    return found;
  };
  for (const SiteOf& s : b) {
    std::optional<std::size_t> i = pair_with(s, true);
    if (!i) i = pair_with(s, false);
    SiteChange c;
    c.function = s.function;
    c.rate_before_bytes_per_step = s.rate;
    if (!i) {
      c.kind = SiteChange::Kind::kGone;
      c.label = s.label;
    } else {
      a_used[*i] = true;
      c.label = a[*i].label;
      c.rate_after_bytes_per_step = a[*i].rate;
      double ratio = s.rate > 0 ? a[*i].rate / s.rate : 1;
      c.kind = ratio >= kRateChangeFactor       ? SiteChange::Kind::kFaster
               : ratio <= 1 / kRateChangeFactor ? SiteChange::Kind::kSlower
                                                : SiteChange::Kind::kSame;
    }
    d.sites.push_back(std::move(c));
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a_used[i]) continue;
    SiteChange c;
    c.kind = SiteChange::Kind::kNew;
    c.label = a[i].label;
    c.function = a[i].function;
    c.rate_after_bytes_per_step = a[i].rate;
    d.sites.push_back(std::move(c));
  }
  return d;
}

std::vector<json> gpu_processes(const json& report, const char* side) {
  if (!report.is_object() || field<std::string>(report, "schema", "") != kReportSchema) {
    throw std::invalid_argument(
        fmt::format("{} is not a gpuleak report (schema {})", side, kReportSchema));
  }
  std::vector<json> out;
  for (const json& p : report.value("processes", json::array())) {
    if (p.is_object() && did_gpu_work(p)) out.push_back(p);
  }
  std::stable_sort(out.begin(), out.end(), [](const json& x, const json& y) {
    return field<std::uint64_t>(x, "start_unix_ns", 0) <
           field<std::uint64_t>(y, "start_unix_ns", 0);
  });
  return out;
}

std::optional<std::int64_t> rank_of(const json& process) {
  const json& d = process.value("distributed", json::object());
  if (!d.is_object()) return std::nullopt;
  auto it = d.find("rank");
  if (it == d.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

std::string rate_text(double bytes_per_step) {
  return quantity::format_bytes(
             static_cast<std::uint64_t>(std::llround(std::max(0.0, bytes_per_step)))) +
         "/step";
}

}  // namespace

const char* site_change_name(SiteChange::Kind kind) {
  switch (kind) {
    case SiteChange::Kind::kGone:
      return "gone";
    case SiteChange::Kind::kNew:
      return "new";
    case SiteChange::Kind::kFaster:
      return "faster";
    case SiteChange::Kind::kSlower:
      return "slower";
    case SiteChange::Kind::kSame:
      return "same";
  }
  return "?";
}

bool RunDiff::new_growth() const {
  for (const ProcessDiff& p : processes) {
    if (p.verdict_after == "LEAK" && p.verdict_before != "LEAK") return true;
    for (const SiteChange& s : p.sites) {
      if (s.kind == SiteChange::Kind::kNew || s.kind == SiteChange::Kind::kFaster) return true;
    }
  }
  for (const std::string& p : only_after) {
    if (p.find("LEAK") != std::string::npos && p.find("NO LEAK") == std::string::npos) return true;
  }
  return false;
}

RunDiff diff_reports(const json& before, const json& after) {
  std::vector<json> b = gpu_processes(before, "BEFORE"), a = gpu_processes(after, "AFTER");
  RunDiff diff;
  std::vector<bool> a_used(a.size(), false);
  auto describe = [](const json& p) {
    return fmt::format("pid {} ({}, {})", field<std::uint64_t>(p, "pid", 0), program_of(p),
                       field<std::string>(p.value("growth", json::object()), "verdict", "?"));
  };
  for (std::size_t i = 0; i < b.size(); ++i) {
    std::optional<std::size_t> partner;
    if (auto rank = rank_of(b[i])) {
      for (std::size_t j = 0; j < a.size() && !partner; ++j) {
        if (!a_used[j] && rank_of(a[j]) == rank) partner = j;
      }
    }
    for (std::size_t j = 0; j < a.size() && !partner; ++j) {
      if (!a_used[j] && !rank_of(a[j])) partner = j;  // the next unranked one, in start order
    }
    if (!partner) {
      diff.only_before.push_back(describe(b[i]));
      continue;
    }
    a_used[*partner] = true;
    ProcessDiff d = diff_process(b[i], a[*partner]);
    if (d.program_before != d.program_after) diff.same_program = false;
    diff.processes.push_back(std::move(d));
  }
  for (std::size_t j = 0; j < a.size(); ++j) {
    if (!a_used[j]) diff.only_after.push_back(describe(a[j]));
  }
  return diff;
}

void write_diff_text(std::ostream& out, const RunDiff& diff) {
  if (diff.processes.empty() && diff.only_before.empty() && diff.only_after.empty()) {
    out << "Neither run has a process that did GPU work: nothing to compare.\n";
    return;
  }
  for (const ProcessDiff& p : diff.processes) {
    out << fmt::format("pid {} ({}) -> pid {} ({}): {} -> {}", p.pid_before, p.program_before,
                       p.pid_after, p.program_after, p.verdict_before, p.verdict_after);
    if (p.verdict_before == "LEAK" || p.verdict_after == "LEAK") {
      out << fmt::format(" ({} -> {})", rate_text(p.rate_before_bytes_per_step),
                         rate_text(p.rate_after_bytes_per_step));
    }
    out << "\n";
    std::size_t shown = 0;
    for (const SiteChange& s : p.sites) {
      if (s.kind == SiteChange::Kind::kSame) continue;
      ++shown;
      switch (s.kind) {
        case SiteChange::Kind::kGone:
          out << fmt::format("  gone:   {} {} grew {} before, does not grow after\n", s.label,
                             s.function, rate_text(*s.rate_before_bytes_per_step));
          break;
        case SiteChange::Kind::kNew:
          out << fmt::format("  new:    {} {} grows {} after, did not grow before\n", s.label,
                             s.function, rate_text(*s.rate_after_bytes_per_step));
          break;
        default:
          out << fmt::format("  {}: {} {} grows {} after, {} before\n", site_change_name(s.kind),
                             s.label, s.function, rate_text(*s.rate_after_bytes_per_step),
                             rate_text(*s.rate_before_bytes_per_step));
      }
    }
    std::size_t same = p.sites.size() - shown;
    if (same > 0) out << fmt::format("  {} growing site{} unchanged\n", same, same == 1 ? "" : "s");
    if (p.sites.empty()) out << "  no site grows in either run\n";
  }
  for (const std::string& p : diff.only_before) out << "only before: " << p << "\n";
  for (const std::string& p : diff.only_after) out << "only after:  " << p << "\n";
}

json diff_json(const RunDiff& diff) {
  json processes = json::array();
  for (const ProcessDiff& p : diff.processes) {
    json sites = json::array();
    for (const SiteChange& s : p.sites) {
      sites.push_back(
          {{"change", site_change_name(s.kind)},
           {"label", s.label},
           {"function", s.function},
           {"rate_before_bytes_per_step",
            s.rate_before_bytes_per_step ? json(*s.rate_before_bytes_per_step) : json()},
           {"rate_after_bytes_per_step",
            s.rate_after_bytes_per_step ? json(*s.rate_after_bytes_per_step) : json()}});
    }
    processes.push_back({{"pid_before", p.pid_before},
                         {"pid_after", p.pid_after},
                         {"program_before", p.program_before},
                         {"program_after", p.program_after},
                         {"verdict_before", p.verdict_before},
                         {"verdict_after", p.verdict_after},
                         {"rate_before_bytes_per_step", p.rate_before_bytes_per_step},
                         {"rate_after_bytes_per_step", p.rate_after_bytes_per_step},
                         {"sites", sites}});
  }
  return {{"schema", "gpuleak-diff/1"},      {"same_program", diff.same_program},
          {"new_growth", diff.new_growth()}, {"processes", processes},
          {"only_before", diff.only_before}, {"only_after", diff.only_after}};
}

}  // namespace gpuleak::report
