#include "trace/codec.h"

#include <cstring>
#include <type_traits>

#include "trace/varint.h"

namespace gpuleak::trace {

namespace {

// ---- The field lists: the one place that says what a record body holds ---

template <class V>
void fields(V& v, ProcessRecord& r) {
  v(r.pid), v(r.parent_pid), v(r.start_unix_ns), v(r.start_monotonic_ns), v(r.executable),
      v(r.command_line), v(r.hostname), v(r.collector_version);
}
template <class V>
void fields(V& v, ApiNameRecord& r) {
  v(r.api), v(r.name);
}
template <class V>
void fields(V& v, ThreadRecord& r) {
  v(r.thread_id), v(r.name);
}
template <class V>
void fields(V& v, ModuleRecord& r) {
  v(r.load_bias), v(r.low), v(r.high), v(r.path);
}
template <class V>
void fields(V& v, PythonCodeRecord& r) {
  v(r.code_id), v(r.filename), v(r.function), v(r.first_line);
}
template <class V>
void fields(V& v, StackRecord& r) {
  v(r.stack_id), v(r.native), v(r.python);
}
template <class V>
void fields(V& v, SymbolRecord& r) {
  v(r.address), v(r.function), v(r.file), v(r.line), v(r.module);
  v.optional_tail(r.inlined_into);
}
template <class V>
void fields(V& v, SourceLineRecord& r) {
  v(r.file), v(r.line), v(r.text);
}
template <class V>
void fields(V& v, CompactionRecord& r) {
  v(r.through_seq), v(r.first_time_ns), v(r.through_time_ns), v(r.compactions), v(r.dropped_events),
      v(r.lost_events), v(r.allocations), v(r.frees), v(r.steps), v(r.step_resolution),
      v(r.bound_bytes), v(r.peak_live_bytes);
}
template <class V>
void fields(V& v, StepSummaryRecord& r) {
  v(r.time_ns), v(r.step), v(r.source), v(r.clock), v(r.live_bytes), v(r.live_allocations);
}
template <class V>
void fields(V& v, AllocRecord& r) {
  v(r.seq), v(r.time_ns), v(r.address), v(r.size), v(r.kind), v(r.api), v(r.device), v(r.stream),
      v(r.thread_id), v(r.stack_id);
}
template <class V>
void fields(V& v, FreeRecord& r) {
  v(r.seq), v(r.time_ns), v(r.address), v(r.kind), v(r.api), v(r.device), v(r.thread_id);
}
template <class V>
void fields(V& v, AllocFailedRecord& r) {
  v(r.seq), v(r.time_ns), v(r.size), v(r.kind), v(r.api), v(r.device), v(r.result), v(r.thread_id),
      v(r.stack_id);
}
template <class V>
void fields(V& v, StepRecord& r) {
  v(r.seq), v(r.time_ns), v(r.step), v(r.source);
  v.optional_tail(r.clock);
}
template <class V>
void fields(V& v, SampleRecord& r) {
  v(r.seq), v(r.time_ns), v(r.metric), v(r.device), v(r.value);
}
template <class V>
void fields(V& v, AnnotationRecord& r) {
  v(r.seq), v(r.time_ns), v(r.key), v(r.value);
}
template <class V>
void fields(V& v, ContextRecord& r) {
  v(r.seq), v(r.time_ns), v(r.action), v(r.context), v(r.device);
}
template <class V>
void fields(V& v, ExitRecord& r) {
  v(r.seq), v(r.time_ns);
}
template <class V>
void fields(V& v, LostRecord& r) {
  v(r.seq), v(r.time_ns), v(r.events);
  v.optional_tail(r.ranges);
}

template <class T>
constexpr RecordType type_of() {
  if constexpr (std::is_same_v<T, ProcessRecord>) return RecordType::kProcess;
  if constexpr (std::is_same_v<T, ApiNameRecord>) return RecordType::kApiName;
  if constexpr (std::is_same_v<T, ThreadRecord>) return RecordType::kThread;
  if constexpr (std::is_same_v<T, ModuleRecord>) return RecordType::kModule;
  if constexpr (std::is_same_v<T, PythonCodeRecord>) return RecordType::kPythonCode;
  if constexpr (std::is_same_v<T, StackRecord>) return RecordType::kStack;
  if constexpr (std::is_same_v<T, SymbolRecord>) return RecordType::kSymbol;
  if constexpr (std::is_same_v<T, SourceLineRecord>) return RecordType::kSourceLine;
  if constexpr (std::is_same_v<T, CompactionRecord>) return RecordType::kCompaction;
  if constexpr (std::is_same_v<T, StepSummaryRecord>) return RecordType::kStepSummary;
  if constexpr (std::is_same_v<T, AllocRecord>) return RecordType::kAlloc;
  if constexpr (std::is_same_v<T, FreeRecord>) return RecordType::kFree;
  if constexpr (std::is_same_v<T, AllocFailedRecord>) return RecordType::kAllocFailed;
  if constexpr (std::is_same_v<T, StepRecord>) return RecordType::kStep;
  if constexpr (std::is_same_v<T, SampleRecord>) return RecordType::kSample;
  if constexpr (std::is_same_v<T, AnnotationRecord>) return RecordType::kAnnotation;
  if constexpr (std::is_same_v<T, ContextRecord>) return RecordType::kContext;
  if constexpr (std::is_same_v<T, ExitRecord>) return RecordType::kExit;
  if constexpr (std::is_same_v<T, LostRecord>) return RecordType::kLost;
}

// ---- Encoding --------------------------------------------------------------

// Writes into a raw buffer; used both for the fixed-size hot path and, via a
// scratch buffer, for the general case.
class StringBodyWriter {
 public:
  explicit StringBodyWriter(std::string& out) : out_(out) {}
  void operator()(std::uint64_t v) { varint::append(out_, v); }
  void operator()(std::uint32_t v) { varint::append(out_, v); }
  void operator()(std::int32_t v) { varint::append(out_, varint::zigzag(v)); }
  template <class E>
  requires std::is_enum_v<E>
  void operator()(E v) { varint::append(out_, static_cast<std::uint64_t>(v)); }
  void operator()(const std::string& s) {
    varint::append(out_, s.size());
    out_.append(s);
  }
  void operator()(const std::vector<std::uint64_t>& values) {
    varint::append(out_, values.size());
    for (std::uint64_t v : values) varint::append(out_, v);
  }
  void operator()(const std::vector<PythonFrame>& frames) {
    varint::append(out_, frames.size());
    for (const PythonFrame& f : frames) {
      varint::append(out_, f.code_id);
      varint::append(out_, f.line);
    }
  }
  void operator()(const std::vector<InlinedCaller>& callers) {
    varint::append(out_, callers.size());
    for (const InlinedCaller& c : callers) (*this)(c.function), (*this)(c.file), (*this)(c.line);
  }
  void operator()(const std::vector<SeqRange>& ranges) {
    varint::append(out_, ranges.size());
    for (const SeqRange& r : ranges)
      varint::append(out_, r.first_seq), varint::append(out_, r.count);
  }
  // A field appended by a later minor version: always written.
  template <class F>
  void optional_tail(const F& field) {
    (*this)(field);
  }

 private:
  std::string& out_;
};

class RawBodyWriter {
 public:
  explicit RawBodyWriter(std::uint8_t* out) : cursor_(out) {}
  void operator()(std::uint64_t v) { cursor_ = varint::put(cursor_, v); }
  void operator()(std::uint32_t v) { cursor_ = varint::put(cursor_, v); }
  void operator()(std::int32_t v) { cursor_ = varint::put(cursor_, varint::zigzag(v)); }
  template <class E>
  requires std::is_enum_v<E>
  void operator()(E v) { cursor_ = varint::put(cursor_, static_cast<std::uint64_t>(v)); }
  template <class F>
  void optional_tail(const F& field) {
    (*this)(field);
  }
  std::uint8_t* cursor() const { return cursor_; }

 private:
  std::uint8_t* cursor_;
};

template <class T>
std::size_t encode_fixed(const T& record, std::uint8_t* out) {
  // Body first at out + 2; every fixed event body is < 128 bytes, so its
  // length fits one varint byte.
  RawBodyWriter writer(out + 2);
  fields(writer, const_cast<T&>(record));
  auto body = static_cast<std::size_t>(writer.cursor() - (out + 2));
  out[0] = static_cast<std::uint8_t>(type_of<T>());
  out[1] = static_cast<std::uint8_t>(body);
  return body + 2;
}

// ---- Decoding --------------------------------------------------------------

class BodyReader {
 public:
  BodyReader(const std::uint8_t* begin, const std::uint8_t* end) : cursor_(begin), end_(end) {}
  bool ok() const { return ok_; }

  void operator()(std::uint64_t& v) { ok_ = ok_ && varint::get(&cursor_, end_, &v); }
  void operator()(std::uint32_t& v) {
    std::uint64_t wide = 0;
    (*this)(wide);
    if (wide > UINT32_MAX) ok_ = false;
    v = static_cast<std::uint32_t>(wide);
  }
  void operator()(std::int32_t& v) {
    std::uint64_t wide = 0;
    (*this)(wide);
    std::int64_t value = varint::unzigzag(wide);
    if (value < INT32_MIN || value > INT32_MAX) ok_ = false;
    v = static_cast<std::int32_t>(value);
  }
  template <class E>
  requires std::is_enum_v<E>
  void operator()(E& v) {
    std::uint64_t wide = 0;
    (*this)(wide);
    if (wide > 0xff) ok_ = false;
    v = static_cast<E>(wide);
  }
  void operator()(std::string& s) {
    std::uint64_t size = 0;
    (*this)(size);
    if (!ok_ || size > static_cast<std::uint64_t>(end_ - cursor_)) {
      ok_ = false;
      return;
    }
    s.assign(reinterpret_cast<const char*>(cursor_), size);
    cursor_ += size;
  }
  void operator()(std::vector<std::uint64_t>& values) {
    std::uint64_t count = 0;
    (*this)(count);
    // Each element takes at least one byte: a larger count is corruption.
    if (!ok_ || count > static_cast<std::uint64_t>(end_ - cursor_)) {
      ok_ = false;
      return;
    }
    values.resize(count);
    for (auto& v : values) (*this)(v);
  }
  void operator()(std::vector<PythonFrame>& frames) {
    std::uint64_t count = 0;
    (*this)(count);
    if (!ok_ || count > static_cast<std::uint64_t>(end_ - cursor_) / 2) {
      ok_ = false;
      return;
    }
    frames.resize(count);
    for (auto& f : frames) (*this)(f.code_id), (*this)(f.line);
  }
  void operator()(std::vector<InlinedCaller>& callers) {
    std::uint64_t count = 0;
    (*this)(count);
    // Each caller takes at least three bytes.
    if (!ok_ || count > static_cast<std::uint64_t>(end_ - cursor_) / 3) {
      ok_ = false;
      return;
    }
    callers.resize(count);
    for (auto& c : callers) (*this)(c.function), (*this)(c.file), (*this)(c.line);
  }
  void operator()(std::vector<SeqRange>& ranges) {
    std::uint64_t count = 0;
    (*this)(count);
    // Each range takes at least two bytes.
    if (!ok_ || count > static_cast<std::uint64_t>(end_ - cursor_) / 2) {
      ok_ = false;
      return;
    }
    ranges.resize(count);
    for (auto& r : ranges) (*this)(r.first_seq), (*this)(r.count);
  }
  // A field appended by a later minor version: absent (left empty) when the
  // body ends before it, as in traces written before it existed.
  template <class F>
  void optional_tail(F& field) {
    if (ok_ && cursor_ < end_) (*this)(field);
  }

 private:
  const std::uint8_t* cursor_;
  const std::uint8_t* end_;
  bool ok_ = true;
};

template <class T>
bool decode_body(const std::uint8_t* begin, const std::uint8_t* end, Record& out) {
  T record;
  BodyReader reader(begin, end);
  fields(reader, record);
  // Trailing bytes are allowed: a later minor version may append fields.
  if (!reader.ok()) return false;
  out = std::move(record);
  return true;
}

}  // namespace

void encode_record(const Record& record, std::string& out) {
  std::visit(
      [&out](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        // A plain local, not a thread_local: the collector encodes inside
        // CUDA callbacks and next to the dynamic loader, and the first use of
        // a thread_local with a destructor takes the loader's lock.
        std::string body;
        StringBodyWriter writer(body);
        fields(writer, const_cast<T&>(r));
        out.push_back(static_cast<char>(type_of<T>()));
        varint::append(out, body.size());
        out.append(body);
      },
      record);
}

std::size_t encode_alloc(const AllocRecord& record, std::uint8_t* out) {
  return encode_fixed(record, out);
}

std::size_t encode_free(const FreeRecord& record, std::uint8_t* out) {
  return encode_fixed(record, out);
}

DecodeStatus decode_record(const std::uint8_t** cursor, const std::uint8_t* end, Record& out) {
  const std::uint8_t* p = *cursor;
  if (p >= end) return DecodeStatus::kMalformed;
  auto type = static_cast<RecordType>(*p++);
  std::uint64_t body_bytes = 0;
  if (!varint::get(&p, end, &body_bytes) || body_bytes > static_cast<std::uint64_t>(end - p)) {
    return DecodeStatus::kMalformed;
  }
  const std::uint8_t* body_end = p + body_bytes;
  bool ok = true;
  switch (type) {
    case RecordType::kProcess:
      ok = decode_body<ProcessRecord>(p, body_end, out);
      break;
    case RecordType::kApiName:
      ok = decode_body<ApiNameRecord>(p, body_end, out);
      break;
    case RecordType::kThread:
      ok = decode_body<ThreadRecord>(p, body_end, out);
      break;
    case RecordType::kModule:
      ok = decode_body<ModuleRecord>(p, body_end, out);
      break;
    case RecordType::kPythonCode:
      ok = decode_body<PythonCodeRecord>(p, body_end, out);
      break;
    case RecordType::kStack:
      ok = decode_body<StackRecord>(p, body_end, out);
      break;
    case RecordType::kSymbol:
      ok = decode_body<SymbolRecord>(p, body_end, out);
      break;
    case RecordType::kSourceLine:
      ok = decode_body<SourceLineRecord>(p, body_end, out);
      break;
    case RecordType::kCompaction:
      ok = decode_body<CompactionRecord>(p, body_end, out);
      break;
    case RecordType::kStepSummary:
      ok = decode_body<StepSummaryRecord>(p, body_end, out);
      break;
    case RecordType::kAlloc:
      ok = decode_body<AllocRecord>(p, body_end, out);
      break;
    case RecordType::kFree:
      ok = decode_body<FreeRecord>(p, body_end, out);
      break;
    case RecordType::kAllocFailed:
      ok = decode_body<AllocFailedRecord>(p, body_end, out);
      break;
    case RecordType::kStep:
      ok = decode_body<StepRecord>(p, body_end, out);
      break;
    case RecordType::kSample:
      ok = decode_body<SampleRecord>(p, body_end, out);
      break;
    case RecordType::kAnnotation:
      ok = decode_body<AnnotationRecord>(p, body_end, out);
      break;
    case RecordType::kContext:
      ok = decode_body<ContextRecord>(p, body_end, out);
      break;
    case RecordType::kExit:
      ok = decode_body<ExitRecord>(p, body_end, out);
      break;
    case RecordType::kLost:
      ok = decode_body<LostRecord>(p, body_end, out);
      break;
    default:
      *cursor = body_end;
      return DecodeStatus::kUnknown;
  }
  if (!ok) return DecodeStatus::kMalformed;
  *cursor = body_end;
  return DecodeStatus::kRecord;
}

}  // namespace gpuleak::trace
