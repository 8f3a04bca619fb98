// Growth shapes from public reports (tests/analysis/growth_corpus/): each
// file describes a run as phases of steps; the test builds its event stream,
// feeds it to the analysis as it goes (runs of 100,000 steps are never held
// in memory) and compares the verdict with the one the file expects.
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/synthetic_trace.h"

namespace gpuleak::analysis {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::SyntheticTrace;

std::vector<std::string> corpus_files() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(GPULEAK_TEST_GROWTH_CORPUS)) {
    if (entry.path().extension() == ".json") out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "dir/file.py:31 append" -> file, line, function.
std::uint32_t site_of(SyntheticTrace& t, std::map<std::string, std::uint32_t>& sites,
                      const std::string& text) {
  auto it = sites.find(text);
  if (it != sites.end()) return it->second;
  auto colon = text.rfind(':');
  auto space = text.find(' ', colon);
  std::string file = "/work/" + text.substr(0, colon);
  auto line = static_cast<std::uint32_t>(std::stoul(text.substr(colon + 1, space - colon - 1)));
  std::string function = space == std::string::npos ? "<module>" : text.substr(space + 1);
  std::uint32_t id = t.python_site(file, line, function);
  sites[text] = id;
  return id;
}

struct CaseRun {
  ProcessReport report;
  std::uint64_t steps = 0;
};

CaseRun run_case(const json& spec) {
  ProcessAnalysis analysis;
  CaseRun run;
  {
    SyntheticTrace t(analysis);
    std::map<std::string, std::uint32_t> sites;
    std::map<std::string, std::deque<std::uint64_t>> rings;
    std::uint64_t jitter_state = 0x9e3779b97f4a7c15ull;
    auto next_jitter = [&] {  // deterministic, in [-1, 1)
      jitter_state = jitter_state * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<double>(jitter_state >> 11) / static_cast<double>(1ull << 52) - 1.0;
    };
    for (const json& phase : spec.at("phases")) {
      std::uint64_t steps = phase.at("steps").get<std::uint64_t>();
      for (std::uint64_t s = 0; s < steps; ++s) {
        for (const json& action : phase.at("each_step")) {
          std::string name = action.at("site").get<std::string>();
          std::uint32_t site = site_of(t, sites, name);
          if (action.contains("keep_bytes")) {
            t.alloc(site, action["keep_bytes"].get<std::uint64_t>());
          } else if (action.contains("ring_bytes")) {
            double jitter = action.value("size_jitter", 0.0);
            double size = action["ring_bytes"].get<double>() * (1.0 + jitter * next_jitter());
            auto& ring = rings[name];
            ring.push_back(t.alloc(site, static_cast<std::uint64_t>(size)));
            if (ring.size() > action.at("capacity").get<std::size_t>()) {
              t.free(ring.front());
              ring.pop_front();
            }
          } else if (action.contains("transient_bytes")) {
            std::vector<std::uint64_t> live;
            int count = action.value("count", 1);
            for (int i = 0; i < count; ++i)
              live.push_back(t.alloc(site, action["transient_bytes"].get<std::uint64_t>()));
            for (std::uint64_t address : live) t.free(address);
          } else {
            ADD_FAILURE() << "unknown action " << action.dump();
          }
        }
        t.advance_ms(20);
        t.step(run.steps++);
      }
    }
  }
  run.report = analysis.build_report("corpus");
  return run;
}

class GrowthCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(GrowthCorpus, verdict_is_the_one_a_reader_of_the_report_would_give) {
  std::ifstream in(GetParam());
  json spec = json::parse(in);
  ASSERT_TRUE(spec.contains("source")) << "every case names the report it comes from";
  CaseRun run = run_case(spec);
  const GrowthReport& g = run.report.growth;
  std::string expected = spec.at("expected").at("verdict").get<std::string>();
  std::string sites;
  for (const SiteGrowth& s : g.sites)
    sites += " " + s.site.label() + (s.bounded ? " (bounded)" : "");
  EXPECT_EQ(verdict_name(g.verdict), expected)
      << spec.at("source").get<std::string>() << ": " << spec["expected"].value("why", "")
      << "\n  gpuleak: " << verdict_name(g.verdict) << " cause=" << g.cause
      << " rate=" << g.rate_bytes_per_step << " B/step, sites:" << sites;
}

INSTANTIATE_TEST_SUITE_P(Cases, GrowthCorpus, ::testing::ValuesIn(corpus_files()),
                         [](const ::testing::TestParamInfo<std::string>& case_info) {
                           return fs::path(case_info.param).stem().string();
                         });

}  // namespace
}  // namespace gpuleak::analysis
