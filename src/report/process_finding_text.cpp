#include "report/process_finding_text.h"

#include <fmt/format.h>

#include "quantity/units.h"
#include "report/text_words.h"

namespace gpuleak::report {

using quantity::format_bytes;
using quantity::format_duration_seconds;

using analysis::JobProcess;
using analysis::JobReport;
using analysis::ProcessFinding;
using analysis::RoleKind;

namespace {

std::string role_plural(RoleKind role, std::size_t n) {
  switch (role) {
    case RoleKind::kDataLoaderWorker:
      return plural(n, "DataLoader worker", "DataLoader workers");
    case RoleKind::kPoolWorker:
      return plural(n, "pool worker", "pool workers");
    case RoleKind::kMultiprocessingWorker:
      return plural(n, "multiprocessing worker", "multiprocessing workers");
    case RoleKind::kRank:
      return plural(n, "rank", "ranks");
    case RoleKind::kSubprocess:
      return plural(n, "subprocess", "subprocesses");
    case RoleKind::kForkedChild:
      return plural(n, "forked child", "forked children");
    default:
      return plural(n, "process", "processes");
  }
}

std::string group_name(const ProcessFinding& f, const JobReport& job) {
  std::string name = role_plural(f.role, f.pids.size());
  if (f.of_pid > 0) name += fmt::format(" of PID {}", f.of_pid);
  if (!f.host.empty() && job_has_several_hosts(job)) name += " on " + f.host;
  return name;
}

std::string pid_list(const std::vector<int>& pids) {
  std::string out;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (i == 12) {
      out += fmt::format(" and {} more", pids.size() - 12);
      break;
    }
    out += (i ? ", " : "") + std::to_string(pids[i]);
  }
  return out;
}

std::string memory_each(const ProcessFinding& f, const JobReport& job) {
  if (!f.memory_known) {
    return job.nvml_note.empty() ? std::string(" (their device memory is not known)")
                                 : " (" + job.nvml_note + ")";
  }
  if (f.pids.size() == 1) return ": " + format_bytes(f.bytes_total);
  return fmt::format(": {} each, {} in all", format_bytes(f.bytes_each),
                     format_bytes(f.bytes_total));
}

const JobProcess* find(const JobReport& job, const std::string& host, int pid) {
  for (const JobProcess& p : job.processes) {
    if (p.pid == pid && p.host == host) return &p;
  }
  return nullptr;
}

}  // namespace

bool job_has_several_hosts(const JobReport& job) {
  for (const JobProcess& p : job.processes) {
    if (p.host != job.processes.front().host) return true;
  }
  return false;
}

std::string process_name(const JobProcess& process, const JobReport& job) {
  std::string name = fmt::format("PID {}", process.pid);
  if (!process.host.empty() && job_has_several_hosts(job)) name += " on " + process.host;
  return name;
}

const char* finding_title(const std::string& kind) {
  if (kind == "worker_context") return "DataLoader workers with their own CUDA context";
  if (kind == "idle_worker_context") return "Idle pool workers holding a CUDA context";
  if (kind == "left_running") return "Children still running after the main program returned";
  if (kind == "orphan") return "Processes that outlived the job (orphans)";
  if (kind == "zombie") return "Unreaped processes (zombies)";
  return "Processes";
}

std::string first_use_text(const analysis::CudaFirstUse& use) {
  std::string where = use.site.label();
  if (where == "?") return "";
  if (!use.site.source_line.empty()) where += " `" + use.site.source_line + "`";
  if (!use.site.function.empty()) where += " (in " + use.site.function + ")";
  return where;
}

std::string process_memory_text(const JobProcess& p) {
  if (!p.cuda_initialized) return "never used CUDA";
  const analysis::DeviceMemoryView& m = p.device_memory;
  if (!p.gpu_work && m.peak_used_bytes == 0) return "initialized CUDA, no GPU memory";
  if (m.samples == 0) return "used the GPU (device memory not sampled)";
  std::string parts =
      fmt::format("CUDA context and modules {}", format_bytes(m.context_and_modules_bytes));
  if (m.allocator_reserved_bytes)
    parts += fmt::format(", PyTorch's cache {} (live tensors {})",
                         format_bytes(m.allocator_reserved_bytes), format_bytes(m.tensor_bytes));
  if (m.other_driver_bytes)
    parts += fmt::format(", other allocations {}", format_bytes(m.other_driver_bytes));
  if (m.unexplained_bytes)
    parts += fmt::format(", unexplained {}", format_bytes(m.unexplained_bytes));
  return fmt::format("peak {} ({})", format_bytes(m.peak_used_bytes), parts);
}

std::string finding_summary(const ProcessFinding& f, const JobReport& job) {
  std::size_t n = f.pids.size();
  if (f.kind == "worker_context") {
    std::string s = group_name(f, job) +
                    (n == 1 ? " created its own CUDA context" : " created their own CUDA context") +
                    memory_each(f, job);
    if (f.at_once > 1 && f.at_once < n) s += fmt::format(" ({} at a time)", f.at_once);
    return s;
  }
  if (f.kind == "idle_worker_context") {
    return group_name(f, job) + (n == 1 ? " held its" : " held their") +
           " CUDA context while idle" + memory_each(f, job) +
           fmt::format(", idle for {} after the last GPU work", format_duration_seconds(f.seconds));
  }
  if (f.kind == "left_running") {
    return group_name(f, job) + (n == 1 ? " was" : " were") +
           fmt::format(" still running {} after the main program returned",
                       format_duration_seconds(f.seconds)) +
           (f.memory_known ? fmt::format(", holding {}", format_bytes(f.bytes_total)) : "") +
           "; the job could not end before them";
  }
  if (f.kind == "orphan") {
    return group_name(f, job) + (n == 1 ? " is" : " are") +
           fmt::format(" still alive {} after the main program exited",
                       format_duration_seconds(job.grace_period_s)) +
           (f.memory_known ? fmt::format(", holding {}", format_bytes(f.bytes_total))
                           : ", holding a CUDA context") +
           ": end with `gpuleak doctor --kill-orphans`";
  }
  if (f.kind == "zombie") {
    return group_name(f, job) + " exited and stayed" +
           fmt::format(" unreaped (a zombie) for {}", format_duration_seconds(f.seconds)) +
           (f.bytes_total > 0 ? fmt::format(", still listed with {}", format_bytes(f.bytes_total))
                              : ", holding no GPU memory once it had exited");
  }
  return group_name(f, job);
}

std::vector<std::string> finding_details(const ProcessFinding& f, const JobReport& job) {
  std::vector<std::string> lines;
  if (f.first_use) {
    analysis::CudaFirstUse use;
    use.site = *f.first_use;
    std::string where = first_use_text(use);
    std::string in;
    if (f.first_use_in == "dataset") in = ", in the Dataset";
    if (f.first_use_in == "worker_init_fn") in = ", in worker_init_fn";
    if (f.first_use_in == "collate_fn") in = ", in collate_fn";
    if (!where.empty()) lines.push_back("CUDA first used at " + where + in);
  }
  for (int pid : f.pids) {
    const JobProcess* p = find(job, f.host, pid);
    if (!p) continue;
    std::string line = fmt::format("PID {}: {}", pid, p->role.text);
    if (p->cuda_initialized) line += "; " + process_memory_text(*p);
    lines.push_back(line);
    if (lines.size() == 9 && f.pids.size() > 8) {
      lines.push_back(fmt::format("... and {} more: {}", f.pids.size() - 8, pid_list(f.pids)));
      break;
    }
  }
  if (f.kind == "orphan") {
    lines.push_back(fmt::format("`kill {}` ends {} as well", pid_list(f.pids),
                                f.pids.size() == 1 ? "it" : "them"));
  }
  return lines;
}

}  // namespace gpuleak::report
