// A long job's event stream, written through the collector's bounded trace
// writer (trace/bounded_trace_writer.h) on a simulated clock, so a day of
// training takes seconds to minutes: disk against the bound, compaction
// cost, and a trace `gpuleak report` must still judge right.
//
// The job, per step (one step a second of simulated time by default):
//   - a stable working set: 400 parameters from 16 sites, allocated before
//     the first step and never freed
//   - churn: RATE allocations a second of activations from 32 sites, freed
//     before the step ends, by a second thread (backward), so the trace
//     holds both threads' events out of order as the collector writes them
//   - a rolling window of 64 cached batches (one allocated, the oldest freed,
//     every step) and an optimizer buffer re-made every 100 steps
//   - shape `leak`: one LEAK_BYTES tensor a step kept forever, from the
//     site `train.py:87 (accumulate_metrics)`; shape `clean`: none
//   - a host RSS sample every 10 s, an explicit step mark every step
// Records go to the writer every 100 ms of simulated time, one block per
// thread's buffer, as the collector's writer thread drains them.
//
// After every block the program stats the trace (and a compaction's
// temporary file) from outside the writer: the largest total size seen is
// reported with the writer's own figures, as one JSON line.
//
// usage: long_job OUT.trace [--shape leak|clean] [--hours H] [--rate ALLOCS_PER_S]
//                  [--bound BYTES] [--step-ms MS] [--leak-bytes BYTES]
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "trace/bounded_trace_writer.h"
#include "trace/codec.h"
#include "trace/records.h"

using namespace gpuleak;

namespace {

struct Options {
  std::string out;
  bool leak = true;
  double hours = 24;
  double rate = 1000;  // allocations a second, churn included
  std::uint64_t bound = 64ull << 20;
  std::uint64_t step_ms = 1000;
  std::uint64_t leak_bytes = 4096;
};

constexpr int kParamSites = 16, kParams = 400;
constexpr int kActivationSites = 32;
constexpr int kCacheWindow = 64;
constexpr std::uint32_t kLeakCode = 60, kCacheCode = 61, kOptimizerCode = 62;
constexpr std::uint64_t kFlushNs = 100'000'000;
constexpr std::uint64_t kStartNs = 1'000'000'000;

std::uint64_t disk_bytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_size);
}

class Job {
 public:
  explicit Job(const Options& o) : o_(o) {
    std::string error;
    writer_ = trace::BoundedTraceWriter::create(o.out, o.bound, &error);
    if (!writer_) fail(error);
  }

  void run() {
    define();
    std::uint64_t end_ns = kStartNs + static_cast<std::uint64_t>(o_.hours * 3600e9);
    std::uint64_t step_ns = o_.step_ms * 1'000'000;
    double per_step = o_.rate * static_cast<double>(o_.step_ms) / 1000.0;
    double carry = 0;
    std::uint64_t next_flush = now_ + kFlushNs;
    for (int i = 0; i < kParams; ++i) alloc(0, 1 + i % kParamSites, 4u << 20);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> cache;  // address, size
    std::uint64_t optimizer = 0;
    for (std::uint64_t step = 1; now_ < end_ns; ++step) {
      std::uint64_t step_start = now_;
      carry += per_step;
      auto activations = static_cast<std::uint64_t>(carry);
      carry -= static_cast<double>(activations);
      std::vector<std::uint64_t> live;
      for (std::uint64_t a = 0; a < activations; ++a) {
        now_ = step_start + step_ns * a / (activations + 1) / 2;
        std::uint64_t size = (64u << 10) << (a % 5);
        live.push_back(alloc(0, kParamSites + 1 + a % kActivationSites, size));
        if (now_ >= next_flush) next_flush = flush(next_flush);
      }
      for (std::uint64_t a = live.size(); a-- > 0;) {
        now_ = step_start + step_ns / 2 + step_ns * (live.size() - a) / (live.size() + 1) / 2;
        free(1, live[a], 0);
        if (now_ >= next_flush) next_flush = flush(next_flush);
      }
      now_ = step_start + step_ns - 2'000'000;
      cache.emplace_back(alloc(0, kCacheCode, 256u << 10), 0);
      if (cache.size() > kCacheWindow) {
        free(0, cache.front().first, 0);
        cache.erase(cache.begin());
      }
      if (step % 100 == 1) {
        if (optimizer) free(0, optimizer, 0);
        optimizer = alloc(0, kOptimizerCode, 8u << 20);
      }
      if (o_.leak) alloc(0, kLeakCode, o_.leak_bytes);
      event(0, trace::StepRecord{seq_++, now_, step, trace::StepSource::kExplicit, 0});
      if (step % 10 == 0) {
        event(0, trace::SampleRecord{seq_++, now_, trace::Metric::kHostRssBytes, -1,
                                     (2ull << 30) + step * 64});
      }
      steps_ = step;
      now_ = step_start + step_ns;
      while (now_ >= next_flush) next_flush = flush(next_flush);
    }
    event(0, trace::ExitRecord{seq_++, now_});
    flush(now_);
  }

  void say(double seconds) const {
    const auto& s = writer_->stats();
    std::printf(
        "{\"shape\": \"%s\", \"hours\": %.2f, \"rate\": %.0f, \"bound_bytes\": %llu, "
        "\"events\": %llu, \"steps\": %llu, \"raw_stream_bytes\": %llu, "
        "\"largest_disk_bytes\": %llu, \"final_bytes\": %llu, \"compactions\": %llu, "
        "\"last_summary_bytes\": %llu, \"longest_compaction_ms\": %.1f, "
        "\"observe_ns_per_event\": %.1f, \"wall_s\": %.1f}\n",
        o_.leak ? "leak" : "clean", o_.hours, o_.rate, static_cast<unsigned long long>(o_.bound),
        static_cast<unsigned long long>(seq_), static_cast<unsigned long long>(steps_),
        static_cast<unsigned long long>(uncompacted_bytes_),
        static_cast<unsigned long long>(largest_disk_),
        static_cast<unsigned long long>(writer_->bytes_written()),
        static_cast<unsigned long long>(s.compactions),
        static_cast<unsigned long long>(s.last_summary_bytes),
        static_cast<double>(s.longest_compaction_ns) / 1e6,
        static_cast<double>(s.observe_ns) / static_cast<double>(seq_ ? seq_ : 1), seconds);
  }

  bool over_bound() const { return largest_disk_ > o_.bound; }

 private:
  [[noreturn]] static void fail(const std::string& why) {
    std::fprintf(stderr, "long_job: %s\n", why.c_str());
    std::exit(1);
  }

  void define() {
    std::string& b = buffers_[0];
    trace::ProcessRecord p;
    p.pid = 4242;
    p.parent_pid = 1;
    p.start_unix_ns = 1'800'000'000'000'000'000ull;
    p.start_monotonic_ns = kStartNs;
    p.executable = "/usr/bin/python3";
    p.command_line = "python3 train.py --days 1";
    p.hostname = "long-job";
    p.collector_version = "bench";
    trace::encode_record(p, b);
    counts_[0] = 1;
    add(0, trace::ThreadRecord{100, "python3"});
    add(1, trace::ThreadRecord{101, "pt_autograd_0"});
    add(0, trace::ApiNameRecord{0x10001, "torch.caching_allocator.alloc"});
    add(0, trace::ApiNameRecord{0x10002, "torch.caching_allocator.free_requested"});
    add(0, trace::AnnotationRecord{seq_++, kStartNs, "torch_tracking",
                                   R"({"mode": "allocator-hook", "torch": "2.11.0"})"});
    auto code = [&](std::uint32_t id, const char* function, std::uint32_t line) {
      add(0, trace::PythonCodeRecord{id, "train.py", function, line});
      add(0, trace::StackRecord{id, {}, {{id, line + 3}, {100, 200}}});
    };
    add(0, trace::PythonCodeRecord{100, "train.py", "main", 190});
    for (std::uint32_t i = 1; i <= kParamSites; ++i) code(i, "build_model", 10 + i);
    for (std::uint32_t i = 1; i <= kActivationSites; ++i) code(kParamSites + i, "forward", 30 + i);
    code(kLeakCode, "accumulate_metrics", 84);
    code(kCacheCode, "prefetch_batches", 120);
    code(kOptimizerCode, "optimizer_state", 140);
  }

  void add(int thread, const trace::Record& r) {
    trace::encode_record(r, buffers_[thread]);
    ++counts_[thread];
  }
  void event(int thread, const trace::Record& r) { add(thread, r); }

  std::uint64_t alloc(int thread, std::uint32_t stack, std::uint64_t size) {
    std::uint64_t address;
    auto& pool = free_blocks_[size];
    if (!pool.empty()) {
      address = pool.back();
      pool.pop_back();
    } else {
      address = next_address_;
      next_address_ += (size + 511) & ~511ull;
    }
    sizes_[address] = size;
    event(thread, trace::AllocRecord{seq_++, now_, address, size, trace::MemoryKind::kTorchBlock,
                                     0x10001, 0, 0, 100u + thread, stack});
    return address;
  }

  void free(int thread, std::uint64_t address, int) {
    event(thread, trace::FreeRecord{seq_++, now_, address, trace::MemoryKind::kTorchBlock, 0x10002,
                                    0, 100u + static_cast<std::uint32_t>(thread)});
    std::uint64_t size = sizes_[address];
    sizes_.erase(address);
    free_blocks_[size].push_back(address);
  }

  // Writes each thread's buffer as the collector's writer does: the
  // backward thread's first, so events reach the file out of order.
  std::uint64_t flush(std::uint64_t due) {
    for (int thread : {1, 0}) {
      std::string& b = buffers_[thread];
      if (b.empty()) continue;
      uncompacted_bytes_ += b.size();
      std::string error;
      if (!writer_->write_block(b, counts_[thread], &error)) fail(error);
      b.clear();
      counts_[thread] = 0;
      largest_disk_ =
          std::max(largest_disk_, disk_bytes(o_.out) + disk_bytes(o_.out + ".compacting"));
    }
    return due + kFlushNs;
  }

  Options o_;
  std::unique_ptr<trace::BoundedTraceWriter> writer_;
  std::string buffers_[2];
  std::uint32_t counts_[2] = {0, 0};
  std::uint64_t seq_ = 0, now_ = kStartNs, steps_ = 0;
  std::uint64_t next_address_ = 0x7f0000000000ull;
  std::map<std::uint64_t, std::vector<std::uint64_t>> free_blocks_;
  std::map<std::uint64_t, std::uint64_t> sizes_;
  std::uint64_t uncompacted_bytes_ = 0, largest_disk_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "long_job: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--shape") {
      o.leak = value() == "leak";
    } else if (arg == "--hours") {
      o.hours = std::atof(value().c_str());
    } else if (arg == "--rate") {
      o.rate = std::atof(value().c_str());
    } else if (arg == "--bound") {
      o.bound = std::strtoull(value().c_str(), nullptr, 10);
    } else if (arg == "--step-ms") {
      o.step_ms = std::strtoull(value().c_str(), nullptr, 10);
    } else if (arg == "--leak-bytes") {
      o.leak_bytes = std::strtoull(value().c_str(), nullptr, 10);
    } else if (o.out.empty() && arg[0] != '-') {
      o.out = arg;
    } else {
      std::fprintf(stderr,
                   "usage: long_job OUT.trace [--shape leak|clean] [--hours H] "
                   "[--rate ALLOCS_PER_S] [--bound BYTES] [--step-ms MS] "
                   "[--leak-bytes BYTES]\n");
      return 2;
    }
  }
  if (o.out.empty() || o.step_ms == 0) {
    std::fprintf(stderr, "long_job: name the trace to write\n");
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  Job job(o);
  job.run();
  job.say(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (job.over_bound()) {
    std::fprintf(stderr, "long_job: the trace passed its bound\n");
    return 1;
  }
  return 0;
}
