// The gpuleak binary as a user meets it, run as a child process: damaged
// traces, wrong flags, missing files, no NVIDIA driver, and `gpuleak run`
// end to end on a Python program that leaks fake torch blocks.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/process_runner.h"
#include "support/scratch_dir.h"
#include "trace/codec.h"
#include "trace/records.h"
#include "trace/trace_writer.h"

namespace gpuleak::cli {
namespace {

namespace fs = std::filesystem;
using gpuleak::testing::ProcessOptions;
using gpuleak::testing::ProcessResult;
using gpuleak::testing::run_process;
using gpuleak::testing::ScratchDir;
using gpuleak::testing::write_text_file;
using nlohmann::json;

const std::string kGpuleak = GPULEAK_TEST_GPULEAK;
const std::string kCollector = GPULEAK_TEST_COLLECTOR;
const std::string kExamples = std::string(GPULEAK_BINARY_DIR) + "/examples";

constexpr int kExitFindings = 1, kExitUsage = 2, kExitInput = 3;

// ---- Traces made with the trace writer ---------------------------------------

constexpr int kBlocks = 5;  // block 0: definitions; blocks 1-4: allocations
constexpr int kAllocsPerBlock = 10;

// Writes a trace whose blocks 1..4 each hold 10 allocations of 1 KiB that are
// never freed. Returns the byte offset where each block starts.
std::vector<std::uint64_t> write_leaky_trace(const std::string& path) {
  std::string error;
  auto writer = trace::TraceWriter::create(path, &error);
  if (!writer) throw std::runtime_error(error);
  std::vector<std::uint64_t> offsets;
  std::string block;
  trace::encode_record(trace::ProcessRecord{4242, 1, 1700000000000000000ull, 1000, "/usr/bin/app",
                                            "app --train", "node-1", "0.1.0"},
                       block);
  trace::encode_record(trace::ApiNameRecord{243, "cuMemAlloc_v2"}, block);
  offsets.push_back(writer->bytes_written());
  if (!writer->write_block(block, 2, &error)) throw std::runtime_error(error);
  std::uint64_t seq = 0;
  for (int b = 1; b < kBlocks; ++b) {
    block.clear();
    for (int i = 0; i < kAllocsPerBlock; ++i) {
      trace::AllocRecord a;
      a.seq = seq++;
      a.time_ns = 1000 + a.seq * 1000;
      a.address = 0x7f0000000000ull + a.seq * 4096;
      a.size = 1024;
      a.kind = trace::MemoryKind::kDevice;
      a.api = 243;
      a.device = 0;
      a.thread_id = 4242;
      trace::encode_record(a, block);
    }
    offsets.push_back(writer->bytes_written());
    if (!writer->write_block(block, kAllocsPerBlock, &error)) throw std::runtime_error(error);
  }
  offsets.push_back(writer->bytes_written());  // end of file
  return offsets;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// One line on stderr, "gpuleak: ...", and nothing that looks like a crash.
void expect_one_clear_line(const ProcessResult& r) {
  auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << "expected exactly one line on stderr:\n" << r.err;
  EXPECT_EQ(lines[0].rfind("gpuleak: ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[0].find("internal error"), std::string::npos) << lines[0];
  EXPECT_EQ(r.signal, 0) << r.describe();
}

// ---- Damaged traces ----------------------------------------------------------

void check_damaged_trace_report(const std::string& path, std::uint64_t bad_block_offset,
                                const std::string& expected_message) {
  ProcessResult r = run_process({kGpuleak, "report", "--json", path});
  EXPECT_EQ(r.exit_code, kExitInput) << r.describe();
  expect_one_clear_line(r);
  std::string line = r.err_lines().empty() ? "" : r.err_lines()[0];
  EXPECT_NE(line.find(path), std::string::npos) << "the line must name the file: " << line;
  EXPECT_NE(line.find(expected_message + " at byte " + std::to_string(bad_block_offset)),
            std::string::npos)
      << line;

  // The report of the readable prefix: the 20 allocations of blocks 1 and 2.
  json report = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << "stdout is not JSON:\n" << r.out;
  ASSERT_EQ(report["processes"].size(), 1u);
  const json& p = report["processes"][0];
  EXPECT_EQ(p["pid"], 4242);
  EXPECT_EQ(p["events"]["allocations"], 2 * kAllocsPerBlock);
  EXPECT_EQ(p["leaks"]["allocations"], 2 * kAllocsPerBlock);
  EXPECT_EQ(p["leaks"]["bytes"], 2 * kAllocsPerBlock * 1024);
  EXPECT_EQ(p["trace_error"]["offset"], bad_block_offset);
  EXPECT_EQ(p["exited"], false);
}

std::string example_trace(const std::string& name) {
  return std::string(GPULEAK_TEST_EXAMPLE_TRACES) + "/" + name;
}

// The report of `trace` hides frames mentioning `hidden` and shows `shown`
// (what the hidden frames were called by); --all-frames shows `hidden`.
void expect_folded_unless_all_frames(const std::string& trace, const std::string& hidden,
                                     const std::string& shown) {
  ProcessResult plain = run_process({kGpuleak, "report", trace});
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_EQ(plain.out.find(hidden), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find(shown), std::string::npos) << "the frames below say who allocated:\n"
                                                      << plain.out;
  ProcessResult all = run_process({kGpuleak, "report", "--all-frames", trace});
  ASSERT_EQ(all.exit_code, 0) << all.describe();
  EXPECT_NE(all.out.find(hidden), std::string::npos);
}

// A trace recorded under PyTorch on the H200: the driver allocations' stacks
// start with CUPTI's and the driver's own frames, which only --all-frames shows.
TEST(ReportFrames, cupti_and_driver_frames_are_hidden_unless_all_frames_is_asked) {
  expect_folded_unless_all_frames(example_trace("torch/cupti_driver_frames"), "libcupti",
                                  "cublasCreate");
}

// PyTorch keeps its cache, cuBLAS workspaces and referenced tensors until the
// process ends: in a PyTorch process that memory is shown as live at exit,
// not as leaked, and only a LEAK verdict fails --fail-on-leak.
TEST(ReportTorchExit, memory_live_at_exit_is_no_leak_in_a_pytorch_process) {
  const std::string traces = example_trace("torch/");
  ProcessResult control =
      run_process({kGpuleak, "report", "--fail-on-leak", traces + "control_replay_buffer"});
  EXPECT_EQ(control.exit_code, 0) << control.describe();
  EXPECT_EQ(control.out.find("LEAKED"), std::string::npos) << control.out;
  EXPECT_NE(control.out.find("Live at exit: "), std::string::npos) << control.out;
  ProcessResult leak =
      run_process({kGpuleak, "report", "--fail-on-leak", traces + "leak_small_tensor_per_step"});
  EXPECT_EQ(leak.exit_code, 1) << leak.describe();
  ProcessResult json_run =
      run_process({kGpuleak, "report", "--json", traces + "control_replay_buffer"});
  ASSERT_EQ(json_run.exit_code, 0) << json_run.describe();
  auto report = nlohmann::json::parse(json_run.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["processes"][0]["leaks"]["counts_as_leak"], false);
  // A CUDA program's memory at exit is still a leak.
  ProcessResult cuda =
      run_process({kGpuleak, "report", "--fail-on-leak", example_trace("cuda/forgot_free")});
  EXPECT_EQ(cuda.exit_code, 1) << cuda.describe();
  EXPECT_NE(cuda.out.find("LEAKED: 5.00 MiB in 5 allocations"), std::string::npos) << cuda.out;
}

// gpuleak's own allocator hook (torch-hook-*.so, built at run time) sits on
// top of every tensor allocation's native stack; it once passed for the
// user's code and hid every other frame. (torch/hook_frame_on_top:
// leak_small_tensor_per_step.py recorded on 29 November, when the hook's
// frame was recorded on those stacks.)
TEST(ReportFrames, gpuleaks_allocator_hook_frame_is_never_taken_for_the_users) {
  expect_folded_unless_all_frames(example_trace("torch/hook_frame_on_top"), "torch-hook-",
                                  "setWorkspaceForHandle");
}

TEST(ReportDamagedTrace, truncated_mid_block_reports_the_prefix_and_one_line_with_the_offset) {
  ScratchDir dir;
  std::string path = dir.file("gpuleak-4242.trace");
  auto offsets = write_leaky_trace(path);
  auto bytes = read_bytes(path);
  ASSERT_EQ(bytes.size(), offsets.back());
  bytes.resize(offsets[3] + 16 + 7);  // inside block 3's zstd frame
  write_bytes(path, bytes);
  check_damaged_trace_report(path, offsets[3], "truncated block");
}

TEST(ReportDamagedTrace, truncated_block_header_reports_the_prefix_and_one_line_with_the_offset) {
  ScratchDir dir;
  std::string path = dir.file("gpuleak-4242.trace");
  auto offsets = write_leaky_trace(path);
  auto bytes = read_bytes(path);
  bytes.resize(offsets[3] + 9);  // inside block 3's 16-byte header
  write_bytes(path, bytes);
  check_damaged_trace_report(path, offsets[3], "truncated block header");
}

TEST(ReportDamagedTrace, flipped_byte_in_a_later_block_reports_the_prefix_and_one_line) {
  ScratchDir dir;
  std::string path = dir.file("gpuleak-4242.trace");
  auto offsets = write_leaky_trace(path);
  auto bytes = read_bytes(path);
  std::uint64_t middle = (offsets[3] + 16 + offsets[4]) / 2;  // block 3's frame
  bytes[middle] = static_cast<char>(bytes[middle] ^ 0x20);
  write_bytes(path, bytes);
  check_damaged_trace_report(path, offsets[3], "corrupt block");
}

TEST(ReportDamagedTrace, text_report_goes_to_stdout_and_the_error_line_to_stderr) {
  ScratchDir dir;
  std::string path = dir.file("gpuleak-4242.trace");
  auto offsets = write_leaky_trace(path);
  auto bytes = read_bytes(path);
  bytes.resize(offsets.back() - 3);  // the last block loses its end
  write_bytes(path, bytes);
  ProcessResult r = run_process({kGpuleak, "report", path});
  EXPECT_EQ(r.exit_code, kExitInput) << r.describe();
  expect_one_clear_line(r);
  EXPECT_NE(r.err.find("at byte " + std::to_string(offsets[4])), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("30 allocations"), std::string::npos) << r.out;
}

TEST(ReportDamagedTrace, intact_trace_reports_everything_and_exits_zero) {
  ScratchDir dir;
  std::string path = dir.file("gpuleak-4242.trace");
  write_leaky_trace(path);
  ProcessResult r = run_process({kGpuleak, "report", "--json", path});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "");
  json report = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << r.out;
  EXPECT_EQ(report["processes"][0]["events"]["allocations"], (kBlocks - 1) * kAllocsPerBlock);
  EXPECT_TRUE(report["processes"][0]["trace_error"].is_null());

  ProcessResult gate = run_process({kGpuleak, "report", "--fail-on-leak", path});
  EXPECT_EQ(gate.exit_code, kExitFindings) << gate.describe();
}

// ---- Wrong flags, missing files ----------------------------------------------

TEST(CliErrors, unknown_top_level_option_is_named) {
  ProcessResult r = run_process({kGpuleak, "--bogus"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.describe();
  expect_one_clear_line(r);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("subcommand is required"), std::string::npos) << r.err;
}

TEST(CliErrors, missing_subcommand_says_so) {
  ProcessResult r = run_process({kGpuleak});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.describe();
  expect_one_clear_line(r);
  EXPECT_NE(r.err.find("subcommand"), std::string::npos) << r.err;
}

TEST(CliErrors, unknown_report_option_is_named) {
  ScratchDir dir;
  std::string path = dir.file("t.trace");
  write_leaky_trace(path);
  ProcessResult r = run_process({kGpuleak, "report", "--bogus", path});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.describe();
  expect_one_clear_line(r);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
}

TEST(CliErrors, report_of_a_missing_file_names_it) {
  ProcessResult r = run_process({kGpuleak, "report", "/nonexistent/gpuleak-1.trace"});
  EXPECT_EQ(r.exit_code, kExitInput) << r.describe();
  expect_one_clear_line(r);
  EXPECT_NE(r.err.find("/nonexistent/gpuleak-1.trace"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no such file"), std::string::npos) << r.err;
}

TEST(CliErrors, report_of_a_folder_without_traces_says_so) {
  ScratchDir dir;
  write_text_file(dir.file("notes.txt"), "nothing here\n");
  ProcessResult r = run_process({kGpuleak, "report", dir.path()});
  EXPECT_EQ(r.exit_code, kExitInput) << r.describe();
  expect_one_clear_line(r);
  EXPECT_NE(r.err.find(dir.path()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("holds no gpuleak traces"), std::string::npos) << r.err;
}

TEST(CliErrors, report_of_a_text_file_says_it_is_not_a_trace) {
  ScratchDir dir;
  std::string path = dir.file("notes.txt");
  write_text_file(path, "this is not a trace, but it is longer than a trace header\n");
  ProcessResult r = run_process({kGpuleak, "report", path});
  EXPECT_EQ(r.exit_code, kExitInput) << r.describe();
  expect_one_clear_line(r);
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a gpuleak trace"), std::string::npos) << r.err;
}

TEST(CliErrors, suppressions_file_with_a_bad_line_names_the_file_and_line) {
  ScratchDir dir;
  std::string trace_path = dir.file("t.trace");
  write_leaky_trace(trace_path);
  std::string rules = dir.file("bad.supp");
  write_text_file(rules,
                  "# memory meant to live until exit\nleak:init_pool\nfrobnicate everything\n");
  ProcessResult r = run_process({kGpuleak, "report", "--suppressions", rules, trace_path});
  EXPECT_EQ(r.exit_code, kExitInput) << r.describe();
  expect_one_clear_line(r);
  EXPECT_NE(r.err.find(rules), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("line 3"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "no report when the options are unusable";
}

TEST(CliErrors, missing_suppressions_file_is_a_usage_error) {
  ScratchDir dir;
  std::string trace_path = dir.file("t.trace");
  write_leaky_trace(trace_path);
  ProcessResult r =
      run_process({kGpuleak, "report", "--suppressions", dir.file("none.supp"), trace_path});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.describe();
  expect_one_clear_line(r);
  EXPECT_NE(r.err.find("none.supp"), std::string::npos) << r.err;
}

// ---- gpuleak run: programs that cannot run, no driver -------------------------

bool collector_built() { return !kCollector.empty() && fs::exists(kCollector); }

TEST(RunErrors, program_that_does_not_exist_gives_one_line) {
  ScratchDir dir;
  ProcessResult r =
      run_process({kGpuleak, "run", "-o", dir.file("traces"), "--", "/nonexistent/program"});
  EXPECT_EQ(r.exit_code, kExitInput) << r.describe();
  expect_one_clear_line(r);
  if (collector_built()) {
    EXPECT_NE(r.err.find("cannot run '/nonexistent/program'"), std::string::npos) << r.err;
  }
}

bool driver_present() {
  void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) return false;
  ::dlclose(driver);
  return true;
}

void expect_no_driver_message(const std::vector<std::string>& program) {
  ScratchDir dir;
  std::vector<std::string> argv = {kGpuleak, "run", "-o", dir.file("traces"), "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  ProcessResult r = run_process(argv);
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.signal, 0) << r.describe();
  // The program may say why it failed in its own words; gpuleak says one line.
  std::vector<std::string> ours;
  for (const auto& line : r.err_lines()) {
    if (line.rfind("gpuleak: ", 0) == 0) ours.push_back(line);
    EXPECT_EQ(line.find("terminate called"), std::string::npos) << r.err;
  }
  ASSERT_EQ(ours.size(), 1u) << r.err;
  EXPECT_NE(ours[0].find("no NVIDIA driver"), std::string::npos) << ours[0];
}

// gpuleak run puts the driver interposer (beside the collector) first in the
// program's LD_PRELOAD, ahead of what the user preloads; --backend cupti
// leaves LD_PRELOAD alone and names the backend for the collector.
TEST(RunBackend, the_interposer_goes_first_in_ld_preload_unless_the_backend_is_cupti) {
  if (!collector_built()) GTEST_SKIP() << "no collector built here";
  fs::path interposer = fs::path(kGpuleak).parent_path() / "libgpuleak_interposer.so";
  if (!fs::exists(interposer)) GTEST_SKIP() << "no interposer built here";
  auto environment_of = [](std::vector<std::string> flags) {
    ScratchDir dir;
    std::vector<std::string> argv = {kGpuleak, "run", "-q", "-o", dir.file("traces")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", "/bin/sh", "-c",
                             "echo \"preload=$LD_PRELOAD backend=${GPULEAK_BACKEND:-unset}\""});
    ProcessOptions options;
    options.set_env = {"LD_PRELOAD=/users/own.so"};
    options.unset_env = {"GPULEAK_BACKEND"};
    ProcessResult r = run_process(argv, options);
    return r.out;
  };
  std::string canonical = fs::canonical(interposer).string();
  EXPECT_EQ(environment_of({}), "preload=" + canonical + ":/users/own.so backend=unset\n");
  EXPECT_EQ(environment_of({"--backend", "interposer"}),
            "preload=" + canonical + ":/users/own.so backend=interposer\n");
  EXPECT_EQ(environment_of({"--backend", "cupti"}), "preload=/users/own.so backend=cupti\n");
}

TEST(RunErrors, program_on_a_machine_without_an_nvidia_driver_gives_the_no_driver_line) {
  if (driver_present()) GTEST_SKIP() << "this machine has an NVIDIA driver (libcuda.so.1)";
  if (!collector_built()) GTEST_SKIP() << "no collector built here: gpuleak run refuses first";
  expect_no_driver_message({"/bin/true"});
  // A real CUDA program, where nvcc built the examples.
  if (fs::exists(kExamples + "/forgot_free")) {
    expect_no_driver_message({kExamples + "/forgot_free"});
  }
}

// ---- gpuleak run end to end (CPU, Python, fake torch blocks) -------------------

const std::string kFakeTrain = std::string(GPULEAK_SOURCE_DIR) + "/tests/cli/fake_train.py";

std::uint32_t leaking_line() {
  std::ifstream in(kFakeTrain);
  std::string text;
  for (std::uint32_t n = 1; std::getline(in, text); ++n) {
    if (text.find("# MARK: leaking line") != std::string::npos) return n;
  }
  return 0;
}

ProcessOptions run_options() {
  ProcessOptions options;
  options.unset_env = {"GPULEAK_DISABLE", "GPULEAK_TRACE_DIR", "CUDA_INJECTION64_PATH",
                       "PYTORCH_CUDA_ALLOC_CONF", "PYTHONPATH"};
  options.timeout = std::chrono::seconds(120);
  return options;
}

// --torch-mode off: the script does not use torch; the default (auto) would
// import torch and build the allocator hook first, which is not under test.
std::vector<std::string> run_argv(const std::string& dir, std::vector<std::string> extra,
                                  std::vector<std::string> script_args) {
  std::vector<std::string> argv = {kGpuleak, "run", "-o", dir, "--torch-mode", "off"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--", "/usr/bin/python3", kFakeTrain});
  argv.insert(argv.end(), script_args.begin(), script_args.end());
  return argv;
}

class GpuleakRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!collector_built()) GTEST_SKIP() << "no collector built here (no CUDA headers)";
    if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  }
};

// A process that tracks tensors is asked for the holder of a growing site;
// one that never answers (it ended, or hangs in a long step) still gets its
// LEAK line, and the request file does not outlive the run.
TEST_F(GpuleakRun, unanswered_holder_request_delays_the_leak_line_and_is_cleaned_up) {
  ScratchDir dir;
  std::string traces = dir.file("traces"), release = dir.file("release");
  ProcessOptions options = run_options();
  bool request_seen = false;
  bool live_seen = false;
  options.on_stderr_line = [&](const std::string& line) {
    if (live_seen || line.rfind("gpuleak: [pid ", 0) != 0 ||
        line.find("] LEAK ") == std::string::npos)
      return;
    live_seen = true;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(traces, ec))
      if (entry.path().string().find(".holder-request.json") != std::string::npos)
        request_seen = true;
    write_text_file(release, "go\n");
  };
  ProcessResult r = run_process(run_argv(traces, {}, {"leak-asked", release}), options);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(live_seen) << r.err;
  EXPECT_TRUE(request_seen) << "gpuleak should have asked the process for the holder";
  std::error_code ec;
  // Only the traces and run's samples of the job's processes (processes.jsonl).
  for (const auto& entry : fs::directory_iterator(traces, ec)) {
    if (entry.path().filename() == "processes.jsonl") continue;
    EXPECT_EQ(entry.path().extension(), ".trace") << "left behind: " << entry.path();
  }
}

// A holder walk that ran out of time names what it reached; gpuleak run asks
// once more with a larger budget, and the walk that finished is the one the
// live line and the report name.
TEST_F(GpuleakRun, a_holder_walk_cut_short_is_asked_again_with_more_time_and_the_full_one_wins) {
  ScratchDir dir;
  std::string traces = dir.file("traces"), json_path = dir.file("report.json"),
              release = dir.file("release");
  ProcessOptions options = run_options();
  std::string live;
  options.on_stderr_line = [&](const std::string& line) {
    if (live.empty() && line.rfind("gpuleak: [pid ", 0) == 0 &&
        line.find("] LEAK ") != std::string::npos) {
      live = line;
      write_text_file(release, "go\n");  // the program may finish now
    }
  };
  ProcessResult r = run_process(
      run_argv(traces, {"--json-report", json_path}, {"leak-cut-walk", release}), options);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("the second request asked for 8 seconds"), std::string::npos) << r.out;
  EXPECT_NE(live.find("defaultdict `state` (attribute of Adam)"), std::string::npos) << live;
  EXPECT_EQ(live.find("Parameter"), std::string::npos) << live;

  std::ifstream in(json_path);
  json report = json::parse(in, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << "no JSON report at " << json_path;
  const json& holder = report["processes"][0]["growth"]["holder"];
  ASSERT_TRUE(holder.is_object()) << report["processes"][0]["growth"].dump(2);
  EXPECT_EQ(holder["holder"]["name"], "state");
  EXPECT_FALSE(holder.contains("timed_out")) << holder.dump(2);
}

TEST_F(GpuleakRun, leaking_script_gets_a_live_leak_line_and_a_json_leak_verdict_at_its_line) {
  ScratchDir dir;
  std::string traces = dir.file("traces"), json_path = dir.file("report.json"),
              release = dir.file("release");
  ProcessOptions options = run_options();
  int line_number = 0, live_line = -1, report_title_line = -1;
  options.on_stderr_line = [&](const std::string& line) {
    ++line_number;
    if (live_line < 0 && line.rfind("gpuleak: [pid ", 0) == 0 &&
        line.find("] LEAK ") != std::string::npos) {
      live_line = line_number;
      write_text_file(release, "go\n");  // the program may finish now
    }
    if (report_title_line < 0 && line.rfind("gpuleak: process", 0) == 0)
      report_title_line = line_number;
  };
  ProcessResult r =
      run_process(run_argv(traces, {"--json-report", json_path}, {"leak", release}), options);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("fake_train: done"), std::string::npos);
  ASSERT_GT(live_line, 0) << "no live LEAK line while the program ran:\n" << r.err;
  ASSERT_GT(report_title_line, 0) << "no final report on stderr:\n" << r.err;
  EXPECT_LT(live_line, report_title_line) << "the LEAK line must come before the final report";
  std::uint32_t marker = leaking_line();
  ASSERT_GT(marker, 0u);
  EXPECT_NE(r.err.find("fake_train.py:" + std::to_string(marker)), std::string::npos)
      << "the live line should name the leaking line:\n"
      << r.err;

  std::ifstream in(json_path);
  json report = json::parse(in, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << "no JSON report at " << json_path;
  ASSERT_EQ(report["processes"].size(), 1u);
  const json& growth = report["processes"][0]["growth"];
  EXPECT_EQ(growth["verdict"], "LEAK");
  ASSERT_TRUE(growth["verdict_step"].is_number()) << growth.dump(2);
  EXPECT_LE(growth["verdict_step"].get<std::int64_t>() - growth["warmup_steps"].get<std::int64_t>(),
            50);
  ASSERT_FALSE(growth["sites"].empty());
  const json& site = growth["sites"][0]["site"];
  EXPECT_EQ(site["file"], kFakeTrain);
  EXPECT_EQ(site["line"], marker);
  EXPECT_NEAR(growth["sites"][0]["rate_bytes_per_step"].get<double>(), 65536, 1);
  const json& leaks = report["processes"][0]["leaks"];
  EXPECT_EQ(leaks["allocations"], 80);
  EXPECT_EQ(leaks["bytes"], 80 * 65536);

  // Suppressions apply to memory live at exit, not to the growth verdict: a
  // rule naming the leaking function moves its group out of `leaks`, and
  // the verdict stays LEAK (the memory did grow while the program ran).
  std::string rules = dir.file("rules.supp");
  write_text_file(rules, "leak:forward\n");
  ProcessResult suppressed =
      run_process({kGpuleak, "report", "--json", "--suppressions", rules, traces});
  ASSERT_EQ(suppressed.exit_code, 0) << suppressed.describe();
  json again = json::parse(suppressed.out, nullptr, false);
  ASSERT_FALSE(again.is_discarded()) << suppressed.out;
  const json& p = again["processes"][0];
  EXPECT_EQ(p["leaks"]["allocations"], 0);
  EXPECT_TRUE(p["leaks"]["groups"].empty());
  EXPECT_EQ(p["leaks"]["suppressed_allocations"], 80);
  ASSERT_EQ(p["leaks"]["suppressed_groups"].size(), 1u);
  EXPECT_EQ(p["leaks"]["suppressed_groups"][0]["suppressed_by"], "leak:forward");
  EXPECT_EQ(p["growth"]["verdict"], "LEAK");
}

TEST_F(GpuleakRun, fail_on_leak_turns_a_leaking_run_into_exit_one) {
  ScratchDir dir;
  ProcessResult r = run_process(
      run_argv(dir.file("traces"), {"--fail-on-leak", "--no-live"}, {"leak"}), run_options());
  EXPECT_EQ(r.exit_code, kExitFindings) << r.describe();
  EXPECT_NE(r.out.find("fake_train: done"), std::string::npos);
}

TEST_F(GpuleakRun, clean_script_gets_no_leak_and_exit_zero_even_with_fail_on_leak) {
  ScratchDir dir;
  std::string json_path = dir.file("report.json");
  ProcessResult r = run_process(
      run_argv(dir.file("traces"), {"--fail-on-leak", "--json-report", json_path}, {"clean"}),
      run_options());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err.find("] LEAK "), std::string::npos) << r.err;
  std::ifstream in(json_path);
  json report = json::parse(in, nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["processes"][0]["growth"]["verdict"], "NO LEAK");
  EXPECT_EQ(report["processes"][0]["leaks"]["allocations"], 0);
  EXPECT_EQ(report["processes"][0]["events"]["allocations"], 160);
}

// A CI gate on a full disk: the collector's writes fail (here the file size
// limit of `ulimit -f`, which a tmpfs-less CI can set), the program still
// runs to its end unharmed (no SIGXFSZ), and `run --fail-on-leak` does not
// pass on the trace that stopped being written
// (https://github.com/travis-ci/travis-ci/issues/931: a build passed on ENOSPC).
TEST_F(GpuleakRun, a_trace_cut_by_a_full_disk_fails_the_fail_on_leak_gate) {
  ScratchDir dir;
  std::vector<std::string> argv =
      run_argv(dir.file("traces"), {"--fail-on-leak", "--no-live"}, {"clean"});
  std::string command = "ulimit -f 1; exec";
  for (const std::string& a : argv) command += " '" + a + "'";
  ProcessResult r = run_process({"/bin/sh", "-c", command}, run_options());
  EXPECT_NE(r.out.find("fake_train: done"), std::string::npos)
      << "the program itself must be unharmed: " << r.describe();
  EXPECT_EQ(r.signal, 0) << r.describe();
  EXPECT_EQ(r.exit_code, kExitInput) << r.describe();
  EXPECT_NE(r.err.find("file size limit"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("No leaks"), std::string::npos) << r.err;
}

TEST_F(GpuleakRun, traces_and_their_folder_are_private_to_the_user) {
  ScratchDir dir;
  std::string traces = dir.file("new/traces");
  ProcessResult r = run_process(run_argv(traces, {"--no-live"}, {"clean"}), run_options());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(fs::status(traces).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(dir.file("new")).permissions() & fs::perms::all, fs::perms::owner_all);
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(traces)) {
    EXPECT_EQ(entry.status().permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write)
        << entry.path();
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

// `gpuleak run` captures the source line of the leaking site into the trace:
// `report` shows it from the trace, not from the file, so it reads the same
// after the script is gone.
TEST_F(GpuleakRun, source_lines_travel_in_the_trace) {
  ScratchDir dir;
  std::string script = dir.file("train_copy.py");
  fs::copy_file(kFakeTrain, script);
  std::vector<std::string> argv = {kGpuleak,           "run",  "-o",        dir.file("traces"),
                                   "--torch-mode",     "off",  "--no-live", "--",
                                   "/usr/bin/python3", script, "leak"};
  ProcessResult r = run_process(argv, run_options());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  fs::remove(script);
  ProcessResult report = run_process({kGpuleak, "report", "--json", dir.file("traces")});
  ASSERT_EQ(report.exit_code, 0) << report.describe();
  json j = json::parse(report.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  const json& site = j["processes"][0]["growth"]["sites"][0]["site"];
  EXPECT_NE(site["source_line"].get<std::string>().find("# MARK: leaking line"), std::string::npos)
      << site.dump();
}

// Output that cannot be written is an error, never a silent success.
TEST(ReportOutputs, a_report_that_cannot_be_written_exits_3) {
  std::string trace = example_trace("cuda/forgot_free");
  for (const std::string& args : {std::string("report --json"), std::string("report")}) {
    ProcessResult r = run_process(
        {"/bin/sh", "-c", "exec '" + kGpuleak + "' " + args + " '" + trace + "' >/dev/full"});
    EXPECT_EQ(r.exit_code, kExitInput) << args << ": " << r.describe();
    EXPECT_NE(r.err.find("cannot write the report to stdout: No space left on device"),
              std::string::npos)
        << r.err;
  }
  ProcessResult html = run_process({kGpuleak, "report", "--html", "/dev/full", trace});
  EXPECT_EQ(html.exit_code, kExitInput) << html.describe();
  EXPECT_NE(html.err.find("cannot write /dev/full"), std::string::npos) << html.err;
}

// `report --source-root` reads source lines from a checkout, and only
// inside it: a link out of it is not followed.
TEST(ReportSources, source_root_reads_lines_inside_the_checkout_only) {
  ScratchDir dir;
  fs::create_directories(dir.file("checkout/proj"));
  write_text_file(dir.file("checkout/proj/train.py"), "import torch\nlosses.append(loss)\n");
  fs::create_symlink("/etc/passwd", dir.file("checkout/proj/passwd.py"));
  std::string trace = dir.file("t.trace");
  {
    std::string error;
    auto writer = trace::TraceWriter::create(trace, &error);
    ASSERT_TRUE(writer) << error;
    std::string block;
    trace::encode_record(
        trace::ProcessRecord{9, 1, 0, 1000, "/usr/bin/python3", "python3 train.py", "h", "0"},
        block);
    trace::encode_record(trace::PythonCodeRecord{1, "/home/someone/proj/train.py", "step", 1},
                         block);
    trace::encode_record(trace::PythonCodeRecord{2, "/home/someone/proj/passwd.py", "step", 1},
                         block);
    trace::encode_record(trace::StackRecord{1, {}, {{1, 2}}}, block);
    trace::encode_record(trace::StackRecord{2, {}, {{2, 1}}}, block);
    trace::encode_record(
        trace::AllocRecord{0, 2000, 0x1000, 4096, trace::MemoryKind::kDevice, 243, 0, 0, 9, 1},
        block);
    trace::encode_record(
        trace::AllocRecord{1, 3000, 0x2000, 8192, trace::MemoryKind::kDevice, 243, 0, 0, 9, 2},
        block);
    trace::encode_record(trace::ExitRecord{2, 4000}, block);
    ASSERT_TRUE(writer->write_block(block, 8, &error)) << error;
  }
  ProcessResult plain = run_process({kGpuleak, "report", trace});
  EXPECT_EQ(plain.out.find("losses.append(loss)"), std::string::npos)
      << "without --source-root, report reads no source file:\n"
      << plain.out;
  ProcessResult r = run_process({kGpuleak, "report", "--source-root", dir.file("checkout"), trace});
  EXPECT_NE(r.out.find("> losses.append(loss)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("root:"), std::string::npos) << "followed a link out of the checkout";
}

}  // namespace
}  // namespace gpuleak::cli
