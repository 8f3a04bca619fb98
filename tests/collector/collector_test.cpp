// The collector on a machine without a GPU: the recorder driven through the
// C API by real child processes (collector_child.cpp, python_stacks.py),
// and its CUPTI backend driven through a stand-in libcupti that plays the
// driver's callbacks (cupti_child.cpp, stand_in_cupti.c); then the traces
// they leave read back with the trace reader and the analysis.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "analysis/processes/process_verdict.h"
#include "analysis/trace_loader.h"
#include "support/process_runner.h"
#include "support/scratch_dir.h"
#include "symbolize/embedded_symbols.h"
#include "trace/event_sequencer.h"
#include "trace/trace_reader.h"

namespace gpuleak::collector {
namespace {

namespace fs = std::filesystem;
using gpuleak::testing::ProcessOptions;
using gpuleak::testing::ProcessResult;
using gpuleak::testing::run_process;
using gpuleak::testing::ScratchDir;

const std::string kCollector = GPULEAK_TEST_COLLECTOR;
const std::string kChild = GPULEAK_TEST_CHILD;
const std::string kGpuleak = GPULEAK_TEST_GPULEAK;

#ifdef GPULEAK_TEST_STAND_IN_CUPTI
const std::string kStandInCupti = GPULEAK_TEST_STAND_IN_CUPTI;
const std::string kCuptiChild = GPULEAK_TEST_CUPTI_CHILD;
const std::string kCuptiChildSource = GPULEAK_TEST_CUPTI_CHILD_SOURCE;
#else
const std::string kStandInCupti, kCuptiChild, kCuptiChildSource;
#endif

#define SKIP_WITHOUT_COLLECTOR()                                                          \
  do {                                                                                    \
    if (kCollector.empty() || !fs::exists(kCollector))                                    \
      GTEST_SKIP() << "libgpuleak_collector.so was not built here (no CUDA headers), so " \
                      "there is no collector to test";                                    \
  } while (0)

ProcessOptions collector_options(const std::string& trace_dir) {
  ProcessOptions options;
  options.unset_env = {"GPULEAK_DISABLE",      "CUDA_INJECTION64_PATH", "GPULEAK_VERBOSE",
                       "GPULEAK_NATIVE_DEPTH", "GPULEAK_PYTHON_STACKS", "PYTHONPATH"};
  options.set_env = {"GPULEAK_TRACE_DIR=" + trace_dir};
  options.timeout = std::chrono::seconds(120);
  return options;
}

std::vector<std::string> traces_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".trace") out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A whole trace, events in sequence order.
struct TraceContents {
  std::vector<trace::Record> records;
  std::string error;  // a TraceError, if reading stopped early
  std::uint64_t skipped_events = 0;
  bool seq_dense = true;  // events came out as 0, 1, 2, ... with no repeat

  template <class T>
  std::vector<T> all() const {
    std::vector<T> out;
    for (const auto& r : records) {
      if (const T* t = std::get_if<T>(&r)) out.push_back(*t);
    }
    return out;
  }
};

TraceContents read_trace(const std::string& path, bool follow = false) {
  TraceContents c;
  trace::EventSequencer sequencer;
  trace::Record record;
  std::uint64_t expected_seq = 0;
  auto take = [&] {
    while (sequencer.pop(record)) {
      std::uint64_t seq = 0;
      if (trace::record_seq(record, &seq)) {
        if (seq != expected_seq) c.seq_dense = false;
        expected_seq = seq + 1;
      }
      c.records.push_back(record);
    }
  };
  try {
    trace::TraceReader reader(path);
    reader.set_follow(follow);
    while (reader.next(record) == trace::TraceReader::Status::kRecord) {
      sequencer.push(std::move(record));
      take();
    }
  } catch (const trace::TraceError& e) {
    c.error = e.what();
  }
  sequencer.finish();
  take();
  c.skipped_events = sequencer.skipped_events();
  return c;
}

std::uint64_t lost_events(const TraceContents& c) {
  std::uint64_t lost = 0;
  for (const auto& r : c.all<trace::LostRecord>()) lost += r.events;
  return lost;
}

// ---- Many threads ------------------------------------------------------------

TEST(CollectorStress, eight_threads_record_exactly_the_planted_leaks_with_their_native_stacks) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessResult run = run_process({kChild, kCollector, "stress"}, collector_options(dir.path()));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.err, "") << "the collector said something while working normally";
  EXPECT_EQ(run.out, "planted 36 blocks, 147456 bytes\n");
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);

  // The raw trace: every event in a dense sequence, nothing lost, and the
  // blocks left live per thread are exactly the planted ones.
  TraceContents c = read_trace(files[0]);
  ASSERT_EQ(c.error, "");
  EXPECT_EQ(c.skipped_events, 0u);
  EXPECT_TRUE(c.seq_dense);
  EXPECT_EQ(lost_events(c), 0u);
  std::map<std::uint64_t, trace::AllocRecord> live;
  std::uint64_t unmatched = 0, allocs = 0, frees = 0;
  for (const auto& r : c.records) {
    if (const auto* a = std::get_if<trace::AllocRecord>(&r)) {
      ++allocs;
      EXPECT_TRUE(live.emplace(a->address, *a).second) << "address allocated twice";
    } else if (const auto* f = std::get_if<trace::FreeRecord>(&r)) {
      ++frees;
      if (live.erase(f->address) == 0) ++unmatched;
    }
  }
  EXPECT_EQ(allocs, 8u * 100000 + 36);
  EXPECT_EQ(frees, 8u * 100000);
  EXPECT_EQ(unmatched, 0u);
  std::map<std::uint32_t, std::uint64_t> leaked_per_thread;
  for (const auto& [address, a] : live) {
    EXPECT_EQ(a.size, 4096u);
    ++leaked_per_thread[a.thread_id];
  }
  std::multiset<std::uint64_t> counts;
  for (const auto& [thread, count] : leaked_per_thread) counts.insert(count);
  EXPECT_EQ(counts, (std::multiset<std::uint64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  std::set<std::uint32_t> named_threads;
  for (const auto& t : c.all<trace::ThreadRecord>()) named_threads.insert(t.thread_id);
  for (const auto& [thread, count] : leaked_per_thread)
    EXPECT_TRUE(named_threads.count(thread)) << "no ThreadRecord for thread " << thread;

  // The analysis: the same numbers, and native stacks that name plant_leaks.
  analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
  EXPECT_EQ(report.trace_error, "");
  EXPECT_TRUE(report.exited);
  EXPECT_EQ(report.allocations, 8u * 100000 + 36);
  EXPECT_EQ(report.frees, 8u * 100000);
  EXPECT_EQ(report.unmatched_frees, 0u);
  EXPECT_EQ(report.lost_events, 0u);
  EXPECT_EQ(report.leaks.allocations, 36u);
  EXPECT_EQ(report.leaks.bytes, 36u * 4096);
  ASSERT_FALSE(report.leaks.groups.empty());
  for (const auto& group : report.leaks.groups) {
    bool names_planter = std::any_of(group.frames.begin(), group.frames.end(), [](const auto& f) {
      return f.function.find("plant_leaks") != std::string::npos;
    });
    std::string shown;
    for (const auto& f : group.frames)
      shown += "\n  " + f.function + " " + f.file + ":" + std::to_string(f.line) + " " + f.module;
    EXPECT_TRUE(names_planter) << "a leak group's stack does not name plant_leaks:" << shown;
    EXPECT_NE(group.site.function.find("plant_leaks"), std::string::npos)
        << "site: " << group.site.label();
    EXPECT_NE(group.site.file.find("collector_child.cpp"), std::string::npos);
  }
}

// With a per-thread buffer far too small for the writer's pace, the
// collector drops events, never blocks the program, and every number it
// dropped is listed in a lost record: the sequencer never waits behind a
// gap, and nothing missing is left undeclared (no damage).
TEST(CollectorStress, dropped_events_are_listed_by_sequence_number_and_nothing_else_is_missing) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessOptions options = collector_options(dir.path());
  options.set_env.push_back("GPULEAK_BUFFER_BYTES=65536");
  options.set_env.push_back("GPULEAK_FLUSH_MS=500");
  ProcessResult run = run_process({kChild, kCollector, "stress"}, options);
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "planted 36 blocks, 147456 bytes\n");
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);

  trace::TraceReader reader(files[0]);
  trace::EventSequencer sequencer;
  trace::Record record;
  std::size_t most_held = 0;
  std::uint64_t allocs = 0, frees = 0, listed = 0, lost = 0;
  auto take = [&] {
    while (sequencer.pop(record)) {
      if (std::holds_alternative<trace::AllocRecord>(record)) ++allocs;
      if (std::holds_alternative<trace::FreeRecord>(record)) ++frees;
    }
  };
  while (reader.next(record) == trace::TraceReader::Status::kRecord) {
    if (const auto* l = std::get_if<trace::LostRecord>(&record)) {
      lost += l->events;
      for (const auto& range : l->ranges) listed += range.count;
    }
    sequencer.push(std::move(record));
    take();
    most_held = std::max(most_held, sequencer.pending());
  }
  sequencer.finish();
  take();
  const trace::SequenceFindings& f = sequencer.findings();
  EXPECT_GT(lost, 0u) << "a 64 KiB buffer and 500 ms flushes should have dropped events";
  EXPECT_GT(f.declared_skipped, 0u);
  EXPECT_EQ(f.undeclared_skipped, 0u) << "numbers missing that no lost record listed";
  EXPECT_EQ(f.counted_skipped, 0u);
  EXPECT_EQ(f.repeated_events, 0u);
  EXPECT_GE(listed, f.declared_skipped);
  // Every allocation and free the program made was recorded or listed lost.
  EXPECT_GE(allocs + frees + f.declared_skipped, 2u * 8 * 100000 + 36);
  // Held events are bounded by one flush's worth, not by the 2^22 cap.
  EXPECT_LT(most_held, 1u << 20);

  analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
  EXPECT_TRUE(report.damage.empty()) << report.damage.front();
  EXPECT_EQ(report.lost_events, lost);
  EXPECT_EQ(report.lost_ranged_seqs, f.declared_skipped);
}

// A trace that cannot grow (here the file size limit of `ulimit -f`; a full
// disk fails the same write): the program runs to its end and is not killed
// by SIGXFSZ, the collector says once that it stopped, writes nothing more,
// and the trace reads as cut where it stopped, never as a whole one.
TEST(CollectorDisabled, a_trace_that_cannot_grow_stops_recording_and_reads_as_cut) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessResult run =
      run_process({"/bin/sh", "-c", "ulimit -f 8; exec \"$0\" \"$1\" stress", kChild, kCollector},
                  collector_options(dir.path()));
  ASSERT_EQ(run.signal, 0) << run.describe();
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "planted 36 blocks, 147456 bytes\n");
  EXPECT_NE(run.err.find("file size limit"), std::string::npos) << run.err;
  EXPECT_EQ(run.err_lines().size(), 1u) << run.err;
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  TraceContents c = read_trace(files[0]);
  EXPECT_NE(c.error.find("the collector could not write more"), std::string::npos)
      << "the trace must read as cut: " << c.error;
  analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
  EXPECT_FALSE(analysis::judge_process(report).complete());
}

// ---- Killed ------------------------------------------------------------------

TEST(CollectorKilled, sigkill_after_a_flush_leaves_a_trace_readable_to_its_last_flush) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessOptions options = collector_options(dir.path());
  options.set_env.push_back("GPULEAK_FLUSH_MS=50");
  options.timeout = std::chrono::seconds(60);
  constexpr std::uint64_t kBlocks = 500;
  bool killed = false;
  // The child never flushes by itself and never exits: once the writer
  // thread has put all its events in the file, kill it.
  options.while_running = [&](pid_t pid) {
    if (killed) return;
    auto files = traces_in(dir.path());
    if (files.size() != 1) return;
    TraceContents c = read_trace(files[0], /*follow=*/true);
    if (c.all<trace::AllocRecord>().size() == kBlocks && c.all<trace::StepRecord>().size() == 5) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
  };
  ProcessResult run = run_process({kChild, kCollector, "hold", std::to_string(kBlocks)}, options);
  ASSERT_TRUE(killed) << "the events never reached the file without an explicit flush: "
                      << run.describe();
  ASSERT_EQ(run.signal, SIGKILL) << run.describe();
  EXPECT_EQ(run.out, "recorded\n");

  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  TraceContents c = read_trace(files[0]);
  EXPECT_EQ(c.error, "") << "a killed process must leave whole blocks only";
  EXPECT_TRUE(c.all<trace::ExitRecord>().empty());
  EXPECT_EQ(c.all<trace::AllocRecord>().size(), kBlocks);
  EXPECT_EQ(c.all<trace::StepRecord>().size(), 5u);

  analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
  EXPECT_FALSE(report.exited);
  EXPECT_EQ(report.trace_error, "");
  EXPECT_EQ(report.leaks.allocations, kBlocks);
  EXPECT_EQ(report.leaks.bytes, kBlocks * 64);

  if (!kGpuleak.empty() && fs::exists(kGpuleak)) {
    ProcessResult text = run_process({kGpuleak, "report", dir.path()});
    EXPECT_EQ(text.exit_code, 0) << text.describe();
    EXPECT_NE(text.out.find("did not exit normally"), std::string::npos) << text.out;
  }
}

// ---- fork() ------------------------------------------------------------------

TEST(CollectorFork, forked_children_record_nothing_and_the_parents_trace_stays_consistent) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessOptions options = collector_options(dir.path());
  options.timeout = std::chrono::seconds(60);  // a deadlock shows as a timeout
  ProcessResult run = run_process({kChild, kCollector, "fork", "20"}, options);
  ASSERT_FALSE(run.timed_out) << "deadlock? " << run.describe();
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_NE(run.out.find("failures 0"), std::string::npos) << run.out;
  EXPECT_EQ(run.err, "");
  std::set<std::uint32_t> children;
  std::istringstream lines(run.out);
  std::string word;
  std::uint32_t pid = 0;
  while (lines >> word) {
    if (word == "child" && lines >> pid) children.insert(pid);
  }
  ASSERT_EQ(children.size(), 20u) << run.out;

  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u) << "a forked child wrote a trace of its own";
  TraceContents c = read_trace(files[0]);
  ASSERT_EQ(c.error, "");
  EXPECT_TRUE(c.seq_dense);
  EXPECT_EQ(c.skipped_events, 0u);
  EXPECT_EQ(lost_events(c), 0u);
  auto process = c.all<trace::ProcessRecord>();
  ASSERT_EQ(process.size(), 1u);
  EXPECT_EQ(children.count(process[0].pid), 0u);
  for (const auto& t : c.all<trace::ThreadRecord>())
    EXPECT_EQ(children.count(t.thread_id), 0u) << "a child's thread recorded: " << t.thread_id;
  for (const auto& a : c.all<trace::AllocRecord>()) {
    EXPECT_EQ(children.count(a.thread_id), 0u);
    EXPECT_FALSE(a.address >= 0xC0000000ull && a.address < 0xC0000000ull + 21 * 4096)
        << "a child's allocation is in the parent's trace";
  }
  EXPECT_TRUE(c.all<trace::StepRecord>().empty());
  for (const auto& a : c.all<trace::AnnotationRecord>())
    EXPECT_EQ(a.key, "clock") << "only the collector's own clock annotation, none from a child";
  EXPECT_EQ(c.all<trace::ExitRecord>().size(), 1u);

  analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
  EXPECT_EQ(report.unmatched_frees, 0u);
  EXPECT_TRUE(report.exited);
  ASSERT_EQ(report.leaks.allocations, 1u) << "only the parent's last block stays live";
  EXPECT_EQ(report.leaks.bytes, 8192u);
}

// ---- Disabled ----------------------------------------------------------------

TEST(CollectorDisabled, api_program_records_when_the_collector_is_enabled) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessResult run = run_process({kChild, kCollector, "api"}, collector_options(dir.path()));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "start=1,1 recording=1\nresult 499500\n");
  EXPECT_EQ(run.err, "");
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  TraceContents c = read_trace(files[0]);
  EXPECT_EQ(c.all<trace::AllocRecord>().size(), 1000u);
  EXPECT_EQ(c.all<trace::FreeRecord>().size(), 500u);
}

// ---- Inlined functions --------------------------------------------------------

std::uint32_t marked_line(const std::string& marker,
                          const std::string& source = GPULEAK_TEST_CHILD_SOURCE) {
  std::ifstream in(source);
  std::string text;
  for (std::uint32_t n = 1; std::getline(in, text); ++n) {
    if (text.find("// MARK: " + marker) != std::string::npos) return n;
  }
  return 0;
}

// One return address stands for three functions when two are inlined: the
// stack must show each, innermost first, at the line where it called the next.
TEST(CollectorInlining, inlined_functions_become_frames_of_their_own_with_their_call_lines) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessResult run = run_process({kChild, kCollector, "inline"}, collector_options(dir.path()));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
  ASSERT_EQ(report.leaks.groups.size(), 1u);
  const auto& group = report.leaks.groups[0];
  EXPECT_EQ(group.allocations, 3u);
  const auto& frames = group.frames;
  auto at = std::find_if(frames.begin(), frames.end(), [](const analysis::Frame& f) {
    return f.function.find("inlined_helper") != std::string::npos;
  });
  ASSERT_NE(at, frames.end()) << "no frame for the inlined helper";
  ASSERT_GE(frames.end() - at, 3);
  std::string file = std::string(GPULEAK_TEST_CHILD_SOURCE);
  EXPECT_EQ(at[0].line, marked_line("inlined allocation"));
  EXPECT_TRUE(at[0].inlined);
  EXPECT_NE(at[1].function.find("inlined_middle"), std::string::npos) << at[1].function;
  EXPECT_EQ(at[1].line, marked_line("inlined call"));
  EXPECT_TRUE(at[1].inlined);
  EXPECT_NE(at[2].function.find("outer_caller"), std::string::npos) << at[2].function;
  EXPECT_EQ(at[2].line, marked_line("outer call"));
  EXPECT_FALSE(at[2].inlined);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fs::path(at[i].file).filename(), "collector_child.cpp") << at[i].file;
    EXPECT_EQ(at[i].address, at[0].address) << "one return address, three frames";
  }
  EXPECT_EQ(group.site.line, marked_line("inlined allocation"));
  EXPECT_NE(group.site.function.find("inlined_helper"), std::string::npos) << group.site.function;

  // Symbols embedded into the trace keep the inline chain for other machines.
  std::size_t written = 0;
  std::string error;
  ASSERT_TRUE(symbolize::embed_symbols(files[0], &written, &error)) << error;
  TraceContents c = read_trace(files[0]);
  bool embedded_chain = false;
  for (const auto& symbol : c.all<trace::SymbolRecord>()) {
    if (symbol.function.find("inlined_helper") == std::string::npos) continue;
    ASSERT_EQ(symbol.inlined_into.size(), 2u);
    EXPECT_EQ(symbol.inlined_into[0].line, marked_line("inlined call"));
    EXPECT_EQ(symbol.inlined_into[1].line, marked_line("outer call"));
    embedded_chain = true;
  }
  EXPECT_TRUE(embedded_chain);
}

// ---- Clock ------------------------------------------------------------------

// The clock annotation says which clock timed the events; forcing the coarse
// clock keeps event times in order and on the same time base as the process
// start (CLOCK_MONOTONIC_COARSE lags CLOCK_MONOTONIC by at most one tick).
TEST(CollectorClock, the_chosen_clock_is_recorded_and_times_stay_ordered) {
  SKIP_WITHOUT_COLLECTOR();
  for (std::string setting : {"precise", "coarse", "auto"}) {
    ScratchDir dir;
    ProcessOptions options = collector_options(dir.path());
    options.set_env.push_back("GPULEAK_CLOCK=" + setting);
    ProcessResult run = run_process({kChild, kCollector, "api"}, options);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    auto files = traces_in(dir.path());
    ASSERT_EQ(files.size(), 1u);
    TraceContents c = read_trace(files[0]);
    std::string clock;
    for (const auto& a : c.all<trace::AnnotationRecord>()) {
      if (a.key == "clock") clock = a.value;
    }
    auto parsed = nlohmann::json::parse(clock, nullptr, false);
    ASSERT_TRUE(parsed.is_object()) << setting << ": " << clock;
    std::string expected = setting == "coarse" ? "monotonic-coarse" : "monotonic";
    if (setting != "auto") {
      EXPECT_EQ(parsed["clock"], expected) << clock;
    } else {
      EXPECT_TRUE(parsed["clock"] == "tsc" || parsed["clock"] == "monotonic" ||
                  parsed["clock"] == "monotonic-coarse")
          << clock;
    }
    EXPECT_GT(parsed["resolution_ns"].get<double>(), 0.0);
    EXPECT_GT(parsed["monotonic_read_ns"].get<double>(), 0.0);
    if (setting == "coarse") {
      EXPECT_GE(parsed["resolution_ns"].get<double>(), 1e5) << clock;
    }

    auto processes = c.all<trace::ProcessRecord>();
    ASSERT_EQ(processes.size(), 1u);
    std::uint64_t previous = 0;
    std::uint64_t tick = setting == "coarse" ? 10'000'000u : 0u;  // generous: one tick
    auto allocs = c.all<trace::AllocRecord>();
    ASSERT_EQ(allocs.size(), 1000u);
    for (const auto& a : allocs) {
      EXPECT_GE(a.time_ns + tick, processes[0].start_monotonic_ns);
      EXPECT_GE(a.time_ns, previous);
      previous = a.time_ns;
    }
  }
}

// Whatever clock the collector reads (the TSC where the kernel trusts it),
// a record's time is CLOCK_MONOTONIC: an annotation made right after the
// program read CLOCK_MONOTONIC carries a time just after that reading, over
// a second in which the writer re-anchors the TSC mapping many times.
TEST(CollectorClock, record_times_agree_with_clock_monotonic_read_by_the_program) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessOptions options = collector_options(dir.path());
  options.set_env.push_back("GPULEAK_FLUSH_MS=20");
  ProcessResult run = run_process({kChild, kCollector, "clock", "7"}, options);
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  TraceContents c = read_trace(files[0]);
  int checked = 0;
  for (const auto& a : c.all<trace::AnnotationRecord>()) {
    if (a.key == "clock") std::cout << "clock: " << a.value << "\n";
    if (a.key != "monotonic_ns") continue;
    std::uint64_t read_by_program = std::stoull(a.value);
    // At most a few microseconds of mapping error before; after, the time
    // to make the record (generous for a loaded machine).
    EXPECT_GE(a.time_ns + 20'000, read_by_program);
    EXPECT_LT(a.time_ns, read_by_program + 20'000'000);
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

TEST(CollectorDisabled, unwritable_trace_directory_disables_the_collector_with_one_line) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  // Tests may run as root, which can write anywhere: a path below a regular
  // file cannot be created by anyone.
  gpuleak::testing::write_text_file(dir.file("a-file"), "not a directory\n");
  ProcessResult run =
      run_process({kChild, kCollector, "api"}, collector_options(dir.file("a-file") + "/traces"));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "start=0,0 recording=0\nresult 499500\n");
  auto lines = run.err_lines();
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_EQ(lines[0].rfind("gpuleak: collector disabled", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("a-file"), std::string::npos) << "the line should say which path";
}

TEST(CollectorDisabled, gpuleak_disable_records_nothing_and_leaves_the_program_alone) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessOptions options = collector_options(dir.file("traces"));
  options.set_env.push_back("GPULEAK_DISABLE=1");
  ProcessResult run = run_process({kChild, kCollector, "api"}, options);
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "start=0,0 recording=0\nresult 499500\n");
  EXPECT_EQ(run.err, "");
  EXPECT_TRUE(traces_in(dir.file("traces")).empty());
}

// ---- Python stacks -----------------------------------------------------------

// The 1-based line of `file` holding `marker`.
std::uint32_t line_of(const std::string& file, const std::string& marker) {
  std::ifstream in(file);
  std::string text;
  for (std::uint32_t n = 1; std::getline(in, text); ++n) {
    if (text.find(marker) != std::string::npos) return n;
  }
  return 0;
}

TEST(CollectorPythonStacks, python_frames_with_the_gil_and_native_frames_without) {
  SKIP_WITHOUT_COLLECTOR();
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  ScratchDir dir;
  std::string script = std::string(GPULEAK_SOURCE_DIR) + "/tests/collector/python_stacks.py";
  ProcessResult run =
      run_process({"/usr/bin/python3", script, kCollector}, collector_options(dir.path()));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "done\n");
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  TraceContents c = read_trace(files[0]);
  ASSERT_EQ(c.error, "");

  std::map<std::uint32_t, trace::StackRecord> stacks;
  for (const auto& s : c.all<trace::StackRecord>()) stacks[s.stack_id] = s;
  std::map<std::uint32_t, trace::PythonCodeRecord> codes;
  for (const auto& p : c.all<trace::PythonCodeRecord>()) codes[p.code_id] = p;
  std::uint32_t with_gil_line = line_of(script, "# MARK: with GIL");
  ASSERT_GT(with_gil_line, 0u);

  int with_gil = 0, without_gil = 0;
  for (const auto& a : c.all<trace::AllocRecord>()) {
    ASSERT_TRUE(stacks.count(a.stack_id)) << "allocation without a stack";
    const trace::StackRecord& s = stacks[a.stack_id];
    if (a.address >= 0x20000000) {
      ++without_gil;
      EXPECT_TRUE(s.python.empty()) << "Python frames read without holding the GIL";
      EXPECT_FALSE(s.native.empty());
    } else {
      ++with_gil;
      ASSERT_GE(s.python.size(), 2u);
      const trace::PythonCodeRecord& code = codes[s.python[0].code_id];
      EXPECT_EQ(code.filename, script);
      EXPECT_EQ(code.function, "allocate_with_gil");
      EXPECT_EQ(s.python[0].line, with_gil_line);
      EXPECT_EQ(codes[s.python[1].code_id].function, "main");
    }
  }
  EXPECT_EQ(with_gil, 200);
  EXPECT_EQ(without_gil, 3000);

  // The analysis blames the Python line.
  analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
  bool found = false;
  for (const auto& g : report.leaks.groups) {
    if (g.site.file == script && g.site.line == with_gil_line) {
      found = true;
      EXPECT_EQ(g.allocations, 200u);
    }
  }
  EXPECT_TRUE(found) << "no leak group at " << script << ":" << with_gil_line;
}

}  // namespace
}  // namespace gpuleak::collector

namespace gpuleak::collector {
namespace {

// ---- The CUPTI backend, through a stand-in libcupti ----------------------------

ProcessOptions cupti_options(const std::string& trace_dir) {
  ProcessOptions options = collector_options(trace_dir);
  options.set_env.push_back("GPULEAK_CUPTI_LIBRARY=" + kStandInCupti);
  return options;
}

// What the driver did (stand_in_cupti.c) and what the trace must say: every
// successful call one event with its size, kind, stream and device; a free
// that failed no event; an allocation that failed a failure record; the
// primary context; and, in the report, the two leaking lines.
TEST(CollectorCupti, driver_calls_become_exact_events_and_the_leaks_their_lines) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessResult run =
      run_process({kCuptiChild, kCollector, kStandInCupti, "events"}, cupti_options(dir.path()));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "done\n");
  EXPECT_EQ(run.err, "");
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  TraceContents c = read_trace(files[0]);
  EXPECT_EQ(c.error, "");
  EXPECT_TRUE(c.seq_dense) << "the failed free must still fill its sequence number";

  auto contexts = c.all<trace::ContextRecord>();
  ASSERT_EQ(contexts.size(), 1u);
  EXPECT_EQ(contexts[0].action, trace::ContextAction::kPrimaryRetained);
  EXPECT_EQ(contexts[0].device, 0);

  std::map<std::uint64_t, int> async_sizes, sync_sizes;
  std::set<std::uint64_t> pool_addresses;
  for (const auto& a : c.all<trace::AllocRecord>()) {
    EXPECT_EQ(a.device, 0);
    EXPECT_NE(a.stack_id, 0u);
    if (a.kind == trace::MemoryKind::kDeviceAsync) {
      EXPECT_EQ(a.stream, 0x5u);
      ++async_sizes[a.size];
      if (a.size == (1u << 20)) pool_addresses.insert(a.address);
    } else {
      EXPECT_EQ(a.kind, trace::MemoryKind::kDevice);
      ++sync_sizes[a.size];
    }
  }
  EXPECT_EQ(async_sizes, (std::map<std::uint64_t, int>{{256u << 10, 3}, {1u << 20, 10}}));
  EXPECT_EQ(sync_sizes, (std::map<std::uint64_t, int>{{4096, 1}, {8192, 1}}));
  EXPECT_EQ(pool_addresses.size(), 1u) << "the pool handed the same address out ten times";

  auto frees = c.all<trace::FreeRecord>();
  EXPECT_EQ(frees.size(), 11u);
  for (const auto& f : frees) EXPECT_NE(f.address, 0x1234u) << "a failed free is not a free";

  auto failures = c.all<trace::AllocFailedRecord>();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].size, 2ull << 40);
  EXPECT_EQ(failures[0].result, 2u);  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(failures[0].kind, trace::MemoryKind::kDeviceAsync);

  analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
  ASSERT_EQ(report.leaks.groups.size(), 2u);
  const auto& async_leak = report.leaks.groups[0];
  EXPECT_EQ(async_leak.bytes, 768u << 10);
  EXPECT_EQ(async_leak.allocations, 3u);
  EXPECT_EQ(async_leak.api, "cuMemAllocAsync");
  EXPECT_NE(async_leak.site.function.find("leak_async_blocks"), std::string::npos)
      << async_leak.site.function;
  EXPECT_EQ(async_leak.site.line, marked_line("async leak", kCuptiChildSource));
  const auto& sync_leak = report.leaks.groups[1];
  EXPECT_EQ(sync_leak.bytes, 8192u);
  EXPECT_EQ(sync_leak.allocations, 1u);
  EXPECT_NE(sync_leak.site.function.find("leak_sync_block"), std::string::npos)
      << sync_leak.site.function;
  EXPECT_EQ(sync_leak.site.line, marked_line("sync leak", kCuptiChildSource));
  ASSERT_EQ(report.out_of_memory.size(), 1u);
  EXPECT_EQ(report.out_of_memory[0].live_bytes, 768u << 10);
}

// Two callers reach one allocating function at the same stack address, in
// runs and taking turns: a stack remembered for one must never be reused for
// the other (remembered_stacks.h), and with reuse switched off the report is
// the same.
TEST(CollectorCupti, remembered_stacks_tell_callers_at_the_same_stack_address_apart) {
  SKIP_WITHOUT_COLLECTOR();
  for (const char* reuse : {"1", "0"}) {
    SCOPED_TRACE(std::string("GPULEAK_REUSE_STACKS=") + reuse);
    ScratchDir dir;
    ProcessOptions options = cupti_options(dir.path());
    options.set_env.push_back(std::string("GPULEAK_REUSE_STACKS=") + reuse);
    ProcessResult run = run_process({kCuptiChild, kCollector, kStandInCupti, "callers"}, options);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_EQ(run.out, "a=42 b=48\n");
    auto files = traces_in(dir.path());
    ASSERT_EQ(files.size(), 1u);
    analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> by_caller;  // bytes, count
    for (const auto& group : report.leaks.groups) {
      std::string caller;
      for (const auto& frame : group.frames) {
        if (frame.function.find("caller_a") != std::string::npos) caller += "a";
        if (frame.function.find("caller_b") != std::string::npos) caller += "b";
      }
      by_caller[caller].first += group.bytes;
      by_caller[caller].second += group.allocations;
    }
    using Totals = std::map<std::string, std::pair<std::uint64_t, std::uint64_t>>;
    EXPECT_EQ(by_caller, (Totals{{"a", {42u * 4096, 42u}}, {"b", {48u * 8192, 48u}}}));
  }
}

// Eighty callers reach one allocating function at the same stack address:
// more than a thread remembers, taking turns all together, 48 at a time, two
// at a time and in runs. Every allocation's stack must name its own caller
// (caller K allocates 4096 * (K + 1) bytes), with reuse on and off.
TEST(CollectorCupti, remembered_stacks_name_the_right_caller_among_eighty_taking_turns) {
  SKIP_WITHOUT_COLLECTOR();
  std::map<std::string, std::map<int, std::uint64_t>> allocations_by_reuse;
  for (const char* reuse : {"1", "0"}) {
    SCOPED_TRACE(std::string("GPULEAK_REUSE_STACKS=") + reuse);
    ScratchDir dir;
    ProcessOptions options = cupti_options(dir.path());
    options.set_env.push_back(std::string("GPULEAK_REUSE_STACKS=") + reuse);
    ProcessResult run =
        run_process({kCuptiChild, kCollector, kStandInCupti, "many-callers"}, options);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_EQ(run.out, "calls=700\n");
    auto files = traces_in(dir.path());
    ASSERT_EQ(files.size(), 1u);
    analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
    std::map<int, std::uint64_t>& by_caller = allocations_by_reuse[reuse];
    std::uint64_t total = 0;
    for (const auto& group : report.leaks.groups) {
      int caller = -1;
      for (const auto& frame : group.frames) {
        auto at = frame.function.find("many_caller<");
        if (at != std::string::npos) caller = std::atoi(frame.function.c_str() + at + 12);
      }
      ASSERT_GE(caller, 0) << "a stack without its caller: " << group.site.label();
      EXPECT_EQ(group.bytes, group.allocations * 4096ull * (caller + 1))
          << "allocations of another caller were given caller " << caller << "'s stack";
      by_caller[caller] += group.allocations;
      total += group.allocations;
    }
    EXPECT_EQ(total, 700u);
    EXPECT_EQ(by_caller.size(), 80u);
  }
  EXPECT_EQ(allocations_by_reuse["1"], allocations_by_reuse["0"]);
}

// A profiler that subscribed first keeps CUPTI; the collector says so once
// and the program runs untouched, its driver calls answered as before.
TEST(CollectorCupti, another_cupti_client_first_means_one_line_and_an_untouched_program) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessResult run =
      run_process({kCuptiChild, kCollector, kStandInCupti, "events-after-another-client"},
                  cupti_options(dir.path()));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "done\n");
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_NE(run.err.find("another CUPTI client"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("already holds the CUDA callbacks"), std::string::npos) << run.err;
  for (const auto& file : traces_in(dir.path())) {
    EXPECT_TRUE(read_trace(file).all<trace::AllocRecord>().empty());
  }
}

}  // namespace
}  // namespace gpuleak::collector

namespace gpuleak::collector {
namespace {

// ---- Starting more than once -------------------------------------------------

#ifdef GPULEAK_TEST_INTERPOSER
const std::string kInterposer = GPULEAK_TEST_INTERPOSER;
const std::string kDriverChild = GPULEAK_TEST_DRIVER_CHILD;
const std::string kDriverChildSource = GPULEAK_TEST_DRIVER_CHILD_SOURCE;
#else
const std::string kInterposer, kDriverChild, kDriverChildSource;
#endif

// The last capture_backend annotation of a trace, parsed.
nlohmann::json capture_backend_of(const TraceContents& c) {
  nlohmann::json found;
  for (const auto& a : c.all<trace::AnnotationRecord>()) {
    if (a.key == "capture_backend") found = nlohmann::json::parse(a.value, nullptr, false);
  }
  return found;
}

// Allocations by kind and size, frees, failures: the stand-ins' event script
// (cupti_child.cpp and driver_child.cpp make the same calls).
struct EventCounts {
  std::map<std::uint64_t, int> async_sizes, sync_sizes;
  std::size_t frees = 0, failures = 0;
};

EventCounts count_events(const TraceContents& c) {
  EventCounts n;
  for (const auto& a : c.all<trace::AllocRecord>()) {
    if (a.kind == trace::MemoryKind::kDeviceAsync) {
      ++n.async_sizes[a.size];
    } else {
      ++n.sync_sizes[a.size];
    }
  }
  n.frees = c.all<trace::FreeRecord>().size();
  n.failures = c.all<trace::AllocFailedRecord>().size();
  return n;
}

// The Lightning failure (issue 14): a second start in one process made the
// collector subscribe again, CUPTI refused naming gpuleak as the holder, and
// the collector turned itself off. Whether the driver initializes twice,
// threads race to initialize, or a library re-enters the start from inside
// CUPTI, recording must go on as after one start, without a word on stderr.
TEST(CollectorCupti, a_second_start_in_one_process_is_harmless_twice_racing_or_reentrant) {
  SKIP_WITHOUT_COLLECTOR();
  struct Case {
    const char* mode;
    bool reenter;
    int start_requests;
    int reentrant_requests;
  };
  for (const Case& k :
       {Case{"events-initialized-twice", false, 2, 0},
        Case{"events-initialized-concurrently", false, 8, 0}, Case{"events", true, 1, 1}}) {
    SCOPED_TRACE(std::string(k.mode) + (k.reenter ? " (re-entered from cuptiSubscribe)" : ""));
    ScratchDir dir;
    ProcessOptions options = cupti_options(dir.path());
    if (k.reenter) options.set_env.push_back("STAND_IN_CUPTI_REENTER=" + kCollector);
    ProcessResult run = run_process({kCuptiChild, kCollector, kStandInCupti, k.mode}, options);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_EQ(run.out, "done\n");
    EXPECT_EQ(run.err, "") << "a second start must not disable the collector";
    auto files = traces_in(dir.path());
    ASSERT_EQ(files.size(), 1u);
    TraceContents c = read_trace(files[0]);
    EventCounts n = count_events(c);
    EXPECT_EQ(n.async_sizes, (std::map<std::uint64_t, int>{{256u << 10, 3}, {1u << 20, 10}}));
    EXPECT_EQ(n.sync_sizes, (std::map<std::uint64_t, int>{{4096, 1}, {8192, 1}}));
    EXPECT_EQ(n.frees, 11u);
    nlohmann::json backend = capture_backend_of(c);
    ASSERT_TRUE(backend.is_object());
    EXPECT_EQ(backend.value("name", ""), "cupti");
    EXPECT_EQ(backend.value("start_requests", 0), k.start_requests);
    EXPECT_EQ(backend.value("reentrant_start_requests", -1), k.reentrant_requests);
  }
}

// CUPTI names the holder "CUPTI for <name>" (cuptiSubscribe_v2): a refusal
// by another tool says which.
TEST(CollectorCupti, another_clients_name_is_in_the_one_line) {
  SKIP_WITHOUT_COLLECTOR();
  ScratchDir dir;
  ProcessResult run =
      run_process({kCuptiChild, kCollector, kStandInCupti, "events-after-another-client"},
                  cupti_options(dir.path()));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_NE(run.err.find("(CUPTI for unknown)"), std::string::npos) << run.err;
}

// ---- The interposer backend, through a stand-in libcuda ------------------------

#define SKIP_WITHOUT_INTERPOSER()                                                      \
  do {                                                                                 \
    SKIP_WITHOUT_COLLECTOR();                                                          \
    if (kInterposer.empty() || !fs::exists(kInterposer))                               \
      GTEST_SKIP() << "libgpuleak_interposer.so was not built here (no CUDA headers)"; \
  } while (0)

ProcessOptions interposer_options(const std::string& trace_dir) {
  ProcessOptions options = collector_options(trace_dir);
  options.unset_env.push_back("GPULEAK_BACKEND");
  options.set_env.push_back("LD_PRELOAD=" + kInterposer);
  options.set_env.push_back("CUDA_INJECTION64_PATH=" + kCollector);
  return options;
}

// What `gpuleak run` sets up for a program: the interposer preloaded, the
// collector injected. The program reaches the driver through entry points
// from cuGetProcAddress (as the CUDA runtime does), through dlsym and
// through direct linked calls; every call must be one exact event, a call
// the driver makes to its own entry point must not count twice, and the
// report must name the two leaking lines.
TEST(CollectorInterposer, calls_through_lookups_dlsym_and_links_become_exact_events) {
  SKIP_WITHOUT_INTERPOSER();
  ScratchDir dir;
  ProcessResult run = run_process({kDriverChild, "events"}, interposer_options(dir.path()));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "done\n");
  EXPECT_EQ(run.err, "");
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  TraceContents c = read_trace(files[0]);
  EXPECT_EQ(c.error, "");
  EXPECT_TRUE(c.seq_dense) << "the failed free must still fill its sequence number";
  nlohmann::json backend = capture_backend_of(c);
  ASSERT_TRUE(backend.is_object());
  EXPECT_EQ(backend.value("name", ""), "interposer");
  EXPECT_EQ(backend.value("interposer_loaded_before_driver", false), true);

  auto contexts = c.all<trace::ContextRecord>();
  ASSERT_EQ(contexts.size(), 1u);
  EXPECT_EQ(contexts[0].action, trace::ContextAction::kPrimaryRetained);
  EventCounts n = count_events(c);
  EXPECT_EQ(n.async_sizes,
            (std::map<std::uint64_t, int>{{8192, 1}, {256u << 10, 3}, {1u << 20, 10}}));
  EXPECT_EQ(n.sync_sizes, (std::map<std::uint64_t, int>{{4096, 1}}));
  EXPECT_EQ(n.frees, 11u);
  EXPECT_EQ(n.failures, 1u);
  for (const auto& a : c.all<trace::AllocRecord>()) {
    EXPECT_EQ(a.device, 0) << "the device comes from the current context";
    EXPECT_NE(a.stack_id, 0u);
  }

  analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
  ASSERT_EQ(report.leaks.groups.size(), 2u);
  std::map<std::uint64_t, const analysis::LeakGroup*> by_bytes;
  for (const auto& g : report.leaks.groups) by_bytes[g.bytes] = &g;
  ASSERT_TRUE(by_bytes.count(768u << 10));
  EXPECT_EQ(by_bytes[768u << 10]->api, "cuMemAllocAsync_ptsz");
  EXPECT_NE(by_bytes[768u << 10]->site.function.find("leak_async_blocks"), std::string::npos);
  EXPECT_EQ(by_bytes[768u << 10]->site.line, marked_line("async leak", kDriverChildSource));
  ASSERT_TRUE(by_bytes.count(8192));
  EXPECT_EQ(by_bytes[8192]->api, "cuMemAllocAsync");
  EXPECT_NE(by_bytes[8192]->site.function.find("leak_linked_block"), std::string::npos);
  EXPECT_EQ(by_bytes[8192]->site.line, marked_line("linked leak", kDriverChildSource));
}

// Executable graphs hold device memory that no allocation call shows: each
// cuGraphInstantiate* is recorded as a graph-exec allocation sized from the
// graph's node count and each cuGraphExecDestroy as its release, so a
// program that instantiates per step and never destroys is a leak at the
// instantiating line, and one that destroys is not.
TEST(CollectorInterposer, executable_graphs_are_recorded_from_instantiate_to_destroy) {
  SKIP_WITHOUT_INTERPOSER();
  for (bool destroy : {false, true}) {
    SCOPED_TRACE(destroy ? "graphs-destroyed" : "graphs-kept");
    ScratchDir dir;
    ProcessResult run = run_process({kDriverChild, destroy ? "graphs-destroyed" : "graphs-kept"},
                                    interposer_options(dir.path()));
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    auto files = traces_in(dir.path());
    ASSERT_EQ(files.size(), 1u);
    TraceContents c = read_trace(files[0]);
    EXPECT_EQ(c.error, "");
    std::set<std::uint64_t> sizes;
    std::size_t graph_execs = 0;
    for (const auto& a : c.all<trace::AllocRecord>()) {
      if (a.kind != trace::MemoryKind::kGraphExec) continue;
      ++graph_execs;
      sizes.insert(a.size);
    }
    EXPECT_EQ(graph_execs, 20u);
    ASSERT_EQ(sizes.size(), 1u) << "one graph, one estimate";
    // 256 nodes: more than a graph's base, and within what the GPU probe measured.
    EXPECT_GT(*sizes.begin(), 256u * 1024);
    EXPECT_LT(*sizes.begin(), 4u << 20);
    std::size_t graph_frees = 0;
    for (const auto& f : c.all<trace::FreeRecord>())
      graph_frees += f.kind == trace::MemoryKind::kGraphExec;
    EXPECT_EQ(graph_frees, destroy ? 20u : 0u);

    analysis::ProcessReport report = analysis::analyze_trace_file(files[0], {});
    if (destroy) {
      EXPECT_TRUE(report.leaks.groups.empty());
      continue;
    }
    ASSERT_EQ(report.leaks.groups.size(), 1u);
    const analysis::LeakGroup& g = report.leaks.groups[0];
    EXPECT_EQ(g.kind, trace::MemoryKind::kGraphExec);
    EXPECT_EQ(g.api, "cuGraphInstantiateWithFlags");
    EXPECT_EQ(g.bytes, 20 * *sizes.begin());
    EXPECT_NE(g.site.function.find("instantiate_graph"), std::string::npos);
    EXPECT_EQ(g.site.line, marked_line("instantiate", kDriverChildSource));
  }
}

// With one device visible the interposer's events take device 0 without
// asking the driver for the current context; with several it asks for each
// context's device. Both must give the driver's answer.
TEST(CollectorInterposer,
     events_name_the_device_of_the_current_context_with_one_device_or_several) {
  SKIP_WITHOUT_INTERPOSER();
  for (const char* devices : {"1", "2"}) {
    ScratchDir dir;
    ProcessOptions options = interposer_options(dir.path());
    options.set_env.push_back(std::string("STAND_IN_DRIVER_DEVICES=") + devices);
    ProcessResult run = run_process({kDriverChild, "events"}, options);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    auto files = traces_in(dir.path());
    ASSERT_EQ(files.size(), 1u);
    TraceContents c = read_trace(files[0]);
    ASSERT_EQ(c.all<trace::AllocRecord>().size(), 15u) << devices << " devices";
    for (const auto& a : c.all<trace::AllocRecord>()) EXPECT_EQ(a.device, 0) << devices;
    ASSERT_EQ(c.all<trace::FreeRecord>().size(), 11u) << devices << " devices";
    for (const auto& f : c.all<trace::FreeRecord>()) EXPECT_EQ(f.device, 0) << devices;
  }
}

// torch.profiler, Nsight Systems or another CUPTI client holding CUPTI is no
// reason to stop: with the interposer the collector never subscribes, and
// the other client keeps receiving its callbacks.
TEST(CollectorInterposer, records_beside_another_cupti_client_that_keeps_its_callbacks) {
  SKIP_WITHOUT_INTERPOSER();
  ScratchDir dir;
  ProcessOptions options = interposer_options(dir.path());
  options.set_env.push_back("GPULEAK_CUPTI_LIBRARY=" + kStandInCupti);
  ProcessResult run =
      run_process({kDriverChild, "events-another-cupti-client", kStandInCupti}, options);
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "profiler callbacks 2\ndone\n");
  EXPECT_EQ(run.err, "");
  auto files = traces_in(dir.path());
  ASSERT_EQ(files.size(), 1u);
  TraceContents c = read_trace(files[0]);
  EXPECT_EQ(count_events(c).frees, 11u);
  EXPECT_EQ(capture_backend_of(c).value("name", ""), "interposer");
}

// GPULEAK_BACKEND=cupti keeps the old behaviour beside another client: one
// line, nothing recorded; GPULEAK_BACKEND=interposer without the interposer
// preloaded says so in one line.
TEST(CollectorInterposer, an_explicit_backend_that_cannot_run_says_why_in_one_line) {
  SKIP_WITHOUT_INTERPOSER();
  {
    ScratchDir dir;
    ProcessOptions options = interposer_options(dir.path());
    options.set_env.push_back("GPULEAK_CUPTI_LIBRARY=" + kStandInCupti);
    options.set_env.push_back("GPULEAK_BACKEND=cupti");
    ProcessResult run =
        run_process({kDriverChild, "events-another-cupti-client", kStandInCupti}, options);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_NE(run.err.find("another CUPTI client"), std::string::npos) << run.err;
  }
  {
    ScratchDir dir;
    ProcessOptions options = collector_options(dir.path());
    options.set_env.push_back("CUDA_INJECTION64_PATH=" + kCollector);
    options.set_env.push_back("GPULEAK_BACKEND=interposer");
    ProcessResult run = run_process({kDriverChild, "events"}, options);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_EQ(run.out, "done\n");
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_NE(run.err.find("not preloaded"), std::string::npos) << run.err;
  }
}

// The interposer exports dlsym; a lookup relative to the caller
// (RTLD_NEXT) must still be relative to the caller, not to the interposer.
TEST(CollectorInterposer, rtld_next_lookups_stay_relative_to_their_caller) {
  SKIP_WITHOUT_INTERPOSER();
  ScratchDir dir;
  ProcessResult run = run_process({kDriverChild, "rtld-next"}, interposer_options(dir.path()));
  EXPECT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "rtld-next ok\n");
}

}  // namespace
}  // namespace gpuleak::collector
