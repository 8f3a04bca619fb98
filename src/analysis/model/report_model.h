// What the analysis concludes about one traced process, in a form every
// reporter (text, JSON, HTML, live stderr lines) reads. Plain data; no
// behaviour. Times are seconds since the process's collector started;
// byte counts are bytes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trace/records.h"

namespace gpuleak::analysis {

// One frame of a call stack, native or Python, ready to show.
struct Frame {
  enum class Language { kNative, kPython };
  Language language = Language::kNative;
  std::string function;
  std::string file;
  std::uint32_t line = 0;
  std::string module;         // native only: the ELF object
  std::uint64_t address = 0;  // native only
  bool internal = false;      // inside CUDA, CUPTI, gpuleak, PyTorch or Python itself
  bool inlined = false;       // native only: compiled into the next frame's function
  // One of the innermost frames that only say how the call reached gpuleak:
  // the collector's, CUPTI's and the driver's own, above the API the program
  // called (which the report names anyway). Never worth showing by default.
  bool plumbing = false;
  // The text of file:line, when known (analysis/model/source_lines.h says from where).
  std::string source_line;
  // Python only: the frame stands at its function's `def` line. Code that
  // torch.compile (TorchDynamo) made runs in the original function's frame
  // and reports no statement of it; the caller's line is the one to show.
  bool at_definition = false;
};

// Whether a report folds this frame away unless all frames are asked for:
// plumbing always, and frames inside CUDA, PyTorch, Python or gpuleak when
// the stack has frames of the user's own (`stack_has_user_frame`).
inline bool folded_by_default(const Frame& f, bool stack_has_user_frame) {
  return f.plumbing || (stack_has_user_frame && f.internal);
}

inline bool has_user_frame(const std::vector<Frame>& frames) {
  for (const Frame& f : frames) {
    if (!f.internal) return true;
  }
  return false;
}

// The place to blame: the innermost frame in the user's own code, or the
// innermost frame with a source file when no frame is the user's.
struct Site {
  std::string function;
  std::string file;
  std::uint32_t line = 0;
  std::string source_line;    // the text of that line, when known (analysis/model/source_lines.h)
  std::string backward_node;  // the autograd node whose backward made it ("AddmmBackward0"), or ""
  std::string label() const;  // "train.py:42" or "function" or "?"
};

// What the Python package found holding one growing site's memory: its
// answer to a holder request (docs/python-protocol.md; fields in
// docs/python.md, "Answer fields per site"). Read from the trace's `holder`
// annotation; a field missing or of the wrong type there is empty here.
// The program's call that runs the method a keeping statement is in
// (`meter.update(loss, 8)` for `self.sum += val * n` in AverageMeter.update):
// the line the user changes when the store is in a class they call.
struct CallingLine {  // holder.kept_at.called_from
  std::string file;
  std::optional<std::uint64_t> line;
  std::optional<std::string> statement;
  std::string function;
};

struct KeepingStatement {  // holder.kept_at: the statement that stores into the holder
  std::string file;
  std::optional<std::uint64_t> line;
  std::optional<std::string> statement;  // its text; empty when the source could not be read
  std::string kind;                      // "append", "augmented-assignment", ...
  std::string function;
  bool in_loop = false;
  std::optional<CallingLine> called_from;  // when the statement is inside a method
};

struct Holder {
  std::string type;   // "list", "dict", "deque", "Tensor", ...
  std::string name;   // "losses", "history['loss']"
  std::string owner;  // "module __main__", "local of train (t.py:40)", ...
  std::string path;   // "__main__.losses"
  std::optional<std::int64_t> length;
  bool bounded = false;  // a container that cannot grow without limit
  std::optional<std::int64_t> maxlen;
  std::optional<std::string> filled_by;  // "hook on ReLU"
  std::optional<std::string> element;    // what each held element is, when worth saying
  std::optional<std::string> held_in;    // where the container lives, for `exception traceback`
  std::optional<KeepingStatement> kept_at;
};

struct HolderAnswer {
  std::uint32_t site_id = 0;
  std::uint64_t matched_addresses = 0;
  std::string kind;  // "tensor", "graph", "unknown"
  std::optional<Holder> holder;
  std::optional<std::int64_t> graph_tensors_per_element;
  bool element_has_grad_fn = false;
  // The package's finer word for how the holder keeps the memory; written
  // with the holder (null there when it has none).
  std::optional<std::string> cause;
  std::optional<std::string> fix;
  std::optional<std::string> note;  // why there is no holder
  // The walk ran out of its time budget (the answer's `timed_out`): a holder
  // it names may be an object below the one that keeps the memory.
  bool walk_timed_out = false;
};

// Allocations that are still live, grouped by where they were made.
struct LeakGroup {
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
  trace::MemoryKind kind = trace::MemoryKind::kDevice;
  std::string api;
  std::int32_t device = -1;
  std::vector<std::uint32_t> stack_ids;
  std::vector<Frame> frames;
  Site site;
  bool suppressed = false;
  std::string suppressed_by;  // the suppression rule that matched
  // A segment of PyTorch's or CuPy's cache whose tensors are tracked one by
  // one: those tensors are groups of their own, inside these bytes.
  bool pool_segment = false;
  // In the report of a tracked block only: a few of the group's live blocks
  // (address, bytes), which the package's holder walk looks for, and the
  // holder it found for the group's first stack.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> sample_blocks;
  std::optional<HolderAnswer> holder;
};

struct LeakSummary {
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
  std::vector<LeakGroup> groups;  // unsuppressed, largest first
  std::uint64_t suppressed_bytes = 0;
  std::uint64_t suppressed_allocations = 0;
  std::vector<LeakGroup> suppressed_groups;
};

// A failed allocation and what was live when it failed.
struct OutOfMemoryEvent {
  double time_s = 0;
  std::uint64_t requested_bytes = 0;
  std::string api;
  std::int32_t device = -1;
  std::uint32_t result = 0;
  std::uint64_t live_bytes = 0;
  std::uint64_t live_allocations = 0;
  std::vector<Frame> frames;
  Site site;
  std::vector<LeakGroup> largest_live;  // top groups live at that moment
};

// Growth of one allocation site over training steps.
struct SiteGrowth {
  std::uint32_t site_id = 0;  // the stack id
  double rate_bytes_per_step = 0;
  double allocations_per_step = 0;
  std::uint64_t live_bytes = 0;
  std::uint64_t live_allocations = 0;
  std::uint64_t first_growing_step = 0;
  trace::MemoryKind kind = trace::MemoryKind::kTorchBlock;
  bool tensor_level = true;  // a tensor (torch block or per-tensor driver call)
  std::string origin;        // for driver allocations: "PyTorch caching allocator", "NCCL", ...
  bool bounded = false;      // its holder cannot grow without limit, or it stopped growing
  // A site that grew and has been flat since (GrowthTracker::stopped_growing):
  // the step of its last rise and the steps since.
  std::optional<std::uint64_t> grew_until_step;
  std::uint64_t flat_steps = 0;
  std::vector<Frame> frames;
  Site site;
};

// SiteGrowth::site_id of a framework pool's bytes in use (JAX preallocating,
// judged per iteration of the main script's loop): not a stack id.
inline constexpr std::uint32_t kPoolSiteId = GPULEAK_POOL_SITE_ID;

enum class Verdict { kNotYet, kNoLeak, kLeak };
const char* verdict_name(Verdict verdict);  // "NOT YET", "NO LEAK", "LEAK"

enum class Where { kNone, kGpu, kHost, kBoth };
const char* where_name(Where where);  // "none", "gpu", "host", "both"

// One phase of the program: the iterations of one clock (optimizer steps,
// a DataLoader's batches, a loop found in the allocations) inside one phase
// the program named, judged on their own.
struct PhaseSummary {
  std::string name;   // "iterations of the loop in evaluate (eval.py:70)"
  std::string label;  // the program's name for it (gpuleak.phase()), or ""
  std::string step_source;
  std::uint64_t steps = 0;
  Verdict verdict = Verdict::kNotYet;
  double rate_bytes_per_step = 0;
  std::optional<std::uint64_t> verdict_step;
  bool primary = false;  // the phase the rest of the growth report is about
};

struct GrowthReport {
  Verdict verdict = Verdict::kNotYet;
  std::uint64_t steps = 0;
  // "explicit", "optimizer-hook", "dataloader", "python-loop", "allocation-period",
  // "time-window"
  std::string step_source;
  std::string phase;                 // the phase's name (PhaseSummary::name)
  std::string step_source_reason;    // why these are the iterations, in words
  std::string undecided_reason;      // NOT YET: why, and what would help
  std::vector<PhaseSummary> phases;  // every phase, the primary one included
  std::uint64_t warmup_steps = 0;
  double rate_bytes_per_step = 0;
  double rate_bytes_per_second = 0;
  std::optional<std::uint64_t> first_growing_step;
  std::optional<std::uint64_t> verdict_step;  // first step at which the verdict was LEAK
  // The slowest growth of one allocation site this run could show: the
  // window's minimum rise (GrowthOptions::min_growth_bytes) over the steps
  // judged so far, up to the window. Set once past the minimum steps. It is
  // per site, whatever the job's live size: a leak at its own site is found
  // at this rate even under tens of GiB of steady memory.
  std::optional<double> detection_floor_bytes_per_step;
  std::optional<double> seconds_to_full;
  std::optional<std::uint64_t> device_total_bytes;
  std::string cause;  // cause id, empty if none
  std::string cause_text;
  Where where = Where::kNone;
  double host_rss_bytes_per_step = 0;
  double pool_reserved_bytes_per_step = 0;
  std::vector<SiteGrowth> sites;  // growing sites, fastest first
  // With NOT YET for too few steps: the sites that pass every test but the
  // number of steps (GrowthTracker::rising_sites), fastest first. Not a
  // verdict; what a job that fails in its first steps needs to be told.
  // `cause`, `cause_text` and `fix` are then what they would be if the
  // rise goes on.
  std::vector<SiteGrowth> rising_sites;
  std::optional<HolderAnswer> holder;  // for the top site (or the first bounded one)
  std::string fix;
  std::string note;  // e.g. "reserved memory grows while live tensors do not: cache, not a leak"
  // Judged by a framework pool's bytes in use at each iteration (JAX
  // preallocating), not by allocation sites: ProcessAnalysis::pool_judged.
  bool pool_judged = false;
  // Boundaries of the judged window whose events were partly lost; their
  // changes are left out of every site's trend.
  std::uint64_t lossy_steps = 0;
  std::uint64_t window_steps = 0;  // boundaries in that window
};

// Per-step (or per-time-window) series for plots; for long runs a bounded
// choice of the boundaries (analysis/growth/timeline_sampler.h).
struct Timeline {
  std::uint64_t boundaries = 0;  // boundaries in the run; more than step.size() when sampled
  std::vector<std::uint64_t> step;
  std::vector<double> time_s;
  std::vector<std::uint64_t> live_tensor_bytes;
  std::vector<std::uint64_t> live_device_bytes;  // everything live on devices (driver level)
  std::vector<std::optional<std::uint64_t>> pool_reserved_bytes;
  std::vector<std::optional<std::uint64_t>> device_used_bytes;
  std::vector<std::optional<std::uint64_t>> host_rss_bytes;
  // Per row, the live bytes of each site an export asked to follow
  // (ExportDetail::series_site_ids, in that order); empty otherwise.
  std::vector<std::vector<std::uint64_t>> site_live_bytes;
};

// Device memory the driver handed out, by who asked for it, at the last
// step boundary (or at the end): PyTorch's cache, NCCL, cuBLAS, cuDNN,
// tensors allocated one by one (cudaMallocAsync), or other code.
struct OriginShare {
  std::string origin;
  std::uint64_t bytes = 0;
  bool tensors = false;  // per-tensor allocations rather than buffers
};

// What the traced process says about itself in its annotations (fields in
// docs/json-schema.md and docs/trace-format.md). Each is read from the trace
// once, in the analysis (analysis/model/annotation_values.h); an annotation that
// is not a JSON object is absent, and a field missing there or of the wrong
// type is empty here.

// How PyTorch's tensors were tracked: the `torch_tracking` annotation.
struct TorchTracking {
  std::optional<std::string> mode;        // "allocator-hook", "cudaMallocAsync", "driver-only"
  std::optional<std::string> alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF as the process had it
  std::optional<std::string> torch;       // PyTorch's version
  std::optional<std::string> hook_error;  // why the allocator hook is off (null there: none)
};

// Which clock timed the events: the collector's `clock` annotation.
struct EventClock {
  std::optional<std::string> clock;  // "monotonic", "monotonic-coarse", "tsc"
  std::optional<std::uint64_t> resolution_ns;
  std::optional<double> monotonic_read_ns;  // what one precise read of the clock costs
};

// The process as one rank of a distributed job: the `distributed` annotation
// (RANK, LOCAL_RANK and WORLD_SIZE of its environment, or Slurm's or Open
// MPI's names for them).
struct DistributedRank {
  std::optional<std::int64_t> rank;
  std::optional<std::int64_t> local_rank;
  std::optional<std::int64_t> world_size;
  std::optional<std::string>
      launcher;  // "torchrun", "slurm", "open-mpi": whose variables gave them
};

// Which capture backend recorded driver calls, and why: the collector's
// `capture_backend` annotation (docs/collector.md, "Capture backends").
struct CaptureBackend {
  std::optional<std::string> name;    // "interposer", "cupti"
  std::optional<std::string> reason;  // why this backend
  std::optional<bool> interposer_loaded;
  std::optional<bool> interposer_loaded_before_driver;
  std::optional<std::uint64_t> start_requests;            // above 1: started again (harmless)
  std::optional<std::uint64_t> reentrant_start_requests;  // asked for while starting
};

// Array tracking of another framework (CuPy, JAX): the `framework_tracking`
// annotation (docs/client-matrix.md).
struct FrameworkTracking {
  std::optional<std::string> framework;  // "CuPy", "JAX"
  std::optional<std::string> mode;       // "memory-hook", "preallocated-pool", "platform", ...
  // A pool reserved at start hides the arrays from the driver.
  std::optional<bool> hidden_allocations;
  // The framework's device memory holds only its arrays (JAX's platform allocator).
  std::optional<bool> device_memory_holds_arrays;
  std::optional<std::string> version;
  std::optional<std::string> how_to_see;    // the settings that show each array
  std::optional<std::string> mem_fraction;  // XLA_PYTHON_CLIENT_MEM_FRACTION
};

// Whether the Python package followed the main script's loop (step source
// python-loop): the `python_loop` annotation (python/gpuleak/python_loop.py).
struct PythonLoopAnnotation {
  std::optional<bool> available;
  std::optional<std::string> reason;         // why not: Python before 3.12, turned off, an error
  std::optional<std::string> script;         // the main script whose loops it follows
  std::optional<std::int64_t> tool_id;       // its sys.monitoring tool id
  std::optional<std::int64_t> code_objects;  // the script's code objects it follows
};

// A recording that `gpuleak attach` started in a running process and
// ended when it detached: the `attach` annotations (begin, end).
struct AttachSession {
  bool detached = false;                  // the `end` annotation came: the process went on
  std::optional<std::string> end_reason;  // "duration", "steps", "asked", "gpuleak attach ended"
  std::optional<std::int64_t> steps;      // steps recorded while attached
  // What PyTorch held when the attach began (no stacks: allocated before it).
  std::optional<std::int64_t> baseline_torch_allocated_bytes;
};

// What the Python package says the process is to its job: the
// `process_role` annotation. Either part is present only when it applies.
struct ProcessRoleAnnotation {
  struct DataLoaderWorker {  // torch.utils.data.get_worker_info() in the process
    std::optional<std::int64_t> id;
    std::optional<std::int64_t> num_workers;
  };
  struct Multiprocessing {            // a process multiprocessing started
    std::optional<std::string> name;  // "SpawnPoolWorker-3"
    std::optional<std::int64_t> parent_pid;
    std::optional<std::string> start_method;
  };
  std::optional<DataLoaderWorker> dataloader_worker;
  std::optional<Multiprocessing> multiprocessing;
};

// What one trace says about how its process used CUDA, for the job-level
// analysis of processes (job_analysis.h): when and where CUDA was first
// used, how much memory the driver handed out over time, and the facts a
// role is judged by. Times are seconds since the process's collector
// started (`ProcessRecord::start_monotonic_ns`).
struct CudaFirstUse {
  double time_s = 0;
  std::int32_t device = -1;
  bool context_created = false;  // from a context record; false: the first allocation
  std::vector<Frame> frames;     // innermost first; empty when no stack was captured
  Site site;
};

// Memory the driver handed out to this process, by kind, at one moment.
struct DriverMemoryPoint {
  double time_s = 0;
  std::uint64_t cache_bytes = 0;   // driver allocations made by PyTorch's caching allocator
  std::uint64_t tensor_bytes = 0;  // live tensors (inside the cache, or one driver call each)
  std::uint64_t driver_bytes = 0;  // every live driver allocation that occupies the device
};

struct ProcessCudaUse {
  std::optional<CudaFirstUse> first_use;
  std::uint64_t contexts_created = 0;
  std::optional<double> last_activity_s;      // last allocation, free or context change
  std::optional<double> python_exit_s;        // the program's Python code returned (atexit began)
  std::optional<double> exit_s;               // the ExitRecord (the process began to exit)
  std::string main_thread_name;               // the kernel's name of the thread whose id is the pid
  std::optional<ProcessRoleAnnotation> role;  // the `process_role` annotation, if any
  std::vector<DriverMemoryPoint> memory;      // bounded series, oldest first
};

// What the exports need beyond the report (analysis/export_detail.h says
// how it is kept): present only when an export asked for it.
// One allocation or free, as the exports' event lists show it.
struct AllocationEvent {
  double time_s = 0;
  bool is_alloc = true;
  trace::MemoryKind kind = trace::MemoryKind::kDevice;
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::int32_t device = -1;
  std::uint64_t stream = 0;
  std::uint32_t thread_id = 0;
  std::uint32_t stack_id = 0;  // the allocation's stack (a free: the freed allocation's)
};

// One allocation live at the end of the trace.
struct LiveBlock {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  trace::MemoryKind kind = trace::MemoryKind::kDevice;
  std::int32_t device = -1;
  std::uint32_t stack_id = 0;
  std::uint64_t step_index = 0;  // boundaries seen before it was made
};

struct ExportDetail {
  // The columns of Timeline::site_live_bytes, in order.
  std::vector<std::uint32_t> series_site_ids;
  // What was live when live memory first reached the peak, grouped by
  // site as the report's leaks are (largest first).
  std::optional<double> peak_time_s;
  std::uint64_t peak_bytes = 0;
  std::vector<LeakGroup> live_at_peak;
  // Allocations live at the end, address order; `live_blocks_total` counts
  // all of them.
  std::vector<LiveBlock> live_blocks;
  std::uint64_t live_blocks_total = 0;
  // The last events, oldest first; `events_total` counts all of them.
  std::vector<AllocationEvent> events;
  std::uint64_t events_total = 0;
  // The frames, the site and who allocated (StackCatalog::origin) of every
  // stack the events and live blocks name.
  std::map<std::uint32_t, std::vector<Frame>> frames;
  std::map<std::uint32_t, Site> sites;
  std::map<std::uint32_t, std::string> origins;
  std::map<std::uint32_t, std::string> thread_names;
};

// The `gpuleak.track()` block a report is restricted to: whether the trace
// marks its beginning and its end (a block whose end is missing was cut short:
// the process ended, or is still inside it).
struct TrackedBlockReport {
  std::uint64_t block = 0;
  bool found = false;
  bool ended = false;
};

// A trace compacted to keep its bound (trace/trace_summary.h): what the
// report still has of the summarized part, and at what resolution.
struct TraceCompactionReport {
  std::uint64_t compactions = 0;
  double summarized_until_s = 0;     // events before this (since start) were summarized
  std::uint64_t dropped_events = 0;  // raw events no longer in the trace
  std::uint64_t summarized_steps = 0;
  std::uint64_t step_resolution = 0;  // one step mark of the summarized part kept every this many
  std::uint64_t bound_bytes = 0;
  // The kept step marks, with what was live at each (live bytes as
  // peak_live_bytes counts them).
  struct StepPoint {
    double time_s = 0;
    std::uint64_t step = 0;
    std::uint64_t live_bytes = 0;
  };
  std::vector<StepPoint> steps;
};

struct ProcessReport {
  std::string trace_path;
  trace::ProcessRecord process;
  bool exited = false;      // an ExitRecord was seen
  std::string trace_error;  // empty, or why reading stopped early
  std::uint64_t trace_error_offset = 0;
  std::vector<std::string> damage;  // what is wrong with the part that was read, one sentence each
  std::optional<TorchTracking> torch_tracking;          // a PyTorch process's tracking
  std::optional<EventClock> clock;                      // which clock timed the events
  std::optional<DistributedRank> distributed;           // when the process is one rank of a job
  std::optional<CaptureBackend> capture_backend;        // how driver calls were recorded
  std::optional<FrameworkTracking> framework_tracking;  // array tracking of CuPy or JAX
  std::optional<PythonLoopAnnotation> python_loop;  // whether the main script's loop was followed
  std::optional<AttachSession>
      attach;                      // recorded by `gpuleak attach`, from its start to its detach
  std::string collector_disabled;  // why the collector turned itself off; empty if it did not
  std::vector<OriginShare> device_memory_by_origin;
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  std::uint64_t unmatched_frees = 0;
  std::uint64_t lost_events = 0;
  // Sequence numbers of lost events: listed by the collector's lost records
  // (skipped without waiting), or only counted (collectors before ranges).
  std::uint64_t lost_ranged_seqs = 0;
  std::uint64_t lost_counted_seqs = 0;
  std::uint64_t peak_live_bytes = 0;
  double duration_s = 0;
  // When the collector compacted the trace to keep it under its bound.
  std::optional<TraceCompactionReport> compaction;
  LeakSummary leaks;
  std::vector<OutOfMemoryEvent> out_of_memory;
  GrowthReport growth;
  Timeline timeline;
  ProcessCudaUse cuda_use;
  std::optional<ExportDetail> export_detail;  // only when an export asked (ExportRequest)
  // When the report is of one `gpuleak.track()` block (AnalysisOptions::tracked_block).
  std::optional<TrackedBlockReport> tracked_block;
};

// A trace that gave no report at all (it could not be opened, is not a
// trace, or holds no records); the other traces are still reported.
struct UnusableTrace {
  std::string trace_path;
  std::string error;  // "<path>: <why>", as printed after "gpuleak: "
};

// Whether the process did any GPU work: created a context or allocated. A
// process that only initialized CUDA (a helper such as Open MPI's orted) did
// not, and reports give it one summary line instead of a section.
inline bool did_gpu_work(const ProcessReport& r) {
  return r.allocations > 0 || r.cuda_use.contexts_created > 0;
}

// Whether memory still allocated at exit is a leak by itself. Not in a
// process whose tensors or arrays gpuleak tracked (PyTorch, CuPy, JAX): their
// pools keep freed blocks, and PyTorch keeps its cache,
// cuBLAS's workspaces and every tensor still referenced until the process
// ends, so there only a LEAK verdict says that memory leaks. Nor in a
// process `gpuleak attach` left running: its memory is live, not left behind.
inline bool ended_while_recorded(const ProcessReport& r) {
  return r.exited || !r.attach || !r.attach->detached;
}
inline bool exit_memory_counts_as_leak(const ProcessReport& r) {
  return !r.torch_tracking && !r.framework_tracking && ended_while_recorded(r);
}

// ---- The job: every process of one run --------------------------------------

// What a process is to the job. Ids are stable (JSON `role`, docs/processes.md).
enum class RoleKind {
  kMain,                   // the program `gpuleak run` started
  kDataLoaderWorker,       // a torch.utils.data.DataLoader worker
  kPoolWorker,             // a multiprocessing.Pool / ProcessPoolExecutor worker
  kMultiprocessingWorker,  // a multiprocessing.Process (torch.multiprocessing.spawn too)
  kMultiprocessingHelper,  // multiprocessing's resource tracker or forkserver
  kRank,                   // one rank of a distributed job (RANK / WORLD_SIZE)
  kForkedChild,            // a fork() copy of its parent that did not exec
  kSubprocess,             // any other child program
  kUnknown,                // a traced process whose place in the job is unknown
};
const char* role_kind_name(RoleKind kind);  // "main", "dataloader_worker", ...

struct ProcessRole {
  RoleKind kind = RoleKind::kUnknown;
  int of_pid = 0;    // the process it works for (0: none or unknown)
  std::string text;  // "DataLoader worker 2 of PID 4700", "main program"
};

// The process's memory as the driver counts it (NVML's per-process figure,
// sampled by `gpuleak run`), and what it is made of at its peak.
struct DeviceMemoryView {
  std::uint64_t samples = 0;
  std::uint64_t peak_used_bytes = 0;
  double peak_time_s = 0;  // since the job started
  // At the peak: used = context_and_modules + allocator_reserved +
  // other_driver + unexplained (each clamped at 0). `context_and_modules`
  // is measured: what the driver counted beyond every allocation gpuleak saw,
  // at the first sample after the context was created.
  std::uint64_t context_and_modules_bytes = 0;
  std::uint64_t allocator_reserved_bytes = 0;  // PyTorch's cache (segments)
  std::uint64_t tensor_bytes = 0;              // of which live tensors
  std::uint64_t other_driver_bytes = 0;        // other allocation calls (NCCL, extensions, ...)
  std::uint64_t unexplained_bytes = 0;         // grew beyond the context without a call gpuleak saw
  std::vector<double> time_s;                  // since the job started
  std::vector<std::uint64_t> used_bytes;
};

struct JobProcess {
  std::string host;  // the host name its trace gives ("" when unknown); PIDs are per host
  int pid = 0;
  int parent_pid = 0;
  std::string command_line;
  ProcessRole role;
  int report_index = -1;                  // index into the ProcessReports, -1 when it has no trace
  bool cuda_initialized = false;          // it has a trace: the driver loaded the collector
  bool gpu_work = false;                  // created a context or allocated (did_gpu_work)
  std::optional<CudaFirstUse> first_use;  // time_s since the job started
  DeviceMemoryView device_memory;
  std::optional<double> first_seen_s, last_seen_s;  // alive in gpuleak run's samples
  std::optional<double> zombie_since_s;             // first sample in state Z
  double zombie_seconds = 0;                        // how long it was seen as a zombie
  bool alive_at_end = false;  // still alive after the main program exited and the grace period
};

// A verdict about processes: a cause of the "processes" kind, with the
// processes it names, the memory involved (each and in all), how long, where
// CUDA was first used, and what to do. Reporters word it
// (report/process_finding_text.h).
struct ProcessFinding {
  std::string kind;  // "worker_context", "idle_worker_context", "left_running", "orphan", "zombie"
  std::vector<int> pids;
  std::string host;                    // the host of them all, when they share one
  int of_pid = 0;                      // the process they belong to, when they share one
  RoleKind role = RoleKind::kUnknown;  // of the processes named, when they share one
  bool memory_known = false;           // the driver's per-process figures were available
  std::uint64_t bytes_each = 0;        // median over the processes, of each one's peak
  std::uint64_t bytes_total = 0;       // sum of the peaks
  std::size_t at_once = 0;             // most of them alive at one time (0: unknown)
  double seconds =
      0;  // idle / still running after main returned / alive after main exited / zombie
  std::optional<Site> first_use;  // where CUDA was first used in most of them
  std::string first_use_in;       // "dataset", "worker_init_fn", "collate_fn", or ""
  std::string fix;
};

struct JobReport {
  int main_pid = 0;
  std::string main_host;  // the main program's host (as its trace names it)
  double duration_s = 0;
  std::optional<double> main_exit_s;  // the main program ended (since the job started)
  int main_exit_status = -1;          // -1 unknown
  double grace_period_s = 0;          // how long `run` waited for the job's other processes
  bool observed = false;              // `gpuleak run` sampled the job's processes
  std::string nvml_note;              // why per-process device memory is missing, if it is
  std::vector<JobProcess> processes;  // main first, then by start
  std::vector<ProcessFinding> findings;
  std::vector<std::string> notes;  // facts worth a line that are not findings
};

}  // namespace gpuleak::analysis
