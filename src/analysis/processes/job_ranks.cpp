#include "analysis/processes/job_ranks.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "analysis/processes/process_verdict.h"
#include "quantity/units.h"

namespace gpuleak::analysis {

std::optional<JobRanks> job_ranks(const std::vector<ProcessReport>& reports) {
  JobRanks out;
  for (const ProcessReport& r : reports) {
    if (!r.distributed || !r.distributed->rank) continue;
    RankEntry e;
    e.rank = *r.distributed->rank;
    e.host = r.process.hostname.empty() ? "?" : r.process.hostname;
    e.pid = r.process.pid;
    e.launcher = r.distributed->launcher.value_or("");
    e.leak = judge_process(r).leak;
    if (e.leak) {
      e.rate_bytes_per_step = r.growth.rate_bytes_per_step;
      if (!r.growth.sites.empty()) e.site = r.growth.sites.front().site.label();
    }
    out.ranks.push_back(std::move(e));
  }
  if (out.ranks.size() < 2) return std::nullopt;
  std::sort(out.ranks.begin(), out.ranks.end(), [](const RankEntry& a, const RankEntry& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.host < b.host;
  });
  for (std::size_t i = 0; i < out.ranks.size(); ++i) {
    const RankEntry& e = out.ranks[i];
    if (std::find(out.hosts.begin(), out.hosts.end(), e.host) == out.hosts.end()) {
      out.hosts.push_back(e.host);
    }
    if (i > 0 && out.ranks[i - 1].rank == e.rank &&
        (out.repeated.empty() || out.repeated.back() != e.rank)) {
      out.repeated.push_back(e.rank);
    }
  }
  return out;
}

std::string rank_ranges(const std::vector<std::int64_t>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? std::to_string(ranks[i])
                  : fmt::format("{}{}{}", ranks[i], j == i + 1 ? ", " : "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string job_ranks_text(const JobRanks& ranks) {
  std::map<std::string, std::vector<std::int64_t>> by_host;
  std::vector<std::int64_t> clean;
  std::vector<const RankEntry*> leaking;
  for (const RankEntry& e : ranks.ranks) {
    by_host[e.host].push_back(e.rank);
    if (e.leak) {
      leaking.push_back(&e);
    } else {
      clean.push_back(e.rank);
    }
  }
  std::string hosts;
  for (const std::string& host : ranks.hosts) {
    hosts += fmt::format("{}{}: {}", hosts.empty() ? "" : "; ", host, rank_ranges(by_host[host]));
  }
  std::string text = fmt::format("{} ranks on {} host{} ({})", ranks.ranks.size(),
                                 ranks.hosts.size(), ranks.hosts.size() == 1 ? "" : "s", hosts);
  if (leaking.empty()) {
    text += ": no rank leaks.";
  } else {
    std::string leaks;
    for (const RankEntry* e : leaking) {
      leaks +=
          fmt::format("{}rank {} on {} (PID {}) leaks {}{}", leaks.empty() ? "" : "; ", e->rank,
                      e->host, e->pid, quantity::format_rate(e->rate_bytes_per_step, "step"),
                      e->site.empty() ? "" : " at " + e->site);
    }
    text += ": " + leaks;
    if (clean.empty()) {
      text += "; every rank leaks.";
    } else {
      text += fmt::format("; rank{} {} do{} not.", clean.size() == 1 ? "" : "s", rank_ranges(clean),
                          clean.size() == 1 ? "es" : "");
    }
  }
  if (!ranks.repeated.empty()) {
    text += fmt::format(
        " Rank{} {} appear{} more than once: traces of two jobs, or a launcher's "
        "variables inherited by a child.",
        ranks.repeated.size() == 1 ? "" : "s", rank_ranges(ranks.repeated),
        ranks.repeated.size() == 1 ? "s" : "");
  }
  return text;
}

}  // namespace gpuleak::analysis
