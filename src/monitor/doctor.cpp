#include "monitor/doctor.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "monitor/process_tree.h"
#include "quantity/units.h"

namespace gpuleak::monitor {

namespace {

using quantity::format_bytes;

std::string gpu_label(const Sample& sample, unsigned index) {
  for (const auto& device : sample.devices) {
    if (device.device.index == index) {
      return device.device.name.empty() ? fmt::format("GPU {}", index)
                                        : fmt::format("GPU {} ({})", index, device.device.name);
    }
  }
  return fmt::format("GPU {}", index);
}

// "holds 1.50 GiB on GPU 0 (NVIDIA H200)" lines for one process.
std::vector<std::string> holding_lines(const Sample& sample, const ProcessView& view) {
  std::vector<std::string> lines;
  for (const auto& use : view.gpu) {
    if (use.memory_bytes) {
      lines.push_back(fmt::format("the driver lists it holding {} on {}",
                                  format_bytes(*use.memory_bytes),
                                  gpu_label(sample, use.device_index)));
    } else {
      lines.push_back(fmt::format("the driver lists it on {} (amount not reported)",
                                  gpu_label(sample, use.device_index)));
    }
  }
  if (view.info.device_handle_count > 0) {
    lines.push_back(fmt::format("it has {} open handle{} to {}", view.info.device_handle_count,
                                view.info.device_handle_count == 1 ? "" : "s",
                                fmt::join(view.info.device_files, ", ")));
  }
  return lines;
}

std::string memory_phrase(const ProcessView& view) {
  if (view.gpu_memory_bytes) return "holding " + format_bytes(*view.gpu_memory_bytes);
  return "holding a GPU device open";
}

// Which GPUs a process uses: driver indices, and the per-GPU device files
// (/dev/nvidiaN). /dev/nvidiactl and /dev/nvidia-uvm are opened by every
// CUDA process whatever its GPU, so they say nothing about sharing one.
std::set<std::string> devices_used(const ProcessView& view) {
  std::set<std::string> used;
  for (const auto& use : view.gpu) used.insert(fmt::format("gpu{}", use.device_index));
  for (const auto& file : view.info.device_files) {
    std::string name = file.substr(file.find_last_of('/') + 1);
    bool per_gpu =
        name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
        std::all_of(name.begin() + 6, name.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (per_gpu) used.insert(file);
  }
  return used;
}

std::optional<unsigned> first_device(const ProcessView& view) {
  if (view.gpu.empty()) return std::nullopt;
  return view.gpu.front().device_index;
}

// A finding about one process: who, on which GPU, holding how much.
Finding process_finding(FindingKind kind, Severity severity, const ProcessView& view) {
  Finding finding;
  finding.kind = kind;
  finding.severity = severity;
  finding.pid = view.pid;
  finding.device_index = first_device(view);
  finding.memory_bytes = view.gpu_memory_bytes;
  return finding;
}

Finding orphan_finding(const Sample& sample, const ProcessTree& tree, const ProcessView& view) {
  Finding finding = process_finding(FindingKind::kOrphan, Severity::kAction, view);
  finding.can_kill = true;
  finding.summary = fmt::format("PID {} is an orphan {}", view.pid, memory_phrase(view));
  finding.evidence.push_back(fmt::format("{}, run by {}", tree.describe(view.pid), view.user));
  for (const auto& line : view.orphan.evidence) finding.evidence.push_back(line);
  if (view.relation.kind == RelationKind::kDataLoaderWorker ||
      view.relation.kind == RelationKind::kMultiprocessingWorker) {
    finding.evidence.push_back("it was a " + view.relation.text);
  }
  for (const auto& line : holding_lines(sample, view)) finding.evidence.push_back(line);
  std::vector<int> holding_children;
  for (int child : tree.children(view.pid)) {
    const ProcessInfo* info = tree.find(child);
    if (info && info->holds_device_handles()) holding_children.push_back(child);
  }
  if (!holding_children.empty()) {
    finding.evidence.push_back(
        fmt::format("its children {} also hold the GPU and become orphans when it ends",
                    fmt::join(holding_children, ", ")));
  }
  finding.cause =
      "Its parent exited without ending it. A CUDA context is released only when the process "
      "holding it exits, so its memory stays taken for as long as this process lives.";
  finding.action = fmt::format(
      "If it is no longer needed, end it: `gpuleak doctor --kill-orphans` (asks first) or "
      "`kill {}`. To prevent it, make the launcher wait for or terminate its children on every "
      "exit path (multiprocessing daemon=True, try/finally around the job, or run it under a "
      "supervisor that kills the whole process group).",
      view.pid);
  return finding;
}

Finding zombie_finding(const Sample& sample, const ProcessTree& tree, const ProcessView& view) {
  bool holds = view.gpu_memory_bytes.value_or(0) > 0 || view.info.device_handle_count > 0;
  Finding finding =
      process_finding(FindingKind::kZombie, holds ? Severity::kAction : Severity::kWarning, view);
  finding.summary = holds
                        ? fmt::format("PID {} is a zombie still {}", view.pid, memory_phrase(view))
                        : fmt::format("PID {} is a zombie child of a GPU process", view.pid);
  finding.evidence.push_back(fmt::format(
      "PID {} ({}) is in state Z: it exited but its parent {} has not collected its exit status",
      view.pid, view.info.comm, tree.describe(view.info.ppid)));
  if (view.info.threads > 1) {
    finding.evidence.push_back(fmt::format(
        "{} of its threads are still running, so its files and any CUDA context stay open",
        view.info.threads - 1));
  }
  for (const auto& line : holding_lines(sample, view)) finding.evidence.push_back(line);
  finding.cause =
      holds ? "An exited process keeps what the driver counts against it until it is fully gone; "
              "this one has not been reaped (or its other threads still run)."
            : "The process exited and released its GPU memory, but its parent has not called "
              "wait() for it. It costs no GPU memory; it shows the parent is not watching its "
              "children (a crashed worker goes unnoticed).";
  finding.action = fmt::format(
      "Its parent PID {} must reap it; it will when it next waits for its children. If the "
      "parent is stuck, ending the parent lets init reap it. Killing the zombie itself does "
      "nothing.",
      view.info.ppid);
  return finding;
}

Finding worker_finding(const Sample& sample, const ProcessTree& tree, const ProcessView& view,
                       const ProcessView* owner, int workers_of_owner_holding,
                       std::uint64_t workers_total_bytes) {
  Finding finding = process_finding(FindingKind::kWorkerContext, Severity::kInfo, view);
  bool dataloader = view.relation.kind == RelationKind::kDataLoaderWorker;
  std::set<std::string> mine = devices_used(view);
  bool shares_device = false;
  if (owner) {
    std::set<std::string> theirs = devices_used(*owner);
    shares_device = std::any_of(mine.begin(), mine.end(),
                                [&](const std::string& d) { return theirs.count(d) > 0; });
  }
  finding.severity = dataloader || shares_device ? Severity::kWarning : Severity::kInfo;
  finding.summary = fmt::format("PID {} is a {} with its own CUDA context ({})", view.pid,
                                view.relation.text, memory_phrase(view));
  finding.evidence.push_back(
      fmt::format("{} is a {}", tree.describe(view.pid), view.relation.text));
  if (dataloader) {
    finding.evidence.push_back(
        "its main thread is named pt_data_worker, which PyTorch gives DataLoader workers");
  } else if (is_spawned_worker(view.info)) {
    finding.evidence.push_back("its command line is multiprocessing's spawn entry point");
  }
  for (const auto& line : holding_lines(sample, view)) finding.evidence.push_back(line);
  if (shares_device) {
    finding.evidence.push_back(
        fmt::format("its parent {} uses the same GPU, so that GPU carries one context per process",
                    tree.describe(view.relation.of_pid)));
  }
  if (workers_of_owner_holding > 1) {
    std::string total = workers_total_bytes > 0
                            ? fmt::format(", {} in total", format_bytes(workers_total_bytes))
                            : std::string();
    finding.evidence.push_back(fmt::format("{} workers of PID {} hold the GPU{}",
                                           workers_of_owner_holding, view.relation.of_pid, total));
  }
  if (dataloader || shares_device) {
    finding.cause =
        "The worker touched CUDA (a .cuda()/.to('cuda') in Dataset.__getitem__, worker_init_fn "
        "or collate_fn, or a CUDA tensor captured in the dataset), so it created its own CUDA "
        "context: hundreds of MiB per worker, for as long as the worker lives.";
    finding.action =
        "Keep workers on the CPU: return CPU tensors from the Dataset and move each batch to "
        "the GPU in the training loop (DataLoader(pin_memory=True) and "
        ".cuda(non_blocking=True)). Check worker_init_fn and collate_fn for CUDA calls.";
  } else {
    finding.cause =
        "Each multiprocessing child that uses CUDA has its own context. With one process per "
        "GPU (as with DistributedDataParallel) that is intended.";
    finding.action =
        "Nothing, if each worker drives its own GPU. If these workers only prepare data, keep "
        "them off the GPU and move results to the GPU in the parent.";
  }
  return finding;
}

Finding namespace_finding(const Sample& sample, const ProcessTree& tree, const ProcessView& view) {
  Finding finding = process_finding(FindingKind::kOtherNamespace, Severity::kWarning, view);
  finding.summary = fmt::format(
      "PID {} ({}) belongs to another PID namespace", view.pid,
      view.gpu_memory_bytes ? format_bytes(*view.gpu_memory_bytes) : std::string("amount unknown"));
  for (const auto& line : holding_lines(sample, view)) {
    finding.evidence.push_back("driver PID " + std::to_string(view.pid) + ": " + line);
  }
  if (view.visible) {
    finding.evidence.push_back(fmt::format(
        "{} exists here but has no GPU device file open, so it is not the process the driver "
        "means",
        tree.describe(view.pid)));
  } else {
    finding.evidence.push_back(fmt::format("no process {} exists in this PID namespace", view.pid));
  }
  finding.cause =
      "The driver reports process ids as the host sees them. A process in another container, "
      "or on the host while gpuleak runs inside a container, has an id that means nothing (or "
      "something else) here, and it cannot be inspected or ended from here.";
  finding.action =
      "Run `gpuleak doctor` on the host (or in a container started with --pid=host) to see who "
      "it is; `nvidia-smi` there shows the same id.";
  return finding;
}

Finding growing_finding(const Sample& sample, const ProcessTree& tree, const ProcessView& view) {
  Finding finding = process_finding(FindingKind::kGrowingMemory, Severity::kWarning, view);
  std::vector<std::string> what;
  if (view.gpu_trend.leak) {
    what.push_back("GPU memory grows by " +
                   quantity::format_rate(view.gpu_trend.slope_bytes_per_s, "s"));
  }
  if (view.rss_trend.leak) {
    what.push_back("host RSS grows by " +
                   quantity::format_rate(view.rss_trend.slope_bytes_per_s, "s"));
  }
  finding.summary = fmt::format("PID {}'s {}", view.pid, fmt::join(what, ", its "));
  finding.evidence.push_back(fmt::format("{}, run by {}", tree.describe(view.pid), view.user));
  finding.evidence.push_back(fmt::format("it grew steadily over {} samples in {:.0f} s",
                                         std::max(view.gpu_trend.points, view.rss_trend.points),
                                         sample.elapsed_s));
  if (view.gpu_trend.leak && view.gpu_trend.seconds_until_full) {
    finding.evidence.push_back(
        "at this rate its GPU is full in " +
        quantity::format_duration_seconds(*view.gpu_trend.seconds_until_full));
  }
  finding.cause =
      "Memory that grows at a steady rate is a leak, or a cache that has not reached its size "
      "yet; from outside the process the two look the same.";
  finding.action = fmt::format(
      "See what grows and what keeps it, without restarting the job: `gpuleak attach {}` "
      "(records for a while, then leaves it running as before).",
      view.pid);
  return finding;
}

Finding unaccounted_finding(const DeviceView& device, std::uint64_t threshold_bytes) {
  Finding finding;
  finding.kind = FindingKind::kUnaccountedMemory;
  finding.severity = Severity::kWarning;
  finding.device_index = device.device.index;
  finding.memory_bytes = device.unaccounted_bytes;
  finding.summary = fmt::format("{} of GPU {} is used by no listed process",
                                format_bytes(device.unaccounted_bytes), device.device.index);
  finding.evidence.push_back(fmt::format(
      "GPU {} ({}) reports {} used{}; the processes the driver lists account for {}",
      device.device.index, device.device.uuid, format_bytes(device.device.memory_used_bytes),
      device.device.reserved_reported
          ? fmt::format(" (plus {} reserved by the driver)",
                        format_bytes(device.device.memory_reserved_bytes))
          : std::string(),
      format_bytes(device.accounted_bytes)));
  finding.evidence.push_back(fmt::format("the difference, {}, is above the {} allowance",
                                         format_bytes(device.unaccounted_bytes),
                                         format_bytes(threshold_bytes)));
  finding.cause =
      "Memory nobody here accounts for is held by processes the driver does not list to us "
      "(other containers or virtual machines, MIG instances, a process still exiting), or by "
      "a context the driver has not torn down yet.";
  finding.action =
      "Compare with `nvidia-smi` on the host. If the memory stays used with no process, wait a "
      "minute (teardown after a crash takes time); if it persists, the GPU needs a reset by an "
      "administrator (`nvidia-smi --gpu-reset` with nothing running on it).";
  return finding;
}

int severity_rank(Severity severity) {
  switch (severity) {
    case Severity::kAction:
      return 0;
    case Severity::kWarning:
      return 1;
    case Severity::kInfo:
      return 2;
  }
  return 3;
}

}  // namespace

const char* finding_kind_name(FindingKind kind) {
  switch (kind) {
    case FindingKind::kOrphan:
      return "orphan";
    case FindingKind::kZombie:
      return "zombie";
    case FindingKind::kWorkerContext:
      return "worker_context";
    case FindingKind::kOtherNamespace:
      return "other_namespace";
    case FindingKind::kUnaccountedMemory:
      return "unaccounted_memory";
    case FindingKind::kGrowingMemory:
      return "growing_memory";
  }
  return "unknown";
}

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::kAction:
      return "action";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "info";
}

bool DoctorReport::has_problems() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity != Severity::kInfo; });
}

DoctorReport diagnose(const RawSample& raw, Sample sample) {
  DoctorReport report;
  ProcessTree tree(raw.table);
  std::map<int, const ProcessView*> by_pid;
  for (const auto& view : sample.processes) by_pid[view.pid] = &view;

  // Workers per owner, to say "3 workers of PID n hold the GPU, 1.2 GiB in total".
  std::map<int, int> holding_workers;
  std::map<int, std::uint64_t> holding_workers_bytes;
  auto is_worker = [](const ProcessView& v) {
    return v.relation.kind == RelationKind::kDataLoaderWorker ||
           v.relation.kind == RelationKind::kMultiprocessingWorker ||
           v.relation.kind == RelationKind::kForkedChild;
  };
  auto holds = [](const ProcessView& v) {
    return !v.gpu.empty() || v.info.device_handle_count > 0;
  };
  for (const auto& view : sample.processes) {
    if (is_worker(view) && holds(view) && view.relation.of_pid > 0 && !view.info.is_zombie()) {
      ++holding_workers[view.relation.of_pid];
      holding_workers_bytes[view.relation.of_pid] += view.gpu_memory_bytes.value_or(0);
    }
  }

  for (const auto& view : sample.processes) {
    std::string verdict = "ok";
    bool listed_by_driver = !view.gpu.empty();
    // The driver lists this pid, but the process with this pid here has no
    // GPU file open: it is somebody else's pid (after zombie and orphan).
    bool foreign_pid = listed_by_driver && view.info.handle_scan == HandleScan::kScanned &&
                       view.info.device_handle_count == 0;
    if (view.visible && view.info.is_zombie()) {
      report.findings.push_back(zombie_finding(sample, tree, view));
      verdict = "zombie";
    } else if (view.visible && view.orphan.orphaned) {
      report.findings.push_back(orphan_finding(sample, tree, view));
      verdict = "orphan";
    } else if (!view.visible || foreign_pid) {
      // A process of another pid namespace, or somebody else's pid.
      report.findings.push_back(namespace_finding(sample, tree, view));
      verdict = "other-namespace";
    } else if (is_worker(view) && holds(view) && view.relation.of_pid > 0) {
      auto owner = by_pid.find(view.relation.of_pid);
      report.findings.push_back(worker_finding(
          sample, tree, view, owner == by_pid.end() ? nullptr : owner->second,
          holding_workers[view.relation.of_pid], holding_workers_bytes[view.relation.of_pid]));
      verdict = "worker";
    }
    report.verdicts.push_back(verdict);
    if (view.visible && !view.info.is_zombie() && (view.gpu_trend.leak || view.rss_trend.leak)) {
      report.findings.push_back(growing_finding(sample, tree, view));
    }
  }

  for (const auto& device : sample.devices) {
    std::uint64_t threshold = std::max<std::uint64_t>(
        kUnaccountedFloorBytes,
        static_cast<std::uint64_t>(static_cast<double>(device.device.memory_total_bytes) *
                                   kUnaccountedFractionOfTotal));
    // Without a separate reserved figure the driver's own share is inside "used".
    if (!device.device.reserved_reported) threshold *= 2;
    if (device.device.process_list_error.empty() && device.unaccounted_bytes > threshold) {
      report.findings.push_back(unaccounted_finding(device, threshold));
    }
  }

  std::stable_sort(report.findings.begin(), report.findings.end(),
                   [](const Finding& a, const Finding& b) {
                     return severity_rank(a.severity) < severity_rank(b.severity);
                   });
  report.sample = std::move(sample);
  return report;
}

}  // namespace gpuleak::monitor
