// The recorder: turns facts from the capture backends and the public API
// into trace records, buffers them per thread, and writes them to this
// process's trace file from a writer thread.
//
// Lifetime: created once by Recorder::start() and never destroyed (threads
// may still report while the process exits). After shutdown() or when the
// collector disabled itself, every call is a cheap no-op.
//
// Thread-safe: every record_* method may be called from any thread at once.
// None of them blocks on I/O or throws.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "collector/config.h"
#include "collector/live_index.h"
#include "collector/stack_table.h"
#include "collector/thread_buffers.h"
#include "trace/bounded_trace_writer.h"
#include "trace/records.h"

namespace gpuleak::collector {

class Recorder {
 public:
  // Starts recording (once per process). Returns the recorder, or nullptr if
  // the collector is disabled or could not start (it said why on stderr).
  static Recorder* start(const Config& config);
  // The running recorder, or nullptr.
  static Recorder* get();

  // Reserves the next sequence number. Frees take theirs before the memory
  // is released, so a reuse of the address always comes later in order.
  std::uint64_t next_seq() {
    if (config_.bench_skip & kBenchSkipSeq) [[unlikely]]
      return 0;
    return seq_.fetch_add(1, std::memory_order_relaxed);
  }

  // Captures the calling thread's stack for the allocation.
  // `with_native`: native frames even when Python frames exist. `unwound`:
  // native frames the caller already took (see native_frames_wanted).
  void record_alloc(std::uint64_t address, std::uint64_t size, trace::MemoryKind kind,
                    std::uint32_t api, std::int32_t device, std::uint64_t stream, bool with_native,
                    const StackTable::NativeFrames* unwound = nullptr);
  // Whether record_alloc(..., with_native) will take native frames in any
  // case: a backend then unwinds in its own callback, a few frames nearer
  // the program, and passes them as `unwound`.
  bool native_frames_wanted(bool with_native) const {
    return stacks_.native_frames_wanted(with_native);
  }
  void record_free(std::uint64_t seq, std::uint64_t address, trace::MemoryKind kind,
                   std::uint32_t api, std::int32_t device);
  // A sequence number taken for an event that did not happen (a failed free).
  void record_nothing(std::uint64_t seq);
  // A failed allocation (usually out of memory), with its stack.
  void record_alloc_failed(std::uint64_t size, trace::MemoryKind kind, std::uint32_t api,
                           std::int32_t device, std::uint32_t result);
  // `pacing`: this tick is the one the in-process growth index counts (of
  // several clocks ticking in one iteration, only the most trusted one).
  void record_step(std::uint64_t step, trace::StepSource source, std::uint32_t clock = 0,
                   bool pacing = true);
  void record_sample(trace::Metric metric, std::int32_t device, std::uint64_t value);
  void record_annotation(const std::string& key, const std::string& value);
  // The first context created or retained in the process also records the
  // stack of that call, as the `first_cuda_use` annotation.
  void record_context(trace::ContextAction action, std::uint64_t context, std::int32_t device);
  void record_api_name(std::uint32_t api, const char* name);
  // The process began to exit (atexit); later events are still recorded.
  void record_exit();

  // Writes all buffered records now (used at exit and by gpuleak_flush()).
  void flush();
  // Final flush; stops the writer thread. Later calls record nothing.
  void shutdown();
  // The same for a process that goes on (gpuleak_stop_recording): stops
  // taking events first, lets the calls already recording append theirs,
  // then writes them all, so the trace ends without a gap.
  void stop_recording();
  // In a forked child: the writer thread does not exist there; stop quietly.
  void abandon_in_child() {
    in_forked_child_.store(true);
    state_.store(kStopped);
  }

  // A live-index step boundary without a step (gpuleak_mark_growth_boundary), for
  // processes that mark no step; with `index_driver_allocations`, driver
  // allocations are indexed from then on as well.
  void mark_growth_boundary(bool index_driver_allocations);
  // Sites that kept growing step after step, for the in-process holder walk.
  std::vector<GrowthCandidate> take_growth_candidates() { return live_index_.take_candidates(); }
  // The program ends before any of them was walked: sites that grew at
  // enough steps, not in a row, become candidates (LiveIndex::on_exit).
  void growth_candidates_at_exit() { live_index_.on_exit(); }

  // For the step-time benchmark only (gpuleak_benchmark_tensor_recording).
  StackTable& stacks_for_benchmark() { return stacks_; }

  bool recording() const { return state_.load(std::memory_order_relaxed) == kRecording; }
  const std::string& trace_path() const { return trace_path_; }
  const Config& config() const { return config_; }

 private:
  enum State { kRecording, kStopped };

  explicit Recorder(const Config& config) : config_(config), stacks_(config_) {}
  bool open_trace(std::string* error);
  // Appends already-encoded records to `buffer` (the calling thread's).
  // `seq`: the number of the event among `records`, if one (for the lost
  // record's ranges when the buffer is full).
  void append_encoded(ThreadBuffer& buffer, std::string_view encoded, std::uint32_t records,
                      std::optional<std::uint64_t> seq = std::nullopt);
  // Encodes one (rare) record and appends it to the calling thread's buffer.
  void append_record(const trace::Record& record);
  // Tensor-level allocations go into the live index once steps are marked.
  bool indexed(trace::MemoryKind kind) const;
  // An allocation's or free's time stamp (0 under GPULEAK_BENCH_SKIP=clock).
  std::uint64_t event_time_ns() const;
  ThreadBuffer& buffer_for_this_thread();
  void writer_loop();
  // Collects buffers and process facts and writes them as blocks. Callers
  // hold write_mutex_.
  void write_pending();
  void scan_modules(std::string& out, std::uint32_t& count);

  Config config_;
  StackTable stacks_;
  ThreadBuffers buffers_;
  LiveIndex live_index_;
  // The index serves step-based growth only: a program that never marks a
  // step (a plain CUDA program) does not pay for it.
  std::atomic<bool> index_live_allocations_{false};
  // Set by growth ticks where each driver allocation is one of the
  // framework's arrays (JAX's platform allocator).
  std::atomic<bool> index_device_allocations_{false};
  std::atomic<int> state_{kRecording};
  std::atomic<bool> in_forked_child_{false};
  std::atomic<bool> first_context_recorded_{false};  // the `first_cuda_use` annotation is written
  std::atomic<std::uint64_t> seq_{0};
  std::string trace_path_;

  std::mutex write_mutex_;  // serializes write_pending() between writer thread and flush()
  std::unique_ptr<trace::BoundedTraceWriter> writer_;
  std::uint64_t compactions_said_ = 0;                            // guarded by write_mutex_
  std::set<std::pair<std::uint64_t, std::string>> modules_seen_;  // guarded by write_mutex_
  unsigned long long module_adds_seen_ = 0;                       // guarded by write_mutex_
  std::uint64_t last_rss_bytes_ = 0;                              // guarded by write_mutex_
  // Kept between flushes: a fresh one would be mapped and unmapped each
  // time, and unmapping stalls the program's threads' page faults.
  std::string batch_;                            // guarded by write_mutex_
  std::vector<trace::SeqRange> dropped_ranges_;  // guarded by write_mutex_

  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stop_writer_ = false;  // guarded by wake_mutex_
  std::thread writer_thread_;
};

}  // namespace gpuleak::collector
