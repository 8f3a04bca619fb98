// libFuzzer target: any bytes, read as `gpuleak report` reads a trace
// (TraceReader -> EventSequencer -> ProcessAnalysis -> report), must give a
// report or a TraceError naming the file and an offset inside it; never a
// crash, a hang, another exception or a sanitizer report.
//
// An input is used in one of two ways:
//   - it starts with the file magic "GPULEAKT": it is the trace file itself
//     (fuzzes headers, block framing, sizes, checksums);
//   - otherwise it is a block payload (records as codec.h encodes them),
//     which this target cuts into blocks and compresses with a checksum, as
//     the collector's writer does, so that mutations reach the record
//     decoder, the sequencer and the analysis instead of failing zstd's
//     checksum.
// The file lives in a memfd and is opened by its /proc/self/fd path, so the
// reader's production API (a path) is used unchanged and nothing touches
// the disk.
//
// Paths named by the trace (modules, Python files, symbol files) are moved
// under a folder that does not exist, so the analysis never opens real files
// (the symbolizer and the source-line reader would otherwise read whatever
// a random input names, /dev/zero included).
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/process_analysis.h"
#include "trace/event_sequencer.h"
#include "trace/file_layout.h"
#include "trace/records.h"
#include "trace/trace_reader.h"

namespace {

using namespace gpuleak;

const std::string kNowhere = "/nonexistent-gpuleak-fuzz";

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "trace_reader_fuzz: %s\n", what.c_str());
  std::abort();
}

// Length of the record at data[0..size) by its framing (u8 type, varint
// length, body), or 0 when the framing runs past the end.
std::size_t framed_record_bytes(const std::uint8_t* data, std::size_t size) {
  std::size_t i = 1;
  std::uint64_t length = 0;
  for (int shift = 0; i < size && shift < 64; shift += 7) {
    std::uint8_t byte = data[i++];
    length |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      if (length > size - i) return 0;
      return i + static_cast<std::size_t>(length);
    }
  }
  return 0;
}

void append_block(std::string& file, const std::uint8_t* payload, std::size_t size,
                  std::uint32_t records) {
  static ZSTD_CCtx* context = [] {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    return c;
  }();
  std::string frame(ZSTD_compressBound(size), '\0');
  std::size_t n = ZSTD_compress2(context, frame.data(), frame.size(), payload, size);
  if (ZSTD_isError(n)) fail(std::string("zstd: ") + ZSTD_getErrorName(n));
  trace::BlockHeader header;
  header.compressed_bytes = static_cast<std::uint32_t>(n);
  header.raw_bytes = static_cast<std::uint32_t>(size);
  header.record_count = records;
  std::uint8_t raw[trace::kBlockHeaderBytes];
  trace::encode_block_header(header, raw);
  file.append(reinterpret_cast<char*>(raw), sizeof raw);
  file.append(frame.data(), n);
}

// A trace file holding `payload` cut into blocks of a few records.
std::string wrap_payload(const std::uint8_t* payload, std::size_t size) {
  std::string file(trace::kFileHeaderBytes, '\0');
  trace::encode_file_header(reinterpret_cast<std::uint8_t*>(file.data()));
  std::size_t per_block = 1 + size % 16;
  std::size_t start = 0, at = 0;
  std::uint32_t records = 0;
  while (at < size) {
    std::size_t n = framed_record_bytes(payload + at, size - at);
    if (n == 0) {  // broken framing: the rest is one more (malformed) record
      at = size;
      ++records;
      break;
    }
    at += n;
    if (++records == per_block) {
      append_block(file, payload + start, at - start, records);
      start = at;
      records = 0;
    }
  }
  if (at > start) append_block(file, payload + start, at - start, records);
  return file;
}

void move_paths_nowhere(trace::Record& record) {
  if (auto* m = std::get_if<trace::ModuleRecord>(&record)) m->path = kNowhere + m->path;
  if (auto* c = std::get_if<trace::PythonCodeRecord>(&record)) c->filename = kNowhere + c->filename;
  if (auto* s = std::get_if<trace::SymbolRecord>(&record)) {
    s->file = kNowhere + s->file;
    s->module = kNowhere + s->module;
  }
}

// KNOWN ANALYSIS BUG (reported, not fixed here): ProcessAnalysis adds one
// time-window boundary per elapsed window between the process start and an
// event's time_ns, so an event dated far after the start (a corrupt clock
// value) adds billions of boundaries, and when start + window or the last
// window end passes 2^64 the loop never ends (next_window_ns_ overflows).
// Until the analysis bounds that loop, process starts are folded below 2^62
// and event times into the ~69 s after the start here, so the fuzzer can look
// for other problems.
void fold_times(trace::Record& record, std::uint64_t* start_ns) {
  if (auto* p = std::get_if<trace::ProcessRecord>(&record)) {
    p->start_monotonic_ns %= 1ull << 62;
    *start_ns = p->start_monotonic_ns;
    return;
  }
  std::uint64_t start = *start_ns;
  std::visit(
      [start](auto& r) {
        if constexpr (requires { r.time_ns; }) {
          if (r.time_ns > start) r.time_ns = start + (r.time_ns - start) % (1ull << 36);
        }
      },
      record);
}

// KNOWN ANALYSIS BUG (reported, not fixed here): ProcessAnalysis reads the
// "holder" annotation's JSON with nlohmann's get<>() and value(), which throw
// when a field has another type than expected ("site_id":"1", "kind":7), and
// the exception leaves consume(). Until it checks the types, that one
// exception is tolerated here for holder annotations only.
bool is_holder_annotation(const trace::Record& record) {
  const auto* a = std::get_if<trace::AnnotationRecord>(&record);
  return a && a->key == "holder";
}

// The reader must not leak file descriptors, whatever it refuses.
std::size_t open_descriptors() {
  std::size_t n = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (::readdir(dir)) ++n;
    ::closedir(dir);
  }
  return n;
}

void check_descriptors() {
  static std::size_t baseline = 0;
  static std::uint64_t runs = 0;
  if (runs++ % 1024 != 0) return;
  std::size_t now = open_descriptors();
  if (baseline == 0) baseline = now;
  if (now > baseline + 16) fail("file descriptors leak: " + std::to_string(now - baseline));
}

// The in-memory file every input is written to, and the path that opens it.
struct MemoryFile {
  int fd = -1;
  std::string path;
};

const MemoryFile& replace_memory_file(const std::string& bytes) {
  static MemoryFile file = [] {
    MemoryFile made;
    made.fd = ::memfd_create("gpuleak-fuzz-trace", 0);
    if (made.fd < 0) fail("memfd_create failed");
    made.path = "/proc/self/fd/" + std::to_string(made.fd);
    return made;
  }();
  if (::ftruncate(file.fd, 0) != 0) fail("ftruncate failed");
  if (::pwrite(file.fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
    fail("pwrite failed");
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string file = size >= sizeof trace::kFileMagic &&
                             std::memcmp(data, trace::kFileMagic, sizeof trace::kFileMagic) == 0
                         ? std::string(reinterpret_cast<const char*>(data), size)
                         : wrap_payload(data, size);
  const std::string& path = replace_memory_file(file).path;

  analysis::AnalysisOptions options;
  // Small windows keep each input fast; every code path is still reached.
  options.growth.warmup_steps = 2;
  options.growth.min_steps = 8;
  options.growth.window_steps = 24;
  options.growth.min_increases = 4;
  analysis::ProcessAnalysis analysis(options);
  trace::EventSequencer sequencer(/*max_pending=*/256);
  std::uint64_t start_ns = 0;
  trace::Record record;
  auto consume_ready = [&] {
    while (sequencer.pop(record)) {
      fold_times(record, &start_ns);
      move_paths_nowhere(record);
      try {
        analysis.consume(record);
      } catch (const nlohmann::json::exception&) {
        if (!is_holder_annotation(record)) throw;
      }
    }
  };
  try {
    trace::TraceReader reader(path);
    while (reader.next(record) == trace::TraceReader::Status::kRecord) {
      sequencer.push(std::move(record));
      consume_ready();
    }
    if (reader.offset() != file.size()) fail("the reader stopped before the end without an error");
  } catch (const trace::TraceError& e) {
    if (e.offset() > file.size()) fail("TraceError offset past the end of the file");
    if (std::string(e.what()).rfind(path + ": ", 0) != 0) fail("TraceError does not name the file");
    analysis.set_trace_error(e.what(), e.offset());
  }
  sequencer.finish();
  consume_ready();
  analysis.detected_sites();
  analysis::ProcessReport report = analysis.build_report(path);
  if (report.leaks.allocations > report.allocations) fail("more leaked than allocated");
  check_descriptors();
  return 0;
}
