// What a trace's records cost on disk, by record type: how many there are,
// their encoded bytes each, and their bytes each after zstd level 1 (the
// writer's level) when each type's records are compressed apart, plus the
// whole file's bytes per event. The figures docs/trace-format.md gives for
// a day-long job come from this (bench/baselines/cpu/trace-cost.json).
//
// usage: trace_cost TRACE...
#include <zstd.h>

#include <cstdio>
#include <map>
#include <string>

#include "trace/codec.h"
#include "trace/trace_reader.h"

using namespace gpuleak;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: trace_cost TRACE...\n");
    return 2;
  }
  std::printf("[\n");
  for (int i = 1; i < argc; ++i) {
    std::map<std::size_t, std::pair<std::uint64_t, std::string>> by_type;  // index -> count, bytes
    std::uint64_t events = 0, file_bytes = 0;
    try {
      trace::TraceReader reader(argv[i]);
      trace::Record record;
      while (reader.next(record) == trace::TraceReader::Status::kRecord) {
        auto& entry = by_type[record.index()];
        ++entry.first;
        trace::encode_record(record, entry.second);
        std::uint64_t seq = 0;
        if (trace::record_seq(record, &seq)) ++events;
      }
      file_bytes = reader.file_bytes();
    } catch (const trace::TraceError& e) {
      std::fprintf(stderr, "trace_cost: %s\n", e.what());
      return 1;
    }
    std::printf(
        "  {\"trace\": \"%s\", \"file_bytes\": %llu, \"events\": %llu, "
        "\"file_bytes_per_event\": %.2f, \"types\": {",
        argv[i], static_cast<unsigned long long>(file_bytes),
        static_cast<unsigned long long>(events),
        events ? static_cast<double>(file_bytes) / static_cast<double>(events) : 0.0);
    bool first = true;
    for (const auto& [index, entry] : by_type) {
      const std::string& bytes = entry.second;
      std::string packed(ZSTD_compressBound(bytes.size()), '\0');
      std::size_t n = ZSTD_compress(packed.data(), packed.size(), bytes.data(), bytes.size(), 1);
      if (ZSTD_isError(n)) n = bytes.size();
      // The type's tag is the first byte of each encoded record.
      int type = static_cast<unsigned char>(bytes[0]);
      std::printf(
          "%s\"%d\": {\"records\": %llu, \"encoded_bytes_each\": %.1f, "
          "\"compressed_bytes_each\": %.2f}",
          first ? "" : ", ", type, static_cast<unsigned long long>(entry.first),
          static_cast<double>(bytes.size()) / static_cast<double>(entry.first),
          static_cast<double>(n) / static_cast<double>(entry.first));
      first = false;
    }
    std::printf("}}%s\n", i + 1 < argc ? "," : "");
  }
  std::printf("]\n");
  return 0;
}
