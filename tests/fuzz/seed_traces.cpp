#include "seed_traces.h"

#include <zstd.h>

#include <stdexcept>

#include "trace/codec.h"
#include "trace/file_layout.h"
#include "trace/trace_summary.h"

namespace gpuleak::fuzz {

using namespace gpuleak::trace;

std::string encode_payload(const std::vector<Record>& records) {
  std::string out;
  for (const Record& r : records) encode_record(r, out);
  return out;
}

namespace {

// One block as the writer makes it (trace_writer.cpp): header + zstd frame
// with checksum.
std::string encode_block(const std::string& payload, std::uint32_t record_count) {
  std::string frame(ZSTD_compressBound(payload.size()), '\0');
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  std::size_t n =
      ZSTD_compress2(context, frame.data(), frame.size(), payload.data(), payload.size());
  ZSTD_freeCCtx(context);
  if (ZSTD_isError(n)) throw std::runtime_error(ZSTD_getErrorName(n));
  frame.resize(n);
  BlockHeader header;
  header.compressed_bytes = static_cast<std::uint32_t>(n);
  header.raw_bytes = static_cast<std::uint32_t>(payload.size());
  header.record_count = record_count;
  std::uint8_t raw[kBlockHeaderBytes];
  encode_block_header(header, raw);
  return std::string(reinterpret_cast<char*>(raw), sizeof raw) + frame;
}

std::string file_header(std::uint32_t version = kUncompactedFormatVersion) {
  std::uint8_t raw[kFileHeaderBytes];
  encode_file_header(raw, version);
  return std::string(reinterpret_cast<char*>(raw), sizeof raw);
}

ProcessRecord process() {
  return ProcessRecord{
      4242,     1,      1700000000000000000ull, 1000000000, "/usr/bin/python3", "python3 train.py",
      "node-1", "0.1.0"};
}

std::vector<Record> every_record_kind() {
  std::vector<Record> r;
  r.push_back(process());
  r.push_back(ApiNameRecord{243, "cuMemAlloc_v2"});
  r.push_back(ThreadRecord{4243, "pt_autograd_0"});
  r.push_back(ModuleRecord{0x400000, 0x400000, 0x500000, "/nonexistent/train"});
  r.push_back(PythonCodeRecord{7, "train.py", "step", 40});
  r.push_back(StackRecord{3, {0x401000, 0x402000}, {{7, 42}}});
  r.push_back(SymbolRecord{0x401000, "leak(int)", "leak.cu", 17, "/nonexistent/train"});
  r.push_back(SourceLineRecord{"train.py", 42, "losses.append(loss)"});
  r.push_back(AllocRecord{0, 1000000010, 0x7f00deadbe00, 1 << 20, MemoryKind::kDeviceAsync, 598, 0,
                          0xabc, 4243, 3});
  r.push_back(FreeRecord{1, 1000000011, 0x7f00deadbe00, MemoryKind::kDeviceAsync, 600, 0, 4243});
  r.push_back(
      AllocFailedRecord{2, 1000000012, 1ull << 40, MemoryKind::kDevice, 243, 0, 2, 4243, 3});
  r.push_back(StepRecord{3, 1000000013, 1, StepSource::kOptimizerHook});
  r.push_back(SampleRecord{4, 1000000014, Metric::kPoolReservedBytes, 0, 123456789});
  r.push_back(AnnotationRecord{5, 1000000015, "allocator", "{\"mode\":\"cudaMallocAsync\"}"});
  r.push_back(ContextRecord{6, 1000000016, ContextAction::kPrimaryRetained, 0x5555, 0});
  r.push_back(ExitRecord{7, 1000000017});
  r.push_back(LostRecord{8, 1000000018, 12, {{20, 2}, {30, 10}}});
  return r;
}

// 60 optimizer steps; each leaks 64 KiB at one Python line, allocates and
// frees a temporary, and samples memory. Two threads: thread 2's events are
// written in a later block than thread 1's, out of seq order.
std::vector<Record> training_job(int steps) {
  std::vector<Record> definitions, thread1, thread2;
  definitions.push_back(process());
  definitions.push_back(ApiNameRecord{0x10001, "torch.caching_allocator.alloc"});
  definitions.push_back(ApiNameRecord{0x10002, "torch.caching_allocator.free_requested"});
  definitions.push_back(ThreadRecord{4242, "python3"});
  definitions.push_back(ThreadRecord{4250, "pt_worker"});
  definitions.push_back(PythonCodeRecord{1, "/work/train.py", "forward", 10});
  definitions.push_back(PythonCodeRecord{2, "/work/train.py", "<module>", 1});
  definitions.push_back(StackRecord{1, {}, {{1, 14}, {2, 30}}});
  definitions.push_back(StackRecord{2, {0x401234}, {{1, 12}, {2, 30}}});
  std::uint64_t seq = 0, t = 1000000000;
  std::vector<Record> events;
  events.push_back(AnnotationRecord{seq++, t, "torch_tracking", "{\"mode\":\"hook\"}"});
  // Every annotation the analysis reads, as the collector and the package
  // write them, for the fuzzer to give fields of other types.
  for (
      const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
          {"clock", R"({"clock": "tsc", "resolution_ns": 1, "monotonic_read_ns": 26.7})"},
          {"distributed", R"({"rank": 1, "local_rank": 1, "world_size": 2})"},
          {"capture_backend",
           R"({"name": "interposer", "reason": "preloaded", "interposer_loaded": true, )"
           R"("interposer_loaded_before_driver": true, "start_requests": 1, )"
           R"("reentrant_start_requests": 0})"},
          {"framework_tracking",
           R"({"framework": "JAX", "mode": "preallocated-pool", "hidden_allocations": true, )"
           R"("device_memory_holds_arrays": false, "how_to_see": "XLA_PYTHON_CLIENT_ALLOCATOR=platform"})"},
          {"process_role",
           R"({"dataloader_worker": {"id": 2, "num_workers": 4}, "multiprocessing": )"
           R"({"name": "SpawnPoolWorker-3", "parent_pid": 4200, "start_method": "spawn"}})"},
          {"first_cuda_use", R"({"stack_id": 1, "device": 0})"},
          {"iteration_clock", R"({"source": 3, "clock": 1, "description": "batches"})"},
          {"phase", R"({"name": "train", "event": "begin"})"}}) {
    events.push_back(AnnotationRecord{seq++, t, key, value});
  }
  events.push_back(SampleRecord{seq++, t, Metric::kDeviceTotalBytes, 0, 80ull << 30});
  for (int s = 0; s < steps; ++s) {
    t += 10000000;
    auto step = static_cast<std::uint64_t>(s);
    std::vector<Record>& mine = s % 3 == 2 ? thread2 : thread1;
    std::uint32_t tid = s % 3 == 2 ? 4250 : 4242;
    mine.push_back(AllocRecord{seq++, t, 0x10000000 + step * 0x10000, 65536,
                               MemoryKind::kTorchBlock, 0x10001, 0, 0, tid, 1});
    mine.push_back(AllocRecord{seq++, t + 1, 0x90000000, 1 << 20, MemoryKind::kTorchBlock, 0x10001,
                               0, 0, tid, 2});
    mine.push_back(FreeRecord{seq++, t + 2, 0x90000000, MemoryKind::kTorchBlock, 0x10002, 0, tid});
    mine.push_back(
        SampleRecord{seq++, t + 3, Metric::kDeviceUsedBytes, 0, (10ull << 30) + step * 65536});
    mine.push_back(SampleRecord{seq++, t + 3, Metric::kHostRssBytes, -1, 1ull << 30});
    mine.push_back(StepRecord{seq++, t + 4, step, StepSource::kOptimizerHook});
  }
  std::string holder =
      "{\"request_id\":1,\"sites\":[{\"site_id\":1,\"kind\":\"tensor\",\"fix\":\"store "
      "loss.item()\",\"holder\":{\"type\":\"list\",\"name\":\"losses\",\"owner\":\"module "
      "__main__\",\"bounded\":false}}]}";
  thread1.push_back(AnnotationRecord{seq++, t + 5, "holder", holder});
  thread1.push_back(
      AllocFailedRecord{seq++, t + 6, 1ull << 36, MemoryKind::kTorchBlock, 0x10001, 0, 2, 4242, 1});
  thread1.push_back(LostRecord{seq++, t + 7, 3, {}});
  thread1.push_back(ExitRecord{seq++, t + 8});
  std::vector<Record> all = definitions;
  all.insert(all.end(), events.begin(), events.end());
  all.insert(all.end(), thread1.begin(), thread1.end());
  all.insert(all.end(), thread2.begin(), thread2.end());
  return all;
}

// Driver allocations without steps: time windows; VMM, pinned, arrays,
// contexts, and a free of something never allocated.
std::vector<Record> driver_job_without_steps() {
  std::vector<Record> r;
  r.push_back(process());
  r.push_back(ApiNameRecord{243, "cuMemAlloc_v2"});
  r.push_back(ModuleRecord{0x7f0000000000, 0x7f0000000000, 0x7f0000100000,
                           "/nonexistent/libtorch_cuda.so"});
  r.push_back(
      ModuleRecord{0x7f1000000000, 0x7f1000000000, 0x7f1000100000, "/nonexistent/libc10_cuda.so"});
  r.push_back(StackRecord{1, {0x7f0000001234, 0x401000}, {}});
  r.push_back(StackRecord{2, {0x7f1000001234}, {}});
  std::uint64_t seq = 0, t = 1000000000;
  r.push_back(ContextRecord{seq++, t, ContextAction::kCreated, 0x77, 0});
  const MemoryKind kinds[] = {MemoryKind::kDevice,       MemoryKind::kHostPinned,
                              MemoryKind::kVmmPhysical,  MemoryKind::kVmmMapping,
                              MemoryKind::kAddressRange, MemoryKind::kArray,
                              MemoryKind::kManaged,      MemoryKind::kDeviceAsync};
  for (int i = 0; i < 24; ++i) {
    t += 300000000;  // 0.3 s: several events per 1 s window
    auto k = kinds[i % 8];
    r.push_back(AllocRecord{seq++, t, 0x7e0000000000ull + static_cast<std::uint64_t>(i) * 0x100000,
                            1 << 20, k, 243, 0, 0, 4242, static_cast<std::uint32_t>(1 + i % 2)});
  }
  r.push_back(FreeRecord{seq++, t + 1, 0x1234, MemoryKind::kDevice, 244, 0, 4242});
  r.push_back(FreeRecord{seq++, t + 2, 0, MemoryKind::kDevice, 244, 0, 4242});
  r.push_back(ContextRecord{seq++, t + 3, ContextAction::kDestroyed, 0x77, 0});
  return r;
}

std::vector<Record> with_symbols() {
  std::vector<Record> r;
  r.push_back(process());
  r.push_back(StackRecord{1, {0x401000, 0x402000, 0x403000}, {}});
  r.push_back(SymbolRecord{0x400fff, "leak_buffers()", "/work/leak.cu", 17, "/work/leak"});
  r.push_back(SymbolRecord{0x401fff, "main", "/work/leak.cu", 40, "/work/leak"});
  r.push_back(SourceLineRecord{"/work/leak.cu", 17, "cudaMalloc(&p, 4096);"});
  r.push_back(AllocRecord{0, 1000000100, 0x7000, 4096, MemoryKind::kDevice, 243, 0, 0, 1, 1});
  r.push_back(AllocRecord{1, 1000000200, 0x8000, 4096, MemoryKind::kDevice, 243, 0, 0, 1, 1});
  return r;
}

}  // namespace

std::string encode_trace_file(const std::vector<Record>& records, std::size_t per_block) {
  std::string out = file_header();
  std::vector<Record> block;
  for (const Record& r : records) {
    block.push_back(r);
    if (block.size() == per_block) {
      out += encode_block(encode_payload(block), static_cast<std::uint32_t>(block.size()));
      block.clear();
    }
  }
  if (!block.empty())
    out += encode_block(encode_payload(block), static_cast<std::uint32_t>(block.size()));
  return out;
}

// The training job compacted half way, as the bounded writer leaves it: the
// summary of the first half (trace_summary.h), then the second half raw.
std::string compacted_training_job_payload(std::uint32_t* count) {
  std::vector<Record> job = training_job(120);
  std::size_t half = job.size() / 2;
  TraceSummary summary;
  for (std::size_t i = 0; i < half; ++i) summary.observe(job[i]);
  std::string payload;
  *count = 0;
  summary.encode(
      [&](std::string_view block, std::uint32_t records) {
        payload.append(block);
        *count += records;
        return true;
      },
      16u << 20);
  std::vector<Record> rest(job.begin() + static_cast<std::ptrdiff_t>(half), job.end());
  payload += encode_payload(rest);
  *count += static_cast<std::uint32_t>(rest.size());
  return payload;
}

std::vector<Seed> seeds() {
  std::vector<Seed> out;
  // Whole files: the reader's framing, headers and checksums.
  out.push_back({"file-every-record-kind", encode_trace_file(every_record_kind(), 3)});
  out.push_back({"file-training-job", encode_trace_file(training_job(60), 50)});
  out.push_back({"file-driver-job", encode_trace_file(driver_job_without_steps(), 7)});
  out.push_back({"file-header-only", encode_trace_file({}, 1)});
  std::uint32_t compacted_count = 0;
  std::string compacted = compacted_training_job_payload(&compacted_count);
  out.push_back({"file-compacted-training-job",
                 file_header(kFormatVersion) + encode_block(compacted, compacted_count)});
  out.push_back({"payload-compacted-training-job", compacted});
  std::string truncated = encode_trace_file(every_record_kind(), 4);
  truncated.resize(truncated.size() - 5);
  out.push_back({"file-truncated", truncated});
  // Bare payloads: the target wraps them into blocks, so mutations reach
  // the record decoder, the sequencer and the analysis past the checksums.
  out.push_back({"payload-every-record-kind", encode_payload(every_record_kind())});
  out.push_back({"payload-training-job", encode_payload(training_job(50))});
  out.push_back({"payload-driver-job", encode_payload(driver_job_without_steps())});
  out.push_back({"payload-symbols", encode_payload(with_symbols())});
  std::string unknown = encode_payload({process()});
  unknown += std::string("\xC8\x03xyz", 5);  // type 200, 3-byte body
  unknown += encode_payload({StepRecord{0, 1000000001, 1, StepSource::kExplicit}});
  out.push_back({"payload-unknown-type", unknown});
  return out;
}

}  // namespace gpuleak::fuzz
