// Writes a synthetic, training-shaped trace of a given number of events, in
// one of three shapes, for timing `gpuleak report` at scale
// (bench/run_report_scaling.py):
//
//   steady   each step allocates 48 activations from 32 Python call sites
//            and frees them (in reverse) before the step ends, keeps its
//            output until the next step: about 100 events per step, nothing
//            grows
//   growing  the same, plus one 4 KiB tensor kept at every step (a leak)
//   lossy    the steady shape with a fifth of the events dropped the way a
//            loaded collector drops them: runs of 64 consecutive events of
//            the step lost (their sequence numbers taken, nothing written),
//            and a LostRecord with their count and ranges (as the collector
//            writes them since format 1.2) written when its buffer is
//            drained, a few steps later, after the events that followed
//   lossy-fresh
//            the lossy shape from an allocator that never hands an address
//            out twice: each allocation whose free was lost stays live to the
//            end (the worst case for the live set; a real allocator hands the
//            block out again, which tells the analysis it was freed)
//
// Addresses come from a caching allocator's free lists (one per size, last
// freed first out), as PyTorch's hands blocks out again step after step; the
// program frees a block whether or not the collector dropped the free event.
//
// Records are encoded with the trace codec and written by the trace writer
// in blocks of 65,536, as the collector does; times advance 20 ms a step.
//
// usage: trace_shapes SHAPE EVENTS OUT.trace
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "trace/codec.h"
#include "trace/records.h"
#include "trace/trace_writer.h"

using namespace gpuleak;

namespace {

constexpr int kActivationSites = 32;
constexpr int kActivationsPerStep = 48;
constexpr std::uint32_t kOutputStack = kActivationSites + 1;
constexpr std::uint32_t kLeakStack = kActivationSites + 2;
constexpr std::uint32_t kParamStack = kActivationSites + 3;

class Writer {
 public:
  explicit Writer(const std::string& path) {
    std::string error;
    writer_ = trace::TraceWriter::create(path, &error);
    if (!writer_) {
      std::fprintf(stderr, "trace_shapes: %s\n", error.c_str());
      std::exit(1);
    }
  }
  ~Writer() { flush(); }
  void add(const trace::Record& r) {
    trace::encode_record(r, block_);
    if (++records_ >= 65536) flush();
  }
  void flush() {
    std::string error;
    if (!block_.empty() && !writer_->write_block(block_, records_, &error)) {
      std::fprintf(stderr, "trace_shapes: %s\n", error.c_str());
      std::exit(1);
    }
    block_.clear();
    records_ = 0;
  }

 private:
  std::unique_ptr<trace::TraceWriter> writer_;
  std::string block_;
  std::uint32_t records_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: trace_shapes steady|growing|lossy|lossy-fresh EVENTS OUT.trace\n");
    return 2;
  }
  std::string shape = argv[1];
  std::uint64_t events = std::strtoull(argv[2], nullptr, 10);
  bool fresh = shape == "lossy-fresh";
  bool growing = shape == "growing", lossy = shape == "lossy" || fresh;
  if (!growing && !lossy && shape != "steady") {
    std::fprintf(stderr, "trace_shapes: unknown shape %s\n", shape.c_str());
    return 2;
  }
  Writer out(argv[3]);
  std::uint64_t time_ns = 1'000'000'000ull;
  out.add(trace::ProcessRecord{4242, 1, 1700000000000000000ull, time_ns, "/usr/bin/python3",
                               "python3 train.py --shape " + shape, "bench", "0.1.0"});
  out.add(trace::ApiNameRecord{1000, "torch.caching_allocator.alloc"});
  out.add(trace::AnnotationRecord{0, time_ns, "torch_tracking",
                                  "{\"mode\": \"allocator-hook\", \"alloc_conf\": \"\", "
                                  "\"torch\": \"2.11.0\", \"hook_error\": null}"});
  std::uint64_t seq = 1;
  for (std::uint32_t s = 1; s <= kParamStack; ++s) {
    out.add(trace::PythonCodeRecord{s, "/work/model.py", "layer_" + std::to_string(s), 10 * s});
    out.add(trace::StackRecord{s, {}, {{s, 10 * s + 2}}});
  }
  std::uint64_t next_address = 0x7f0000000000ull;
  std::map<std::uint64_t, std::vector<std::uint64_t>> free_blocks;  // by rounded size
  auto alloc = [&](std::uint32_t stack, std::uint64_t size) {
    trace::AllocRecord a;
    a.seq = seq++;
    a.time_ns = time_ns;
    std::uint64_t rounded = (size + 511) / 512 * 512;
    std::vector<std::uint64_t>& blocks = free_blocks[rounded];
    if (!fresh && !blocks.empty()) {
      a.address = blocks.back();
      blocks.pop_back();
    } else {
      a.address = next_address;
      next_address += rounded;
    }
    a.size = size;
    a.kind = trace::MemoryKind::kTorchBlock;
    a.api = 1000;
    a.device = 0;
    a.thread_id = 1;
    a.stack_id = stack;
    return a;
  };
  auto free_of = [&](const trace::AllocRecord& a) {
    free_blocks[(a.size + 511) / 512 * 512].push_back(a.address);
    trace::FreeRecord f;
    f.seq = seq++;
    f.time_ns = time_ns;
    f.address = a.address;
    f.kind = a.kind;
    f.api = 1000;
    f.device = 0;
    f.thread_id = 1;
    return f;
  };
  // Events of the step, written unless lost.
  std::uint64_t written = 0, lost_unreported = 0, lost_total = 0;
  std::uint64_t event_number = 0;
  std::uint64_t step = 0;
  bool losing = false;
  std::vector<trace::SeqRange> lost_ranges;
  auto emit = [&](const trace::Record& r) {
    ++event_number;
    // A fifth of the events, in runs of 64.
    if (lossy && step >= 10) losing = (event_number / 64) % 5 == 4;
    if (losing) {
      ++lost_unreported;
      ++lost_total;
      std::uint64_t lost_seq = 0;
      trace::record_seq(r, &lost_seq);
      if (!lost_ranges.empty() &&
          lost_ranges.back().first_seq + lost_ranges.back().count == lost_seq) {
        ++lost_ranges.back().count;
      } else {
        lost_ranges.push_back(trace::SeqRange{lost_seq, 1});
      }
      return;
    }
    out.add(r);
    ++written;
  };
  for (int p = 0; p < 4; ++p) out.add(alloc(kParamStack, 64ull << 20));
  trace::AllocRecord output = alloc(kOutputStack, 1 << 20);
  out.add(output);
  std::vector<trace::AllocRecord> live;
  while (written + lost_total < events) {
    for (int i = 0; i < kActivationsPerStep; ++i) {
      live.push_back(alloc(1 + i % kActivationSites, 256 * 1024 * (1 + i % 4)));
      emit(live.back());
    }
    trace::AllocRecord next_output = alloc(kOutputStack, 1 << 20);
    emit(next_output);
    while (!live.empty()) {
      emit(free_of(live.back()));
      live.pop_back();
    }
    emit(free_of(output));
    output = next_output;
    if (growing) emit(alloc(kLeakStack, 4096));
    if (step % 10 == 0) {
      emit(trace::SampleRecord{seq++, time_ns, trace::Metric::kTorchReservedBytes, 0, 3ull << 30});
    }
    time_ns += 20'000'000;
    // The step boundary itself is never lost (it comes from Python, on
    // another path) in this shape.
    out.add(trace::StepRecord{seq++, time_ns, step, trace::StepSource::kOptimizerHook});
    ++written;
    // The writer drains every few steps and says what it dropped.
    if (lossy && step % 5 == 4 && lost_unreported > 0) {
      out.add(trace::LostRecord{seq++, time_ns, lost_unreported, lost_ranges});
      ++written;
      lost_unreported = 0;
      lost_ranges.clear();
    }
    ++step;
  }
  out.add(trace::ExitRecord{seq++, time_ns});
  out.flush();
  std::printf(
      "{\"shape\": \"%s\", \"events\": %llu, \"written\": %llu, \"lost\": %llu, "
      "\"steps\": %llu}\n",
      shape.c_str(), static_cast<unsigned long long>(written + lost_total),
      static_cast<unsigned long long>(written), static_cast<unsigned long long>(lost_total),
      static_cast<unsigned long long>(step));
  return 0;
}
