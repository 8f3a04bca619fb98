#include "trace/trace_test_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "trace/codec.h"
#include "trace/trace_reader.h"
#include "trace/trace_writer.h"

namespace gpuleak::trace::testing {

std::vector<Record> one_of_each_record() {
  std::vector<Record> r;
  r.push_back(ProcessRecord{4242, 1, 1700000000123456789ull, 987654321, "/usr/bin/train",
                            "train --epochs 3", "node-7", "0.1.0"});
  r.push_back(ApiNameRecord{243, "cuMemAlloc_v2"});
  r.push_back(ThreadRecord{4243, "pt_autograd_0"});
  r.push_back(ModuleRecord{0x7f0000000000, 0x7f0000001000, 0x7f0000090000, "/lib/libx.so"});
  r.push_back(PythonCodeRecord{7, "train.py", "step", 40});
  r.push_back(StackRecord{3, {0x401000, 0x7fffffffffff, 1}, {{7, 42}, {8, 100000}}});
  r.push_back(SymbolRecord{0x401000, "leak(int)", "leak.cu", 17, "/bin/leak", {}});
  r.push_back(SourceLineRecord{"train.py", 42, "losses.append(loss)"});
  r.push_back(CompactionRecord{1000, 20, 900, 2, 5000, 7, 400, 390, 50, 4, 64ull << 20, 1 << 30});
  r.push_back(StepSummaryRecord{30, 48, StepSource::kDataLoader, 2, 1 << 20, 17});
  r.push_back(AllocRecord{9, 10, 0x7f00deadbe00, 1 << 20, MemoryKind::kDeviceAsync, 598, 3, 0xabc,
                          4243, 3});
  r.push_back(FreeRecord{1, 11, 0x7f00deadbe00, MemoryKind::kDeviceAsync, 600, 3, 4243});
  r.push_back(AllocFailedRecord{2, 12, 1ull << 40, MemoryKind::kManaged, 243, -7, 2, 4242, 3});
  r.push_back(StepRecord{3, 13, 99, StepSource::kOptimizerHook});
  r.push_back(SampleRecord{4, 14, Metric::kPoolReservedBytes, 0, 123456789});
  r.push_back(AnnotationRecord{5, 15, "allocator", "{\"mode\":\"cudaMallocAsync\"}"});
  r.push_back(ContextRecord{6, 16, ContextAction::kPrimaryRetained, 0x5555, 1});
  r.push_back(ExitRecord{7, 17});
  r.push_back(LostRecord{8, 18, 12, {{100, 3}, {200, 9}}});
  return r;
}

void write_trace(const std::string& path, const std::vector<Record>& records,
                 std::size_t per_block) {
  std::string error;
  auto writer = TraceWriter::create(path, &error);
  ASSERT_TRUE(writer) << error;
  std::string block;
  std::uint32_t count = 0;
  for (const Record& record : records) {
    encode_record(record, block);
    if (++count == per_block) {
      ASSERT_TRUE(writer->write_block(block, count, &error)) << error;
      block.clear();
      count = 0;
    }
  }
  ASSERT_TRUE(writer->write_block(block, count, &error)) << error;
}

std::vector<Record> read_all(const std::string& path) {
  TraceReader reader(path);
  std::vector<Record> out;
  Record record;
  while (reader.next(record) == TraceReader::Status::kRecord) out.push_back(record);
  return out;
}

std::vector<std::uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

}  // namespace gpuleak::trace::testing
