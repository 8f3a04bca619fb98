// The job analysis on traces recorded on the GPU by `gpuleak run` for cases
// of the process corpus (examples/processes/): for each folder
// examples/traces/processes/<case>/ (traces/ with processes.jsonl, and the
// truth.json the script wrote), the roles, findings and first CUDA use must
// be what examples/processes/corpus.json says. The GPU suite `processes`
// keeps these folders in its results (tests/gpu/process_corpus.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "analysis/processes/job_analysis.h"
#include "analysis/processes/process_samples.h"
#include "analysis/trace_loader.h"

namespace gpuleak::analysis {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kRecorded = fs::path(GPULEAK_TEST_EXAMPLE_TRACES) / "processes";
const fs::path kCorpus = fs::path(GPULEAK_TEST_EXAMPLE_TRACES).parent_path() / "processes";

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in, nullptr, false);
}

std::vector<int> pids_of(const json& truth, const std::string& key) {
  auto it = truth.find(key);
  if (it == truth.end()) return {};
  if (it->is_number_integer()) return {it->get<int>()};
  std::vector<int> out;
  if (it->is_array()) {
    for (const auto& v : *it) out.push_back(v.get<int>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::set<std::uint32_t> marked_lines(const fs::path& script) {
  std::ifstream in(script);
  std::set<std::uint32_t> lines;
  std::string line;
  std::uint32_t number = 0;
  std::regex marker(R"(#\s*CUDA-INIT)");
  while (std::getline(in, line)) {
    ++number;
    if (std::regex_search(line, marker)) lines.insert(number);
  }
  return lines;
}

TEST(RecordedProcessTraces, each_recorded_case_gets_its_labelled_roles_findings_and_first_use) {
  if (!fs::exists(kRecorded)) {
    GTEST_SKIP()
        << "no traces of the process corpus recorded on a GPU are committed yet: run "
           "`bash tests/gpu/verify.sh processes:200` and copy $R/<case>/{truth.json,traces} "
           "to examples/traces/processes/<case>/";
  }
  json corpus = read_json(kCorpus / "corpus.json");
  ASSERT_FALSE(corpus.is_discarded());
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kRecorded)) {
    if (!entry.is_directory()) continue;
    std::string script = entry.path().filename().string() + ".py";
    const json* label = nullptr;
    for (const auto& c : corpus["cases"]) {
      if (c["script"] == script) label = &c;
    }
    ASSERT_NE(label, nullptr) << script << " is not a case of the corpus";
    SCOPED_TRACE(script);
    json truth = read_json(entry.path() / "truth.json");
    ASSERT_FALSE(truth.is_discarded());

    std::vector<std::string> files;
    for (const auto& f : fs::directory_iterator(entry.path() / "traces")) {
      if (f.path().extension() == ".trace") files.push_back(f.path().string());
    }
    std::sort(files.begin(), files.end());
    std::vector<ProcessReport> reports;
    for (const auto& f : files) reports.push_back(analyze_trace_file(f, AnalysisOptions{}));
    auto observed = read_process_samples((entry.path() / "traces" / kProcessSamplesFile).string());
    ASSERT_TRUE(observed) << "no processes.jsonl beside the traces";
    JobReport job = analyze_job(reports, observed);

    std::map<int, const JobProcess*> by_pid;
    for (const auto& p : job.processes) by_pid[p.pid] = &p;
    const json& expected = (*label)["expected"];
    for (const auto& [role, key] : expected["roles"].items()) {
      for (int pid : pids_of(truth, key.get<std::string>())) {
        ASSERT_TRUE(by_pid.count(pid)) << "PID " << pid << " (" << key << ") is not in the job";
        EXPECT_STREQ(role_kind_name(by_pid[pid]->role.kind), role.c_str()) << "PID " << pid;
      }
    }
    if (expected["findings"].empty()) {
      EXPECT_TRUE(job.findings.empty());
    }
    for (const auto& want : expected["findings"]) {
      auto found = std::find_if(job.findings.begin(), job.findings.end(),
                                [&](const ProcessFinding& f) { return f.kind == want["kind"]; });
      ASSERT_NE(found, job.findings.end()) << "no " << want["kind"] << " finding";
      std::vector<int> pids = found->pids;
      std::sort(pids.begin(), pids.end());
      EXPECT_EQ(pids, pids_of(truth, want["processes"].get<std::string>()));
    }
    std::set<std::uint32_t> lines = marked_lines(kCorpus / script);
    for (const auto& [key, where] : expected["cuda_init"].items()) {
      for (int pid : pids_of(truth, key)) {
        ASSERT_TRUE(by_pid.count(pid) && by_pid[pid]->first_use) << "PID " << pid;
        const Site& site = by_pid[pid]->first_use->site;
        EXPECT_EQ(fs::path(site.file).filename().string(), script) << "PID " << pid;
        EXPECT_TRUE(lines.count(site.line)) << "PID " << pid << " at line " << site.line;
      }
    }
    for (const auto& key : expected["context_memory"]) {
      for (int pid : pids_of(truth, key.get<std::string>())) {
        ASSERT_TRUE(by_pid.count(pid));
        EXPECT_GT(by_pid[pid]->device_memory.peak_used_bytes, 0u) << "PID " << pid;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace gpuleak::analysis
