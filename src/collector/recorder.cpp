#include "collector/recorder.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "collector/clock.h"
#include "collector/diagnostics.h"
#include "collector/event_items.h"
#include "collector/native_unwinder.h"
#include "collector/process_facts.h"
#include "collector/python_frames.h"
#include "trace/bounded_trace_writer.h"
#include "trace/codec.h"

namespace gpuleak::collector {

namespace {

std::atomic<Recorder*> g_recorder{nullptr};
std::mutex g_start_mutex;

// Blocks are cut at about this size so one flush of a busy process does not
// make one huge block.
constexpr std::size_t kBlockTargetBytes = 8u << 20;

bool make_directories(const std::string& path, std::string* error) {
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    // 0700: traces are private to their user (docs/security.md).
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      *error = "cannot create trace directory " + partial + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

void on_exit() {
  if (Recorder* r = Recorder::get()) {
    r->record_exit();
    r->flush();
  }
}

void on_fork_child() {
  // The writer thread does not exist in the child, and CUDA cannot be used
  // there after the parent initialized it: record nothing in this process.
  if (Recorder* r = g_recorder.load()) r->abandon_in_child();
}

// Runs when the process unloads the collector, after every atexit handler and
// static destructor, so frees done there are still recorded.
__attribute__((destructor)) void on_unload() {
  if (Recorder* r = g_recorder.load()) r->shutdown();
}

}  // namespace

Recorder* Recorder::get() {
  Recorder* r = g_recorder.load(std::memory_order_acquire);
  return (r && r->recording() && !collector_disabled()) ? r : nullptr;
}

Recorder* Recorder::start(const Config& config) {
  std::lock_guard<std::mutex> lock(g_start_mutex);
  if (Recorder* r = g_recorder.load()) return r->recording() ? r : nullptr;
  if (collector_disabled()) return nullptr;

  choose_clock(config.clock);
  ThreadBuffers::set_max_buffer_bytes(config.buffer_bytes);
  auto* recorder = new Recorder(config);  // never deleted: see header
  std::string error;
  if (!recorder->open_trace(&error)) {
    disable_collector("%s", error.c_str());
    delete recorder;
    return nullptr;
  }
  prepare_native_unwinder(config.reuse_stacks);
  if (config.python_stacks) load_python_api();

  // The writer thread must never take the program's signals.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  try {
    recorder->writer_thread_ = std::thread([recorder] { recorder->writer_loop(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    disable_collector("cannot start the trace writer thread");
    return nullptr;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  pthread_setname_np(recorder->writer_thread_.native_handle(), "gpuleak-writer");

  g_recorder.store(recorder, std::memory_order_release);
  recorder->record_annotation("clock", clock_annotation());
  std::atexit(on_exit);
  pthread_atfork(nullptr, nullptr, on_fork_child);
  say_verbose("recording process %d into %s", static_cast<int>(::getpid()),
              recorder->trace_path_.c_str());
  return recorder;
}

bool Recorder::open_trace(std::string* error) {
  if (!make_directories(config_.trace_dir, error)) return false;
  std::string base = config_.trace_dir + "/gpuleak-" + std::to_string(::getpid());
  // A PID can repeat across runs into one directory: never overwrite.
  for (int attempt = 0; attempt < 100 && !writer_; ++attempt) {
    std::string path = base + (attempt ? "-" + std::to_string(attempt) : "") + ".trace";
    std::string why;
    writer_ = trace::BoundedTraceWriter::create(path, config_.trace_max_bytes, &why);
    if (writer_) {
      trace_path_ = path;
    } else if (errno != EEXIST) {
      *error = why;
      return false;
    }
  }
  if (!writer_) {
    *error = "cannot find a free trace file name for " + base;
    return false;
  }
  std::string first;
  trace::encode_record(describe_process(now_ns()), first);
  if (!writer_->write_block(first, 1, error)) return false;
  return true;
}

[[gnu::hot]] ThreadBuffer& Recorder::buffer_for_this_thread() {
  bool is_new = false;
  ThreadBuffer& buffer = buffers_.current(&is_new);
  if (is_new) {
    std::string definition;
    trace::encode_record(trace::ThreadRecord{buffer.thread_id, thread_name(buffer.thread_id)},
                         definition);
    append_encoded(buffer, definition, 1);
  }
  return buffer;
}

void Recorder::append_encoded(ThreadBuffer& buffer, std::string_view encoded, std::uint32_t records,
                              std::optional<std::uint64_t> seq) {
  std::size_t size = kEncodedItemHeaderBytes + encoded.size();
  char* out = buffer.reserve(size);
  if (!out) {
    if (seq)
      buffer.drop(records, *seq);
    else
      buffer.drop(records);
    return;
  }
  write_encoded_item(out, encoded, records);
  if (buffer.commit(size)) wake_.notify_one();
}

void Recorder::append_record(const trace::Record& record) {
  std::string encoded;
  trace::encode_record(record, encoded);
  std::uint64_t seq = 0;
  bool has_seq = trace::record_seq(record, &seq);
  append_encoded(buffer_for_this_thread(), encoded, 1,
                 has_seq ? std::optional<std::uint64_t>(seq) : std::nullopt);
}

bool Recorder::indexed(trace::MemoryKind kind) const {
  // A framework's own device memory: one driver allocation per buffer, or
  // virtual-memory mappings its buffers are placed in (their addresses are
  // where the arrays are, unlike the physical handles).
  if (kind == trace::MemoryKind::kDevice || kind == trace::MemoryKind::kVmmMapping)
    return index_device_allocations_.load(std::memory_order_relaxed);
  return (kind == trace::MemoryKind::kTorchBlock || kind == trace::MemoryKind::kDeviceAsync) &&
         index_live_allocations_.load(std::memory_order_relaxed);
}

void Recorder::mark_growth_boundary(bool index_driver_allocations) {
  index_live_allocations_.store(true, std::memory_order_relaxed);
  if (index_driver_allocations) index_device_allocations_.store(true, std::memory_order_relaxed);
  live_index_.on_boundary();
}

std::uint64_t Recorder::event_time_ns() const {
  if (config_.bench_skip & kBenchSkipClock) [[unlikely]]
    return 0;
  return now_ns();
}

[[gnu::hot]] void Recorder::record_alloc(std::uint64_t address, std::uint64_t size,
                                         trace::MemoryKind kind, std::uint32_t api,
                                         std::int32_t device, std::uint64_t stream,
                                         bool with_native,
                                         const StackTable::NativeFrames* unwound) {
  std::string definitions;
  std::uint32_t definition_count = 0;
  std::uint32_t stack_id = stacks_.capture(definitions, definition_count, with_native, unwound,
                                           kind == trace::MemoryKind::kTorchBlock);
  trace::AllocRecord r;
  r.seq = next_seq();
  r.time_ns = event_time_ns();
  r.address = address;
  r.size = size;
  r.kind = kind;
  r.api = api;
  r.device = device;
  r.stream = stream;
  ThreadBuffer& buffer = buffer_for_this_thread();
  r.thread_id = buffer.thread_id;
  r.stack_id = stack_id;
  if (indexed(kind)) live_index_.on_alloc(address, size, stack_id);
  // A new stack's definitions go in the same reservation, so they are never
  // dropped apart from the event that first uses them.
  if (config_.bench_skip & kBenchSkipBuffer) [[unlikely]]
    return;
  std::size_t size_needed =
      kAllocItemBytes + (definitions.empty() ? 0 : kEncodedItemHeaderBytes + definitions.size());
  char* out = buffer.reserve(size_needed);
  if (!out) {
    buffer.drop(definition_count + 1, r.seq);
    return;
  }
  char* at = out;
  if (!definitions.empty()) at = write_encoded_item(at, definitions, definition_count);
  at = write_alloc_item(at, r);
  if (buffer.commit(static_cast<std::size_t>(at - out))) wake_.notify_one();
}

[[gnu::hot]] void Recorder::record_free(std::uint64_t seq, std::uint64_t address,
                                        trace::MemoryKind kind, std::uint32_t api,
                                        std::int32_t device) {
  trace::FreeRecord r;
  r.seq = seq;
  r.time_ns = event_time_ns();
  r.address = address;
  r.kind = kind;
  r.api = api;
  r.device = device;
  ThreadBuffer& buffer = buffer_for_this_thread();
  r.thread_id = buffer.thread_id;
  if (indexed(kind)) live_index_.on_free(address);
  if (config_.bench_skip & kBenchSkipBuffer) [[unlikely]]
    return;
  char* out = buffer.reserve(kFreeItemBytes);
  if (!out) {
    buffer.drop(1, r.seq);
    return;
  }
  write_free_item(out, r);
  if (buffer.commit(kFreeItemBytes)) wake_.notify_one();
}

void Recorder::record_nothing(std::uint64_t seq) {
  // A LostRecord of zero events fills the sequence number, so readers do not
  // wait for an event that will never come.
  append_record(trace::LostRecord{seq, now_ns(), 0, {}});
}

void Recorder::record_alloc_failed(std::uint64_t size, trace::MemoryKind kind, std::uint32_t api,
                                   std::int32_t device, std::uint32_t result) {
  std::string definitions;
  std::uint32_t definition_count = 0;
  std::uint32_t stack_id = stacks_.capture(definitions, definition_count, /*with_native=*/true);
  ThreadBuffer& buffer = buffer_for_this_thread();
  trace::AllocFailedRecord r{next_seq(), now_ns(),         size,    kind, api, device,
                             result,     buffer.thread_id, stack_id};
  trace::encode_record(r, definitions);
  append_encoded(buffer, definitions, definition_count + 1, r.seq);
}

void Recorder::record_step(std::uint64_t step, trace::StepSource source, std::uint32_t clock,
                           bool pacing) {
  if (pacing) {
    index_live_allocations_.store(true, std::memory_order_relaxed);
    live_index_.on_boundary();
  }
  append_record(trace::StepRecord{next_seq(), now_ns(), step, source, clock});
}

void Recorder::record_sample(trace::Metric metric, std::int32_t device, std::uint64_t value) {
  append_record(trace::SampleRecord{next_seq(), now_ns(), metric, device, value});
}

void Recorder::record_annotation(const std::string& key, const std::string& value) {
  append_record(trace::AnnotationRecord{next_seq(), now_ns(), key, value});
}

void Recorder::record_context(trace::ContextAction action, std::uint64_t context,
                              std::int32_t device) {
  append_record(trace::ContextRecord{next_seq(), now_ns(), action, context, device});
  bool creates =
      action == trace::ContextAction::kCreated || action == trace::ContextAction::kPrimaryRetained;
  if (!creates || first_context_recorded_.exchange(true)) return;
  // Where the process first needed a context: the stack (native and Python)
  // of this call, once per process, as the `first_cuda_use` annotation.
  std::string encoded;
  std::uint32_t records = 0;
  std::uint32_t stack_id = stacks_.capture(encoded, records, /*with_native=*/true);
  std::string value =
      "{\"stack_id\":" + std::to_string(stack_id) + ",\"device\":" + std::to_string(device) + "}";
  trace::encode_record(trace::AnnotationRecord{next_seq(), now_ns(), "first_cuda_use", value},
                       encoded);
  append_encoded(buffer_for_this_thread(), encoded, records + 1);
}

void Recorder::record_api_name(std::uint32_t api, const char* name) {
  append_record(trace::ApiNameRecord{api, name});
}

void Recorder::record_exit() { append_record(trace::ExitRecord{next_seq(), now_ns()}); }

void Recorder::scan_modules(std::string& out, std::uint32_t& count) {
  unsigned long long generation = loaded_module_generation();
  if (generation == module_adds_seen_) return;
  module_adds_seen_ = generation;
  for_each_loaded_module([&](const trace::ModuleRecord& m) {
    if (!modules_seen_.emplace(m.load_bias, m.path).second) return;
    trace::encode_record(m, out);
    ++count;
  });
}

void Recorder::write_pending() {
  if (!writer_) return;
  std::string& batch = batch_;
  batch.clear();
  std::uint32_t batch_records = 0;
  std::uint64_t dropped = 0;
  std::string error;
  bool failed = false;
  auto write_batch = [&] {
    if (batch.empty() || failed) return;
    if (!writer_->write_block(batch, batch_records, &error)) failed = true;
    batch.clear();
    batch_records = 0;
  };

  scan_modules(batch, batch_records);
  std::uint64_t rss = host_rss_bytes();
  if (rss != 0 && rss != last_rss_bytes_) {
    last_rss_bytes_ = rss;
    trace::encode_record(
        trace::SampleRecord{next_seq(), now_ns(), trace::Metric::kHostRssBytes, -1, rss}, batch);
    ++batch_records;
  }
  bool translated = true;
  dropped_ranges_.clear();
  dropped = buffers_.drain(
      [&](std::string_view items) {
        translated = translate_items(items, batch, batch_records) && translated;
        if (batch.size() >= kBlockTargetBytes) write_batch();
      },
      dropped_ranges_);
  if (dropped > 0 || !dropped_ranges_.empty()) {
    // Its number is taken after the drain, so it is above every number it lists.
    trace::encode_record(trace::LostRecord{next_seq(), now_ns(), dropped, dropped_ranges_}, batch);
    ++batch_records;
  }
  write_batch();
  if (!failed && writer_->stats().compactions != compactions_said_) {
    compactions_said_ = writer_->stats().compactions;
    const auto& stats = writer_->stats();
    say_verbose("compacted the trace (%llu times): summary %llu bytes in %.1f ms",
                static_cast<unsigned long long>(stats.compactions),
                static_cast<unsigned long long>(stats.last_summary_bytes),
                static_cast<double>(stats.last_compaction_ns) / 1e6);
  }
  if (!translated) {
    disable_collector("internal error: a thread's event buffer did not hold whole events");
    state_.store(kStopped);
    writer_.reset();
  } else if (failed) {
    if (writer_->stopped_by_bound()) {
      // The file is whole: its last block says why it stops, so the report
      // says events were lost instead of ending on a trace that looks clean.
      std::string reason;
      for (char ch : error) {
        if (ch == '"' || ch == '\\') reason.push_back('\\');
        if (static_cast<unsigned char>(ch) >= 0x20) reason.push_back(ch);
      }
      std::string last;
      trace::encode_record(trace::AnnotationRecord{next_seq(), now_ns(), "collector_disabled",
                                                   "{\"reason\": \"" + reason + "\"}"},
                           last);
      std::string ignored;
      writer_->write_last_block(last, 1, &ignored);
    }
    disable_collector("%s", error.c_str());
    state_.store(kStopped);
    // Nothing more may be written: a later, smaller block would land where
    // the writer marked the trace as cut, and hide that events were lost.
    writer_.reset();
  }
}

void Recorder::writer_loop() {
  std::unique_lock<std::mutex> lock(wake_mutex_);
  while (!stop_writer_) {
    wake_.wait_for(lock, std::chrono::milliseconds(config_.flush_ms));
    if (stop_writer_) break;
    lock.unlock();
    recalibrate_clock();
    {
      std::lock_guard<std::mutex> write_lock(write_mutex_);
      try {
        write_pending();
      } catch (...) {
        disable_collector("unexpected error while writing the trace");
        state_.store(kStopped);
      }
    }
    lock.lock();
  }
}

void Recorder::flush() {
  std::lock_guard<std::mutex> write_lock(write_mutex_);
  try {
    write_pending();
  } catch (...) {
    disable_collector("unexpected error while writing the trace");
    state_.store(kStopped);
  }
}

void Recorder::shutdown() {
  // In a forked child the writer thread object is a copy of the parent's.
  if (in_forked_child_.load()) return;
  if (state_.load() == kStopped && !writer_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    stop_writer_ = true;
  }
  wake_.notify_all();
  if (writer_thread_.joinable()) writer_thread_.join();
  if (state_.load() == kRecording) flush();
  state_.store(kStopped);
  std::lock_guard<std::mutex> write_lock(write_mutex_);
  writer_.reset();
}

void Recorder::stop_recording() {
  if (in_forked_child_.load() || state_.load() == kStopped) return;
  // Recorder::get() answers nothing from here: no new event takes a number.
  state_.store(kStopped);
  // A call that took its number just before appends its record within
  // microseconds; one left out would read as a lost event.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    stop_writer_ = true;
  }
  wake_.notify_all();
  if (writer_thread_.joinable()) writer_thread_.join();
  std::lock_guard<std::mutex> write_lock(write_mutex_);
  try {
    write_pending();
  } catch (...) {
    disable_collector("unexpected error while writing the trace");
  }
  writer_.reset();
}

}  // namespace gpuleak::collector
