// The gpuleak trace format: every record type, its fields and its encoding.
//
// This header owns the format. The writer (trace_writer.h), the reader
// (trace_reader.h) and docs/trace-format.md follow it; a change to any record
// layout bumps kFormatVersion.
//
// File layout
//   FileHeader (32 bytes, little-endian)
//   Block*     each: BlockHeader (16 bytes) + one zstd frame (with checksum)
//
// A block is the unit of flushing: the collector writes whole blocks with one
// write() call, so a process killed with SIGKILL leaves a file that ends at a
// block boundary and is readable up to its last flush.
//
// Inside a block's decompressed payload, records follow each other as
//   u8 type | varint body_bytes | body
// so a reader can skip record types it does not know. Bodies are sequences of
// LEB128 varints (signed values zig-zag encoded) and strings (varint length +
// UTF-8 bytes).
//
// Events (allocations, frees, steps, samples, ...) carry a per-process
// sequence number `seq`, dense from 0. Threads fill their own buffers, so
// the file order of events from different threads is not their real order;
// readers restore it with EventSequencer (event_sequencer.h). Definitions
// (stacks, code objects, modules, symbols) carry no seq: they are table
// entries, and users resolve ids lazily.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "gpuleak/vocabulary.h"

namespace gpuleak::trace {

inline constexpr char kFileMagic[8] = {'G', 'P', 'U', 'L', 'E', 'A', 'K', 'T'};
// The newest format this gpuleak reads and writes: version 2 is version 1
// plus the compaction summary (CompactionRecord, StepSummaryRecord, and the
// events it keeps out of sequence order). A trace that was never compacted
// is still written as version 1, so gpuleak releases from before compaction
// read it; a compacted one is version 2, which they refuse with a clear
// message instead of taking its summary for damage.
inline constexpr std::uint32_t kFormatVersion = 2;
inline constexpr std::uint32_t kUncompactedFormatVersion = 1;
inline constexpr std::uint32_t kOldestFormatVersion = 1;
inline constexpr std::uint32_t kFileHeaderBytes = 32;
inline constexpr std::uint32_t kBlockMagic = 0x4b424c47;  // "GLBK" little-endian
inline constexpr std::uint32_t kBlockHeaderBytes = 16;
// Upper bound a reader accepts for one block; larger sizes mean corruption.
inline constexpr std::uint32_t kMaxBlockBytes = 64u << 20;

// What kind of memory an allocation is. Stored as u8; values are stable.
enum class MemoryKind : std::uint8_t {
  kDevice = 1,        // cuMemAlloc, cuMemAllocPitch
  kDeviceAsync = 2,   // cuMemAllocAsync, cuMemAllocFromPoolAsync (stream-ordered)
  kManaged = 3,       // cuMemAllocManaged
  kHostPinned = 4,    // cuMemAllocHost, cuMemHostAlloc (page-locked host memory)
  kVmmPhysical = 5,   // cuMemCreate handle (physical memory, until cuMemRelease)
  kVmmMapping = 6,    // cuMemMap of a handle into a reserved range
  kAddressRange = 7,  // cuMemAddressReserve (virtual address space only)
  kArray = 8,         // cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate
  kTorchBlock = 9,    // a tensor block handed out by PyTorch's caching allocator
  // cuGraphInstantiate*: an executable graph. Its device memory is the
  // driver's own (no allocation call of the program's), so its size is an
  // estimate from the graph's node count (collector/graph_exec_size.h).
  kGraphExec = 10,
};

// Tensor-level memory (a PyTorch tensor, or one driver call per tensor
// under the cudaMallocAsync backend) versus memory the driver hands out.
bool is_tensor_kind(MemoryKind kind);
// Memory that occupies the GPU (not host-pinned, not address space only).
bool occupies_device(MemoryKind kind);
// The address space an allocation's address lives in: 0 for the unified
// addressing of pointers (device, async, managed, pinned host), one space
// each for physical handles, mappings, reserved ranges, arrays and
// framework blocks. An address names an allocation within its space.
std::uint8_t address_space(MemoryKind kind);

// Where a step boundary came from. Stored as u8.
enum class StepSource : std::uint8_t {
  kOptimizerHook = GPULEAK_STEP_FROM_OPTIMIZER_HOOK,  // torch.optim global step post-hook
  kExplicit = GPULEAK_STEP_FROM_EXPLICIT,             // gpuleak.step() called by the program
  kTimeWindow = GPULEAK_STEP_FROM_TIME_WINDOW,        // fallback: fixed time windows
  kDataLoader = GPULEAK_STEP_FROM_DATALOADER,  // a torch DataLoader iterator handed out a batch
  // Found by the analysis in the allocation stream itself (a loop body that
  // repeats); never written into a trace.
  kAllocationPeriod = GPULEAK_STEP_FROM_ALLOCATION_PERIOD,
  // A pass of the loop of the program's main script that the Python
  // package follows (sys.monitoring back-edges, Python 3.12+).
  kPythonLoop = GPULEAK_STEP_FROM_PYTHON_LOOP,
};

// What a sample measures. Stored as u8; values are stable. The ids are
// include/gpuleak/vocabulary.h's, which the Python package shares.
enum class Metric : std::uint8_t {
  kHostRssBytes = GPULEAK_METRIC_HOST_RSS_BYTES,  // the process's resident set size
  kDeviceUsedBytes =
      GPULEAK_METRIC_DEVICE_USED_BYTES,  // device memory in use (cuMemGetInfo / NVML)
  kDeviceTotalBytes = GPULEAK_METRIC_DEVICE_TOTAL_BYTES,  // device memory capacity
  // stream-ordered pool: reserved (cudaMemPoolAttrReservedMemCurrent)
  kPoolReservedBytes = GPULEAK_METRIC_POOL_RESERVED_BYTES,
  kPoolUsedBytes = GPULEAK_METRIC_POOL_USED_BYTES,  // stream-ordered pool: used (...UsedMemCurrent)
  kTorchAllocatedBytes = GPULEAK_METRIC_TORCH_ALLOCATED_BYTES,  // torch.cuda.memory_allocated()
  kTorchReservedBytes = GPULEAK_METRIC_TORCH_RESERVED_BYTES,    // torch.cuda.memory_reserved()
};

enum class ContextAction : std::uint8_t {
  kCreated = 1,
  kDestroyed = 2,
  kPrimaryRetained = 3,
  kPrimaryReleased = 4,
};

// Record type tags (u8). Values are stable across versions.
enum class RecordType : std::uint8_t {
  kProcess = 1,
  kApiName = 2,
  kThread = 3,
  kModule = 4,
  kPythonCode = 5,
  kStack = 6,
  kSymbol = 7,
  kSourceLine = 8,
  kCompaction = 9,
  kStepSummary = 10,
  kAlloc = 16,
  kFree = 17,
  kAllocFailed = 18,
  kStep = 19,
  kSample = 20,
  kAnnotation = 21,
  kContext = 22,
  kExit = 23,
  kLost = 24,
};

// ---- Definitions (no seq) -------------------------------------------------

// First record of every trace.
struct ProcessRecord {
  std::uint32_t pid = 0;
  std::uint32_t parent_pid = 0;
  std::uint64_t start_unix_ns = 0;       // wall clock at collector start
  std::uint64_t start_monotonic_ns = 0;  // CLOCK_MONOTONIC at the same moment
  std::string executable;                // /proc/self/exe
  std::string command_line;              // argv joined by spaces
  std::string hostname;
  std::string collector_version;
  bool operator==(const ProcessRecord&) const = default;
};

// Names the `api` ids used by events (e.g. 243 -> "cuMemAlloc_v2").
struct ApiNameRecord {
  std::uint32_t api = 0;
  std::string name;
  bool operator==(const ApiNameRecord&) const = default;
};

struct ThreadRecord {
  std::uint32_t thread_id = 0;  // Linux tid
  std::string name;
  bool operator==(const ThreadRecord&) const = default;
};

// A loaded ELF object, for offline symbolization.
struct ModuleRecord {
  std::uint64_t load_bias = 0;  // dlpi_addr: added to the file's virtual addresses
  std::uint64_t low = 0;        // lowest mapped address of its PT_LOAD segments
  std::uint64_t high = 0;       // one past the highest
  std::string path;
  bool operator==(const ModuleRecord&) const = default;
};

// A Python code object (function), referenced by stacks.
struct PythonCodeRecord {
  std::uint32_t code_id = 0;
  std::string filename;
  std::string function;
  std::uint32_t first_line = 0;
  bool operator==(const PythonCodeRecord&) const = default;
};

struct PythonFrame {
  std::uint32_t code_id = 0;
  std::uint32_t line = 0;
  bool operator==(const PythonFrame&) const = default;
};

// A deduplicated call stack: native return addresses (innermost first) and,
// when the allocating thread held the GIL, Python frames (innermost first).
struct StackRecord {
  std::uint32_t stack_id = 0;
  std::vector<std::uint64_t> native;
  std::vector<PythonFrame> python;
  bool operator==(const StackRecord&) const = default;
};

// The symbol of one native address, added after the run (see `gpuleak run`),
// so a trace can be reported on a machine that lacks the binaries.
// A function that code at a symbolized address was inlined into, and the
// line of the inlined call in it.
struct InlinedCaller {
  std::string function;  // demangled
  std::string file;
  std::uint32_t line = 0;
  bool operator==(const InlinedCaller&) const = default;
};

struct SymbolRecord {
  std::uint64_t address = 0;
  std::string function;  // demangled; the innermost (inlined) function
  std::string file;
  std::uint32_t line = 0;
  std::string module;
  // When `function` was inlined: the functions it was inlined into,
  // innermost first; the last is the one the address lies in. Appended in
  // format 1.1: traces written before it have none.
  std::vector<InlinedCaller> inlined_into;
  bool operator==(const SymbolRecord&) const = default;
};

// The text of one source line, read right after the run on the machine that
// ran the program (see `gpuleak run`), for the frames reports blame. Reports
// show source text only from these records (or from a checkout the user
// names), never from files a trace names.
struct SourceLineRecord {
  std::string file;  // as frames name it (a Python co_filename or a DWARF path)
  std::uint32_t line = 0;
  std::string text;  // the line, trimmed, at most kMaxSourceLineBytes
  bool operator==(const SourceLineRecord&) const = default;
};
inline constexpr std::size_t kMaxSourceLineBytes = 160;

// ---- The compaction summary (format version 2) ----------------------------
//
// A job that runs for days would fill any disk, so the collector bounds its
// trace (docs/trace-format.md, "Compaction"): when the file passes half its
// bound, it is rewritten as a summary of everything so far followed by the
// raw events from there on. The summary is, in this order: the
// ProcessRecord, every definition, one CompactionRecord, the
// StepSummaryRecords, then the events it keeps, with their own sequence
// numbers (all below `through_seq`, in increasing order): the allocations
// still live at that point, every annotation, context change and failed
// allocation, and the latest sample of each metric and device. Every other
// event below `through_seq` was dropped: readers treat those numbers as
// summarized, neither lost nor missing.
struct CompactionRecord {
  std::uint64_t through_seq = 0;      // events below this number are summarized
  std::uint64_t first_time_ns = 0;    // time of the first event summarized
  std::uint64_t through_time_ns = 0;  // time of the last event summarized
  std::uint64_t compactions = 0;      // how many times the trace was compacted
  std::uint64_t dropped_events = 0;   // raw events dropped, all compactions together
  std::uint64_t lost_events = 0;      // events the collector lost before through_seq
  std::uint64_t allocations = 0;      // allocations summarized (live and freed)
  std::uint64_t frees = 0;            // frees summarized
  std::uint64_t steps = 0;            // step marks summarized
  std::uint64_t step_resolution = 0;  // a StepSummaryRecord is kept every this many steps
  std::uint64_t bound_bytes = 0;      // the bound the collector kept the file under
  std::uint64_t peak_live_bytes = 0;  // most bytes live at once before through_seq
  bool operator==(const CompactionRecord&) const = default;
};

// One step mark of the summarized span, kept at the resolution the
// CompactionRecord states, with what was live at it.
struct StepSummaryRecord {
  std::uint64_t time_ns = 0;
  std::uint64_t step = 0;
  StepSource source = StepSource::kExplicit;
  std::uint32_t clock = 0;
  std::uint64_t live_bytes = 0;  // every kind of memory together
  std::uint64_t live_allocations = 0;
  bool operator==(const StepSummaryRecord&) const = default;
};

// ---- Events (seq) ---------------------------------------------------------

struct AllocRecord {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  std::uint64_t address = 0;  // device pointer, host pointer or VMM handle
  std::uint64_t size = 0;     // bytes
  MemoryKind kind = MemoryKind::kDevice;
  std::uint32_t api = 0;
  std::int32_t device = -1;  // CUDA device ordinal, -1 if unknown
  std::uint64_t stream = 0;  // CUstream for stream-ordered allocations
  std::uint32_t thread_id = 0;
  std::uint32_t stack_id = 0;  // 0: no stack captured
  bool operator==(const AllocRecord&) const = default;
};

struct FreeRecord {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  std::uint64_t address = 0;
  MemoryKind kind = MemoryKind::kDevice;
  std::uint32_t api = 0;
  std::int32_t device = -1;
  std::uint32_t thread_id = 0;
  bool operator==(const FreeRecord&) const = default;
};

// An allocation call that failed (typically CUDA_ERROR_OUT_OF_MEMORY). The
// live set at that moment is everything allocated and not freed before it.
struct AllocFailedRecord {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  std::uint64_t size = 0;
  MemoryKind kind = MemoryKind::kDevice;
  std::uint32_t api = 0;
  std::int32_t device = -1;
  std::uint32_t result = 0;  // CUresult
  std::uint32_t thread_id = 0;
  std::uint32_t stack_id = 0;
  bool operator==(const AllocFailedRecord&) const = default;
};

struct StepRecord {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  std::uint64_t step = 0;
  StepSource source = StepSource::kExplicit;
  // Which clock of that source marked the step: two DataLoaders are two clocks (a
  // `clock` annotation may describe it). Appended in format 1.2: 0 in
  // traces written before it, and for sources with one clock.
  std::uint32_t clock = 0;
  bool operator==(const StepRecord&) const = default;
};

struct SampleRecord {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  Metric metric = Metric::kHostRssBytes;
  std::int32_t device = -1;
  std::uint64_t value = 0;
  bool operator==(const SampleRecord&) const = default;
};

// Free-form facts from the process: the allocator mode in effect, a holder
// found by the Python package, ... `value` is usually JSON.
struct AnnotationRecord {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  std::string key;
  std::string value;
  bool operator==(const AnnotationRecord&) const = default;
};

struct ContextRecord {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  ContextAction action = ContextAction::kCreated;
  std::uint64_t context = 0;
  std::int32_t device = -1;
  bool operator==(const ContextRecord&) const = default;
};

// The process began to exit (atexit). Events may still follow (frees in
// static destructors); the trace's end is the end of the process.
struct ExitRecord {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  bool operator==(const ExitRecord&) const = default;
};

// Sequence numbers [first_seq, first_seq + count).
struct SeqRange {
  std::uint64_t first_seq = 0;
  std::uint64_t count = 0;
  bool operator==(const SeqRange&) const = default;
};

// The collector had to drop events (it never blocks the program).
struct LostRecord {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  std::uint64_t events = 0;  // records dropped since the last flush, definitions included
  // The sequence numbers of the dropped events, so readers do not wait for
  // them. Appended in format 1.2: traces written before it have none (then
  // only `events` says how many numbers will never come). A range may also
  // cover numbers whose events were written (a thread whose drops are too
  // scattered to list one by one); readers take those as they come.
  std::vector<SeqRange> ranges;
  bool operator==(const LostRecord&) const = default;
};

using Record =
    std::variant<ProcessRecord, ApiNameRecord, ThreadRecord, ModuleRecord, PythonCodeRecord,
                 StackRecord, SymbolRecord, SourceLineRecord, CompactionRecord, StepSummaryRecord,
                 AllocRecord, FreeRecord, AllocFailedRecord, StepRecord, SampleRecord,
                 AnnotationRecord, ContextRecord, ExitRecord, LostRecord>;

// Sequence number of an event record; definitions have none.
bool record_seq(const Record& record, std::uint64_t* seq);
// Time of an event record (CLOCK_MONOTONIC ns); definitions have none.
bool record_time(const Record& record, std::uint64_t* time_ns);

const char* memory_kind_name(MemoryKind kind);    // "device", "host-pinned", ...
const char* metric_name(Metric metric);           // "host_rss_bytes", ...
const char* step_source_name(StepSource source);  // "optimizer-hook", ...

}  // namespace gpuleak::trace
