// craft_trace CASE.json OUT_DIR: writes the trace files a crafted-trace case
// describes (tests/cli/crafted_traces/README.md), with the project's own
// record encoder, so a case can hold any record, any bytes, blocks in any
// order, blocks of another file (a splice), or a header alone.
//
// Files with "special" are made by the test runner (a FIFO, a sparse file),
// not here.
#include <zstd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace/codec.h"
#include "trace/file_layout.h"
#include "trace/records.h"

namespace {

using nlohmann::json;
using namespace gpuleak::trace;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

std::string bytes_from_hex(const std::string& hex) {
  if (hex.size() % 2) fail("odd hex length: " + hex);
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string text(const json& record, const char* key) {
  const json& v = record.at(key);
  if (v.is_object()) return bytes_from_hex(v.at("hex").get<std::string>());
  return v.get<std::string>();
}

std::uint64_t u64(const json& record, const char* key, std::uint64_t fallback = 0) {
  return record.contains(key) ? record.at(key).get<std::uint64_t>() : fallback;
}

std::int32_t i32(const json& record, const char* key, std::int32_t fallback = -1) {
  return record.contains(key) ? record.at(key).get<std::int32_t>() : fallback;
}

MemoryKind kind_of(const json& record) {
  const json& v = record.at("kind");
  if (v.is_number()) return static_cast<MemoryKind>(v.get<int>());
  for (int k = 1; k <= 9; ++k) {
    if (v.get<std::string>() == memory_kind_name(static_cast<MemoryKind>(k)))
      return static_cast<MemoryKind>(k);
  }
  fail("unknown memory kind " + v.dump());
}

Record to_record(const json& r) {
  std::string type = r.at("type").get<std::string>();
  if (type == "process") {
    return ProcessRecord{static_cast<std::uint32_t>(u64(r, "pid")),
                         static_cast<std::uint32_t>(u64(r, "parent_pid")),
                         u64(r, "start_unix_ns"),
                         u64(r, "start_monotonic_ns"),
                         text(r, "executable"),
                         text(r, "command_line"),
                         text(r, "hostname"),
                         text(r, "collector_version")};
  }
  if (type == "api_name")
    return ApiNameRecord{static_cast<std::uint32_t>(u64(r, "api")), text(r, "name")};
  if (type == "thread")
    return ThreadRecord{static_cast<std::uint32_t>(u64(r, "thread_id")), text(r, "name")};
  if (type == "module")
    return ModuleRecord{u64(r, "load_bias"), u64(r, "low"), u64(r, "high"), text(r, "path")};
  if (type == "python_code") {
    return PythonCodeRecord{static_cast<std::uint32_t>(u64(r, "code_id")), text(r, "filename"),
                            text(r, "function"), static_cast<std::uint32_t>(u64(r, "first_line"))};
  }
  if (type == "stack") {
    StackRecord s;
    s.stack_id = static_cast<std::uint32_t>(u64(r, "stack_id"));
    for (const json& a : r.at("native")) s.native.push_back(a.get<std::uint64_t>());
    for (const json& p : r.at("python")) {
      s.python.push_back(
          PythonFrame{p.at("code_id").get<std::uint32_t>(), p.at("line").get<std::uint32_t>()});
    }
    return s;
  }
  if (type == "symbol") {
    return SymbolRecord{u64(r, "address"), text(r, "function"),
                        text(r, "file"),   static_cast<std::uint32_t>(u64(r, "line")),
                        text(r, "module"), {}};
  }
  if (type == "source_line") {
    return SourceLineRecord{text(r, "file"), static_cast<std::uint32_t>(u64(r, "line")),
                            text(r, "text")};
  }
  if (type == "alloc") {
    return AllocRecord{u64(r, "seq"),
                       u64(r, "time_ns"),
                       u64(r, "address"),
                       u64(r, "size"),
                       kind_of(r),
                       static_cast<std::uint32_t>(u64(r, "api")),
                       i32(r, "device"),
                       u64(r, "stream"),
                       static_cast<std::uint32_t>(u64(r, "thread_id")),
                       static_cast<std::uint32_t>(u64(r, "stack_id"))};
  }
  if (type == "free") {
    return FreeRecord{u64(r, "seq"),
                      u64(r, "time_ns"),
                      u64(r, "address"),
                      kind_of(r),
                      static_cast<std::uint32_t>(u64(r, "api")),
                      i32(r, "device"),
                      static_cast<std::uint32_t>(u64(r, "thread_id"))};
  }
  if (type == "step") {
    return StepRecord{u64(r, "seq"), u64(r, "time_ns"), u64(r, "step"),
                      static_cast<StepSource>(u64(r, "source", 2))};
  }
  if (type == "sample") {
    return SampleRecord{u64(r, "seq"), u64(r, "time_ns"), static_cast<Metric>(u64(r, "metric")),
                        i32(r, "device"), u64(r, "value")};
  }
  if (type == "annotation")
    return AnnotationRecord{u64(r, "seq"), u64(r, "time_ns"), text(r, "key"), text(r, "value")};
  if (type == "exit") return ExitRecord{u64(r, "seq"), u64(r, "time_ns")};
  if (type == "lost") {
    LostRecord lost{u64(r, "seq"), u64(r, "time_ns"), u64(r, "events"), {}};
    if (r.contains("ranges")) {
      for (const json& range : r.at("ranges"))
        lost.ranges.push_back(SeqRange{range.at("first_seq").get<std::uint64_t>(),
                                       range.at("count").get<std::uint64_t>()});
    }
    return lost;
  }
  fail("unknown record type " + type);
}

// One record's bytes; "omit_tail" writes a LostRecord as collectors before
// ranges did (the body ends after `events`).
void encode(const json& spec, std::string& out, std::uint32_t& count) {
  std::string one;
  encode_record(to_record(spec), one);
  if (spec.value("omit_tail", false)) {
    std::string body = one.substr(2);  // type byte, one-byte length: small bodies only
    if (static_cast<unsigned char>(one[1]) >= 0x80 || body.empty() || body.back() != 0)
      fail("omit_tail needs a small record whose last field is empty");
    body.pop_back();
    one = std::string(1, one[0]) + static_cast<char>(body.size()) + body;
  }
  out += one;
  ++count;
}

void add_records(const json& spec, std::string& out, std::uint32_t& count) {
  if (!spec.contains("repeat")) {
    encode(spec, out, count);
    return;
  }
  std::uint64_t n = spec.at("repeat").get<std::uint64_t>();
  json record = spec.at("record");
  const json increment = spec.value("increment", json::object());
  for (std::uint64_t i = 0; i < n; ++i) {
    json one = record;
    for (auto it = increment.begin(); it != increment.end(); ++it)
      one[it.key()] =
          record.at(it.key()).get<std::uint64_t>() + i * it.value().get<std::uint64_t>();
    encode(one, out, count);
  }
}

std::string block_bytes(const json& block) {
  std::string payload;
  std::uint32_t count = 0;
  for (const json& spec : block) add_records(spec, payload, count);
  std::string frame(ZSTD_compressBound(payload.size()), '\0');
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  std::size_t n =
      ZSTD_compress2(context, frame.data(), frame.size(), payload.data(), payload.size());
  ZSTD_freeCCtx(context);
  if (ZSTD_isError(n)) fail(std::string("zstd: ") + ZSTD_getErrorName(n));
  BlockHeader header;
  header.compressed_bytes = static_cast<std::uint32_t>(n);
  header.raw_bytes = static_cast<std::uint32_t>(payload.size());
  header.record_count = count;
  std::uint8_t raw[kBlockHeaderBytes];
  encode_block_header(header, raw);
  return std::string(reinterpret_cast<char*>(raw), sizeof raw) + frame.substr(0, n);
}

struct Crafter {
  const json& files;
  std::map<std::string, std::vector<std::string>> blocks;  // encoded, by file name

  const std::vector<std::string>& blocks_of(const std::string& name) {
    auto it = blocks.find(name);
    if (it != blocks.end()) return it->second;
    std::vector<std::string> encoded;
    for (const json& block : files.at(name).at("blocks")) encoded.push_back(block_bytes(block));
    return blocks.emplace(name, std::move(encoded)).first->second;
  }

  std::string file_bytes(const std::string& name) {
    const json& spec = files.at(name);
    if (spec.contains("bytes_hex")) return bytes_from_hex(spec.at("bytes_hex").get<std::string>());
    json layout = spec.value("layout", json());
    if (layout.is_null()) {
      layout = json::array({"header"});
      for (std::size_t i = 0; i < spec.at("blocks").size(); ++i) layout.push_back(i);
    }
    std::string out;
    for (const json& part : layout) {
      if (part.is_string() && part.get<std::string>() == "header") {
        std::uint8_t header[kFileHeaderBytes];
        encode_file_header(header);
        out.append(reinterpret_cast<char*>(header), sizeof header);
      } else if (part.is_number()) {
        out += blocks_of(name).at(part.get<std::size_t>());
      } else {
        out +=
            blocks_of(part.at("file").get<std::string>()).at(part.at("block").get<std::size_t>());
      }
    }
    return out;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: craft_trace CASE.json OUT_DIR\n");
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    json spec = json::parse(in);
    Crafter crafter{spec.at("files"), {}};
    for (auto it = spec.at("files").begin(); it != spec.at("files").end(); ++it) {
      if (it.value().contains("special")) continue;
      std::string bytes = crafter.file_bytes(it.key());
      std::ofstream out(std::string(argv[2]) + "/" + it.key(), std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!out) fail("cannot write " + it.key());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "craft_trace: %s\n", e.what());
    return 1;
  }
  return 0;
}
