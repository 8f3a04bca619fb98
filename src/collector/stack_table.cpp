#include "collector/stack_table.h"

#include <vector>

#include "collector/lent_python_stack.h"
#include "collector/native_unwinder.h"
#include "collector/python_frames.h"
#include "trace/codec.h"
#include "trace/records.h"

namespace gpuleak::collector {

namespace {

// One multiply per frame on the hot path; the final avalanche runs once.
// Collisions between real stacks are negligible at the numbers of distinct
// stacks a program has.
inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  return (h ^ v) * 0x100000001b3ull + (h >> 29);
}

// Four independent lanes, so the multiplies of successive frames overlap
// instead of waiting on each other (a stack is 20-60 frames).
std::uint64_t hash_frames(const std::uint64_t* frames, int count) {
  std::uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull, c = 0xa4093822299f31d0ull,
                d = 0x082efa98ec4e6c89ull;
  int i = 0;
  for (; i + 4 <= count; i += 4) {
    a = mix(a, frames[i]);
    b = mix(b, frames[i + 1]);
    c = mix(c, frames[i + 2]);
    d = mix(d, frames[i + 3]);
  }
  for (; i < count; ++i) a = mix(a, frames[i]);
  return mix(mix(mix(mix(a, b), c), d), static_cast<std::uint64_t>(count));
}

inline std::uint64_t finish(std::uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

}  // namespace

std::uint32_t StackTable::intern(std::uint64_t hash, bool* is_new) {
  Shard& shard = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto [it, inserted] = shard.ids.try_emplace(hash, 0);
  if (inserted) it->second = next_stack_id_.fetch_add(1, std::memory_order_relaxed);
  *is_new = inserted;
  return it->second;
}

std::uint32_t StackTable::code_id(void* code, const PythonFrameReader* reader,
                                  std::string& definitions, std::uint32_t& definition_count) {
  std::lock_guard<std::mutex> lock(code_mutex_);
  auto [it, inserted] = code_ids_.try_emplace(code, 0);
  if (!inserted) return it->second;
  it->second = next_code_id_++;
  PythonCodeInfo info;
  if (reader) {
    // Without the GIL a code object cannot be pinned (its reference count
    // is not ours to touch): a freed one's address could be reused by
    // another; the stack table then mislabels, rarely, rather than crash.
    char file[512], function[256];
    int first_line = 0;
    reader->code_info(code, file, sizeof file, function, sizeof function, &first_line);
    info.filename = file;
    info.function = function;
    info.first_line = first_line > 0 ? static_cast<std::uint32_t>(first_line) : 0;
  } else {
    pin_code(code);
    info = describe_code(code);
  }
  trace::encode_record(trace::PythonCodeRecord{it->second, std::move(info.filename),
                                               std::move(info.function), info.first_line},
                       definitions);
  ++definition_count;
  return it->second;
}

bool StackTable::native_frames_wanted(bool with_native) const {
  if (config_.native_depth <= 0) return false;
  if (with_native || config_.native_with_python) return true;
  // Without Python in the process, capture() finds no Python frames.
  return !config_.python_stacks || (!python_frame_reader() && !python_available());
}

[[gnu::hot]] std::uint32_t StackTable::capture(std::string& definitions,
                                               std::uint32_t& definition_count, bool with_native,
                                               const NativeFrames* unwound, bool tensor) {
  const int tensor_stacks = tensor ? tensor_stacks_.load(std::memory_order_relaxed)
                                   : static_cast<int>(TensorStacks::kFull);
  if (tensor_stacks == static_cast<int>(TensorStacks::kNone)) return 0;
  // Python frames: through the compiled reader when there is one (works
  // whether or not this thread holds the GIL), else only with the GIL held.
  constexpr int kMaxPython = PythonCapture::kMaxFrames;
  void* codes[kMaxPython];
  int positions[kMaxPython];
  int python_frames = 0;
  const PythonFrameReader* reader = config_.python_stacks ? python_frame_reader() : nullptr;
  PythonCapture python;
  if (reader) {
    python_frames = reader->frames(codes, positions, kMaxPython);
  } else if (config_.python_stacks && python_available()) {
    python_frames = python.capture();
    for (int i = 0; i < python_frames; ++i) {
      codes[i] = python[i].code;
      positions[i] = static_cast<int>(python[i].position);
    }
  }

  std::uint64_t own[kMaxNativeFrames];
  const std::uint64_t* native = own;
  int native_frames = 0;
  if (unwound && tensor_stacks == static_cast<int>(TensorStacks::kFull)) {
    native = unwound->frames;
    native_frames = unwound->count;
  } else if (config_.native_depth > 0 && tensor_stacks == static_cast<int>(TensorStacks::kFull) &&
             (python_frames == 0 || with_native || config_.native_with_python)) {
    // A tensor without Python frames comes from a thread Python does not
    // know (autograd's backward): the innermost frames name the operation,
    // the rest is the engine's, and unwinding it all costs.
    int depth = tensor && python_frames == 0 ? config_.tensor_native_depth : config_.native_depth;
    if (depth > 0) native_frames = capture_native_stack(own, depth);
  }
  // A thread without Python frames (autograd's engine thread) borrows those
  // of the thread whose backward() it runs (lent_python_stack.h).
  if (python_frames == 0 && reader)
    python_frames = borrow_python_stack(codes, positions, kMaxPython);
  if (python_frames == 0 && native_frames == 0) return 0;
  if (config_.bench_skip & kBenchSkipStackId) [[unlikely]]
    return 0;
  // Frames read from a remembered stack whose id is known: the same frames
  // and no Python frames hash to the same id.
  const RememberedHit* remembered =
      python_frames == 0 && unwound && native == unwound->frames ? &unwound->remembered : nullptr;
  if (remembered && remembered->stack_id != 0) return remembered->stack_id;

  std::uint64_t hash = hash_frames(native, native_frames);
  hash = mix(hash, 0xfeedull);  // separates the native part from the Python part
  for (int i = 0; i < python_frames; ++i) {
    hash = mix(hash, reinterpret_cast<std::uintptr_t>(codes[i]));
    hash = mix(hash, static_cast<std::uint32_t>(positions[i]));
  }

  hash = finish(hash);
  // A loop allocates from the same few stacks over and over: a small
  // per-thread cache of recent stacks skips the shared table (its lock and
  // a hash-map probe that usually misses the CPU cache after a driver call).
  // An id never changes once given, so a cached one is always right.
  struct RecentStack {
    std::uint64_t hash;
    std::uint32_t id;
  };
  static thread_local RecentStack t_recent[kRecentStacks];
  RecentStack& recent = t_recent[hash % kRecentStacks];
  if (recent.id != 0 && recent.hash == hash) {
    if (remembered) remember_stack_id(*remembered, recent.id);
    return recent.id;
  }
  bool is_new = false;
  std::uint32_t id = intern(hash, &is_new);
  recent = {hash, id};
  if (remembered) remember_stack_id(*remembered, id);
  if (!is_new) return id;

  trace::StackRecord record;
  record.stack_id = id;
  record.native.assign(native, native + native_frames);
  record.python.reserve(static_cast<std::size_t>(python_frames));
  for (int i = 0; i < python_frames; ++i) {
    std::uint32_t code = code_id(codes[i], reader, definitions, definition_count);
    std::uint32_t line = 0;
    if (reader) {
      int found = reader->line(codes[i], positions[i]);
      line = found > 0 ? static_cast<std::uint32_t>(found) : 0;
    } else {
      line = python.line(i);
    }
    record.python.push_back(trace::PythonFrame{code, line});
  }
  trace::encode_record(record, definitions);
  ++definition_count;
  return id;
}

}  // namespace gpuleak::collector
