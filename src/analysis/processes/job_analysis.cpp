#include "analysis/processes/job_analysis.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <set>

#include "analysis/processes/process_roles.h"

namespace gpuleak::analysis {

namespace {

double seconds_between(std::uint64_t from_ns, std::uint64_t to_ns) {
  return to_ns >= from_ns ? static_cast<double>(to_ns - from_ns) / 1e9
                          : -static_cast<double>(from_ns - to_ns) / 1e9;
}

std::string join_argv(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

// Where in a DataLoader worker CUDA was first used, from the Python frames:
// the user's frame that torch's worker code called.
std::string first_use_in_worker(const std::vector<Frame>& frames) {
  // Frames are innermost first; find the outermost user frame above torch's.
  for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
    const Frame& caller = frames[i + 1];
    const Frame& callee = frames[i];
    if (callee.language != Frame::Language::kPython || callee.internal) continue;
    if (caller.language != Frame::Language::kPython || !caller.internal) continue;
    auto named = [&](const char* suffix) {
      const std::string& f = caller.function;
      return f.size() >= std::strlen(suffix) &&
             f.compare(f.size() - std::strlen(suffix), std::strlen(suffix), suffix) == 0;
    };
    if (named("_worker_loop")) return "worker_init_fn";
    // torch's fetcher: `fetch`, or the comprehension inside it (a frame of its own before 3.12).
    if (named("fetch") || named("fetch.<locals>.<listcomp>")) {
      const std::string& f = callee.function;
      bool dataset = f.find("__getitem__") != std::string::npos ||
                     f.find("__getitems__") != std::string::npos ||
                     f.find("__iter__") != std::string::npos ||
                     f.find("__next__") != std::string::npos;
      return dataset ? "dataset" : "collate_fn";
    }
  }
  return "";
}

std::uint64_t median(std::vector<std::uint64_t> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The most common first-use site among the processes (by label).
std::optional<Site> common_site(const std::vector<const JobProcess*>& processes) {
  std::map<std::string, std::pair<int, Site>> counts;
  for (const JobProcess* p : processes) {
    if (!p->first_use || p->first_use->site.label() == "?") continue;
    auto& entry = counts[p->first_use->site.label()];
    ++entry.first;
    entry.second = p->first_use->site;
  }
  if (counts.empty()) return std::nullopt;
  auto best = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
    return a.second.first < b.second.first;
  });
  return best->second.second;
}

// A process of the job: the host it ran on and its PID there. Processes of
// different hosts (a multi-node job's, or containers with their own PID
// namespaces) share PIDs; parents, workers and owners are on one host.
using ProcessKey = std::pair<std::string, int>;

ProcessKey key_of(const JobProcess& p) { return {p.host, p.pid}; }

struct Builder {
  const std::vector<ProcessReport>& reports;
  const std::optional<JobObservations>& observed;
  const JobAnalysisOptions& options;
  JobReport job;
  std::uint64_t start_ns = 0;
  // The host `gpuleak run`'s observations are of (processes.jsonl covers one
  // host); processes of other hosts have their traces only.
  std::string observed_host;
  std::map<ProcessKey, std::size_t> index_by_key;  // into job.processes
  // Per process: device memory (sum over devices) at each sample where the driver listed it.
  std::map<ProcessKey, std::vector<std::pair<std::uint64_t, std::uint64_t>>> used_by_key;

  bool is_observed(const JobProcess& p) const { return observed && p.host == observed_host; }
  bool is_main(const JobProcess& p) const {
    return p.pid == job.main_pid && p.host == job.main_host;
  }

  double job_time(std::uint64_t ns) const { return seconds_between(start_ns, ns); }

  // Seconds from the job's start to the start of the traced process.
  double process_offset(const ProcessReport& r) const {
    return seconds_between(start_ns, r.process.start_monotonic_ns);
  }

  JobProcess& process_for(const std::string& host, int pid) {
    auto it = index_by_key.find({host, pid});
    if (it != index_by_key.end()) return job.processes[it->second];
    index_by_key[{host, pid}] = job.processes.size();
    job.processes.push_back(JobProcess{});
    job.processes.back().host = host;
    job.processes.back().pid = pid;
    return job.processes.back();
  }

  void collect_processes() {
    if (observed) {
      for (const ObservedProcess& o : observed->processes) {
        JobProcess& p = process_for(observed_host, o.pid);
        p.parent_pid = o.parent_pid;
        p.command_line = join_argv(o.argv);
        if (p.command_line.empty()) p.command_line = "[" + o.comm + "]";
      }
    }
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const ProcessReport& r = reports[i];
      JobProcess& p = process_for(r.process.hostname, static_cast<int>(r.process.pid));
      p.report_index = static_cast<int>(i);
      p.cuda_initialized = true;
      p.gpu_work = did_gpu_work(r);
      if (p.parent_pid == 0) p.parent_pid = static_cast<int>(r.process.parent_pid);
      if (!r.process.command_line.empty()) p.command_line = r.process.command_line;
      if (r.cuda_use.first_use) {
        p.first_use = r.cuda_use.first_use;
        p.first_use->time_s += process_offset(r);
      }
    }
  }

  RoleEvidence evidence(const JobProcess& p) const {
    RoleEvidence e;
    e.pid = p.pid;
    e.parent_pid = p.parent_pid;
    if (is_observed(p)) {
      if (const ObservedProcess* o = observed->process(p.pid)) {
        e.comm = o->comm;
        e.argv = o->argv;
      }
    }
    if (p.report_index >= 0) {
      const ProcessReport& r = reports[static_cast<std::size_t>(p.report_index)];
      if (e.comm.empty()) e.comm = r.cuda_use.main_thread_name;
      if (e.argv.empty()) e.argv = split_command_line(r.process.command_line);
      e.role = r.cuda_use.role;
      e.distributed = r.distributed;
      if (r.cuda_use.first_use) e.frames = r.cuda_use.first_use->frames;
    }
    return e;
  }

  void assign_roles() {
    std::vector<RoleEvidence> all;
    all.reserve(job.processes.size());
    for (const JobProcess& p : job.processes) all.push_back(evidence(p));
    for (std::size_t i = 0; i < job.processes.size(); ++i) {
      const JobProcess& p = job.processes[i];
      const RoleEvidence* parent = nullptr;
      auto it = index_by_key.find({p.host, p.parent_pid});
      if (it != index_by_key.end()) parent = &all[it->second];
      // The main program is one process of one host; another host's process
      // with the same PID is not it.
      job.processes[i].role =
          classify_role(all[i], parent, p.host == job.main_host ? job.main_pid : 0);
    }
  }

  void follow_samples() {
    if (!observed) return;
    std::map<int, double> zombie_from;
    for (const ProcessSample& s : observed->samples) {
      double t = job_time(s.time_ns);
      std::set<int> zombies_now;
      for (const ObservedState& a : s.alive) {
        auto it = index_by_key.find({observed_host, a.pid});
        if (it == index_by_key.end()) continue;
        JobProcess& p = job.processes[it->second];
        if (a.state != 'Z') {
          if (!p.first_seen_s) p.first_seen_s = t;
          p.last_seen_s = t;
          continue;
        }
        zombies_now.insert(a.pid);
        if (!zombie_from.count(a.pid)) zombie_from[a.pid] = t;
        if (!p.zombie_since_s) p.zombie_since_s = t;
        p.zombie_seconds = std::max(p.zombie_seconds, t - zombie_from[a.pid]);
      }
      for (auto it = zombie_from.begin(); it != zombie_from.end();) {
        it = zombies_now.count(it->first) ? std::next(it) : zombie_from.erase(it);
      }
      std::map<int, std::uint64_t> used;
      for (const ObservedGpuUse& g : s.gpu) {
        if (g.used_bytes) used[g.pid] += *g.used_bytes;
      }
      for (const auto& [pid, bytes] : used) {
        used_by_key[{observed_host, pid}].emplace_back(s.time_ns, bytes);
      }
    }
    for (int pid : observed->alive_after_grace) {
      auto it = index_by_key.find({observed_host, pid});
      if (it != index_by_key.end()) job.processes[it->second].alive_at_end = true;
    }
  }

  // The trace's memory point at job time `t` (the last one at or before it).
  const DriverMemoryPoint* memory_at(const ProcessReport& r, double t) const {
    double local = t - process_offset(r) + 1e-9;
    const auto& memory = r.cuda_use.memory;
    auto after =
        std::upper_bound(memory.begin(), memory.end(), local,
                         [](double time, const DriverMemoryPoint& m) { return time < m.time_s; });
    return after == memory.begin() ? nullptr : &*std::prev(after);
  }

  void split_memory() {
    for (JobProcess& p : job.processes) {
      auto it = used_by_key.find(key_of(p));
      if (it == used_by_key.end()) continue;
      DeviceMemoryView& view = p.device_memory;
      const ProcessReport* r =
          p.report_index >= 0 ? &reports[static_cast<std::size_t>(p.report_index)] : nullptr;
      std::vector<std::uint64_t> residuals;  // after CUDA was first used
      std::uint64_t peak_residual = 0;
      for (const auto& [time_ns, used] : it->second) {
        double t = job_time(time_ns);
        view.time_s.push_back(t);
        view.used_bytes.push_back(used);
        ++view.samples;
        const DriverMemoryPoint* m = r ? memory_at(*r, t) : nullptr;
        std::uint64_t driver = m ? m->driver_bytes : 0;
        std::uint64_t residual = used > driver ? used - driver : 0;
        bool after_first_use = !p.first_use || t >= p.first_use->time_s;
        if (used > 0 && after_first_use) residuals.push_back(residual);
        if (used > view.peak_used_bytes) {
          view.peak_used_bytes = used;
          view.peak_time_s = t;
          peak_residual = residual;
          view.allocator_reserved_bytes = m ? m->cache_bytes : 0;
          view.tensor_bytes = m ? m->tensor_bytes : 0;
          view.other_driver_bytes =
              m && m->driver_bytes > m->cache_bytes ? m->driver_bytes - m->cache_bytes : 0;
        }
      }
      // The context's own cost: what the driver counts beyond every
      // allocation gpuleak saw, the median over the samples after CUDA was
      // first used. The driver's count and the trace are read at slightly
      // different moments, so a sample taken while the process allocates
      // fast is off by what it allocated in between (6 MiB seen in a test
      // of 1 MiB allocations); most samples fall where it does not.
      std::uint64_t context = peak_residual;
      if (!residuals.empty()) {
        auto middle = residuals.begin() + static_cast<std::ptrdiff_t>(residuals.size() / 2);
        std::nth_element(residuals.begin(), middle, residuals.end());
        context = std::min(*middle, peak_residual);
      }
      view.context_and_modules_bytes = context;
      view.unexplained_bytes = peak_residual - context;
    }
  }

  std::uint64_t known_bytes(const JobProcess& p) const { return p.device_memory.peak_used_bytes; }

  bool memory_known(const std::vector<const JobProcess*>& group) const {
    return std::all_of(group.begin(), group.end(),
                       [](const JobProcess* p) { return p->device_memory.samples > 0; });
  }

  // Most processes of the group alive in one sample.
  std::size_t at_once(const std::vector<const JobProcess*>& group) const {
    if (!observed) return 0;
    std::set<int> pids;
    for (const JobProcess* p : group) {
      if (is_observed(*p)) pids.insert(p->pid);
    }
    std::size_t most = 0;
    for (const ProcessSample& s : observed->samples) {
      std::size_t n = 0;
      for (const ObservedState& a : s.alive) n += pids.count(a.pid) && a.state != 'Z';
      most = std::max(most, n);
    }
    return most;
  }

  ProcessFinding group_finding(const std::string& kind,
                               const std::vector<const JobProcess*>& group) const {
    ProcessFinding f;
    f.kind = kind;
    std::vector<std::uint64_t> each;
    for (const JobProcess* p : group) {
      f.pids.push_back(p->pid);
      each.push_back(known_bytes(*p));
      f.bytes_total += known_bytes(*p);
    }
    if (!group.empty() && std::all_of(group.begin(), group.end(), [&](const JobProcess* p) {
          return p->host == group.front()->host;
        })) {
      f.host = group.front()->host;
    }
    f.bytes_each = median(each);
    f.memory_known = memory_known(group);
    f.first_use = common_site(group);
    if (!group.empty()) {
      f.role = group.front()->role.kind;
      f.of_pid = group.front()->role.of_pid;
      for (const JobProcess* p : group) {
        if (p->role.kind != f.role) f.role = RoleKind::kUnknown;
        if (p->role.of_pid != f.of_pid) f.of_pid = 0;
      }
    }
    f.at_once = at_once(group);
    return f;
  }

  // Whether the process held GPU memory in the driver's eyes at job time `t`
  // (the nearest sample at or before it); without per-process figures, whether
  // it had a context and had not begun to exit.
  bool holding_at(const JobProcess& p, double t) const {
    auto it = used_by_key.find(key_of(p));
    if (it != used_by_key.end()) {
      std::uint64_t last = 0;
      bool any = false;
      for (const auto& [time_ns, used] : it->second) {
        if (job_time(time_ns) > t + 1e-9) break;
        last = used;
        any = true;
      }
      if (any) return last > 0;
    }
    // The driver listed some of the job's processes but not this one: it holds
    // nothing. When it listed none (no NVML, or PIDs of another namespace),
    // a process that did GPU work is taken to hold its context.
    if (is_observed(p) && !used_by_key.empty() && it == used_by_key.end()) return false;
    return p.gpu_work;
  }

  void worker_context_findings() {
    std::map<ProcessKey, std::vector<const JobProcess*>> by_owner;
    for (const JobProcess& p : job.processes) {
      if (p.role.kind != RoleKind::kDataLoaderWorker) continue;
      if (!p.gpu_work && p.device_memory.peak_used_bytes == 0) continue;
      by_owner[{p.host, p.role.of_pid}].push_back(&p);
    }
    for (const auto& [owner, group] : by_owner) {
      ProcessFinding f = group_finding("worker_context", group);
      std::map<std::string, int> where;
      for (const JobProcess* p : group) {
        if (p->first_use) ++where[first_use_in_worker(p->first_use->frames)];
      }
      if (!where.empty()) {
        f.first_use_in =
            std::max_element(where.begin(), where.end(), [](const auto& a, const auto& b) {
              return a.second < b.second;
            })->first;
      }
      if (f.first_use_in == "worker_init_fn") {
        f.fix =
            "make worker_init_fn CUDA-free: give the workers what they need (rank, world size, "
            "seeds) as plain values or environment variables, and leave torch.cuda.set_device and "
            "process-group setup to the training process";
      } else if (f.first_use_in == "collate_fn") {
        f.fix =
            "collate on the CPU and move each batch to the GPU in the training loop "
            "(DataLoader(pin_memory=True) and .cuda(non_blocking=True))";
      } else {
        f.fix =
            "keep the Dataset on the CPU: return CPU tensors from the Dataset and move each batch "
            "to the GPU in the training loop (DataLoader(pin_memory=True) and "
            ".cuda(non_blocking=True))";
      }
      job.findings.push_back(std::move(f));
    }
  }

  // When the process ended, in job time, as far as anyone saw.
  std::optional<double> end_of(const JobProcess& p) const {
    std::optional<double> end;
    if (p.report_index >= 0) {
      const ProcessReport& r = reports[static_cast<std::size_t>(p.report_index)];
      if (r.cuda_use.exit_s) end = *r.cuda_use.exit_s + process_offset(r);
    }
    if (p.last_seen_s && (!end || *p.last_seen_s > *end)) end = p.last_seen_s;
    return end;
  }

  void idle_worker_findings() {
    std::map<ProcessKey, std::vector<const JobProcess*>> by_owner;
    std::map<ProcessKey, double> idle_of;
    for (const JobProcess& p : job.processes) {
      if (p.role.kind != RoleKind::kPoolWorker || !p.gpu_work || p.report_index < 0) continue;
      const ProcessReport& r = reports[static_cast<std::size_t>(p.report_index)];
      if (!r.cuda_use.last_activity_s) continue;
      double last = *r.cuda_use.last_activity_s + process_offset(r);
      std::optional<double> end = end_of(p);
      if (!end) end = job.duration_s;
      double idle = *end - last;
      if (idle < options.idle_worker_seconds) continue;
      by_owner[{p.host, p.role.of_pid}].push_back(&p);
      idle_of[key_of(p)] = idle;
    }
    for (const auto& [owner, group] : by_owner) {
      ProcessFinding f = group_finding("idle_worker_context", group);
      std::vector<std::uint64_t> idle_ms;
      for (const JobProcess* p : group)
        idle_ms.push_back(static_cast<std::uint64_t>(idle_of[key_of(*p)] * 1000));
      f.seconds = static_cast<double>(median(idle_ms)) / 1000;
      f.fix =
          "let each worker end after its task (Pool(maxtasksperchild=1), "
          "ProcessPoolExecutor(max_tasks_per_child=1)), close the pool as soon as the GPU work is "
          "done (with Pool(...) as pool:, or pool.close(); pool.join()), or do the GPU work in "
          "one process";
      job.findings.push_back(std::move(f));
    }
  }

  const JobProcess* main_process() const {
    auto it = index_by_key.find({job.main_host, job.main_pid});
    return it == index_by_key.end() ? nullptr : &job.processes[it->second];
  }

  // The main program's code returned: Python's atexit began (the package
  // marks it), or, for other programs, the process began to exit.
  std::optional<double> main_returned_s() const {
    const JobProcess* main = main_process();
    if (!main || main->report_index < 0) return std::nullopt;
    const ProcessReport& r = reports[static_cast<std::size_t>(main->report_index)];
    if (r.cuda_use.python_exit_s) return *r.cuda_use.python_exit_s + process_offset(r);
    if (r.cuda_use.exit_s) return *r.cuda_use.exit_s + process_offset(r);
    return std::nullopt;
  }

  static bool is_helper(const JobProcess& p) {
    return p.role.kind == RoleKind::kMultiprocessingHelper || p.role.kind == RoleKind::kMain;
  }

  void orphan_findings() {
    if (!observed || !job.main_exit_s) return;
    std::vector<const JobProcess*> holding;
    std::vector<const JobProcess*> idle_alive;
    for (const JobProcess& p : job.processes) {
      if (!p.alive_at_end || is_helper(p)) continue;
      if (holding_at(p, job.duration_s)) {
        holding.push_back(&p);
      } else {
        idle_alive.push_back(&p);
      }
    }
    if (!holding.empty()) {
      ProcessFinding f = group_finding("orphan", holding);
      f.seconds = job.grace_period_s;
      f.fix =
          "end them (`gpuleak doctor --kill-orphans` asks first; or kill the PIDs); to prevent "
          "it, make the program stop and join its children on every exit path (a signal "
          "handler or try/finally around the job), or run the job under a supervisor that "
          "ends its whole process group";
      job.findings.push_back(std::move(f));
    }
    if (!idle_alive.empty()) {
      std::string pids;
      for (const JobProcess* p : idle_alive) {
        pids += (pids.empty() ? "" : ", ") + std::to_string(p->pid);
      }
      job.notes.push_back("still alive after the main program exited, holding no GPU memory: PID " +
                          pids);
    }
  }

  void left_running_findings() {
    std::optional<double> returned = main_returned_s();
    if (!observed || !returned) return;
    std::vector<const JobProcess*> group;
    std::map<ProcessKey, double> running_for;
    for (const JobProcess& p : job.processes) {
      if (is_helper(p) || p.alive_at_end || !p.last_seen_s) continue;
      // DataLoader and pool workers are daemons that their owners end at exit
      // (a worker's own exit can take a moment): not children left running.
      if (p.role.kind == RoleKind::kDataLoaderWorker || p.role.kind == RoleKind::kPoolWorker)
        continue;
      double after = *p.last_seen_s - *returned;
      if (after < options.left_running_seconds) continue;
      if (!holding_at(p, *returned + options.left_running_seconds)) continue;
      group.push_back(&p);
      running_for[key_of(p)] = after;
    }
    if (group.empty()) return;
    ProcessFinding f = group_finding("left_running", group);
    for (const JobProcess* p : group) f.seconds = std::max(f.seconds, running_for[key_of(*p)]);
    f.fix =
        "tell the child to stop and join() it before the program returns (or create it with "
        "daemon=True, which multiprocessing terminates at exit); multiprocessing joins every "
        "non-daemon child at exit, so the job ends only when the child does";
    job.findings.push_back(std::move(f));
  }

  void zombie_findings() {
    std::vector<const JobProcess*> group;
    for (const JobProcess& p : job.processes) {
      if (p.zombie_seconds >= options.zombie_seconds) group.push_back(&p);
    }
    if (group.empty()) return;
    ProcessFinding f = group_finding("zombie", group);
    // A zombie holds what the driver still lists for it, which is nothing once
    // its context is gone: its memory is the figure while a zombie.
    f.bytes_total = 0;
    std::vector<std::uint64_t> each;
    for (const JobProcess* p : group) {
      f.seconds = std::max(f.seconds, p->zombie_seconds);
      std::uint64_t held = 0;
      auto it = used_by_key.find(key_of(*p));
      if (it != used_by_key.end() && p->zombie_since_s) {
        for (const auto& [time_ns, used] : it->second) {
          if (job_time(time_ns) >= *p->zombie_since_s) held = std::max(held, used);
        }
      }
      each.push_back(held);
      f.bytes_total += held;
    }
    f.bytes_each = median(each);
    f.fix =
        "reap the child when it ends: join() it (multiprocessing), wait() it (subprocess), or "
        "handle SIGCHLD; a parent that does not reap its children also misses their crashes";
    job.findings.push_back(std::move(f));
  }

  void order_processes() {
    std::stable_sort(
        job.processes.begin(), job.processes.end(),
        [this](const JobProcess& a, const JobProcess& b) {
          bool am = is_main(a), bm = is_main(b);
          if (am != bm) return am;
          double sa = a.first_seen_s.value_or(a.first_use ? a.first_use->time_s : 1e18);
          double sb = b.first_seen_s.value_or(b.first_use ? b.first_use->time_s : 1e18);
          if (sa != sb) return sa < sb;
          return key_of(a) < key_of(b);
        });
  }

  const ProcessReport* guess_main() const {
    // Without run's record: the earliest traced process whose parent (on its host) is not traced.
    std::set<std::pair<std::string, std::uint32_t>> traced;
    for (const auto& r : reports) traced.insert({r.process.hostname, r.process.pid});
    const ProcessReport* best = nullptr;
    for (const auto& r : reports) {
      if (traced.count({r.process.hostname, r.process.parent_pid})) continue;
      if (!best || r.process.start_monotonic_ns < best->process.start_monotonic_ns) best = &r;
    }
    return best;
  }

  // The host processes.jsonl describes: the host of the traces beside it, as
  // its reader's caller says, else the host of the traced main program (or of
  // the only traces there are).
  std::string host_of_observations() const {
    if (!observed->host.empty()) return observed->host;
    for (const auto& r : reports) {
      if (static_cast<int>(r.process.pid) == observed->main_pid) return r.process.hostname;
    }
    return reports.empty() ? std::string() : reports.front().process.hostname;
  }

  void run() {
    if (observed) {
      job.observed = true;
      observed_host = host_of_observations();
      job.main_pid = observed->main_pid;
      job.main_host = observed_host;
      start_ns = observed->start_monotonic_ns;
      if (!observed->nvml_available) {
        job.nvml_note = "per-process device memory is not known: " +
                        (observed->nvml_message.empty() ? std::string("NVML is not available")
                                                        : observed->nvml_message);
      }
    } else {
      if (const ProcessReport* main = guess_main()) {
        job.main_pid = static_cast<int>(main->process.pid);
        job.main_host = main->process.hostname;
      }
      job.nvml_note =
          "no process samples of `gpuleak run` (processes.jsonl) beside the traces: roles come "
          "from the traces alone; per-process device memory, zombies, orphans and children left "
          "running are not known";
    }
    if (start_ns == 0) {
      for (const auto& r : reports) {
        if (start_ns == 0 || r.process.start_monotonic_ns < start_ns)
          start_ns = r.process.start_monotonic_ns;
      }
    }
    collect_processes();
    assign_roles();
    follow_samples();
    // The job's length: the last thing anyone saw.
    for (const auto& r : reports) {
      job.duration_s = std::max(job.duration_s, process_offset(r) + r.duration_s);
    }
    if (observed) {
      if (!observed->samples.empty())
        job.duration_s = std::max(job.duration_s, job_time(observed->samples.back().time_ns));
      if (observed->main_exit_ns) {
        job.main_exit_s = job_time(*observed->main_exit_ns);
        job.main_exit_status = observed->main_exit_status;
      }
      job.grace_period_s = observed->grace_waited_s;
      if (observed->grace_end_ns)
        job.duration_s = std::max(job.duration_s, job_time(*observed->grace_end_ns));
      bool foreign = std::any_of(observed->samples.begin(), observed->samples.end(),
                                 [](const ProcessSample& s) { return !s.other_gpu_pids.empty(); });
      if (foreign && used_by_key.empty() && observed->nvml_available) {
        job.nvml_note =
            "the driver lists GPU memory only under PIDs that are not this job's (another PID "
            "namespace, or a sandbox that opens the GPU on its processes' behalf): per-process "
            "device memory is not known";
      }
    }
    split_memory();
    worker_context_findings();
    idle_worker_findings();
    orphan_findings();
    left_running_findings();
    zombie_findings();
    order_processes();
  }
};

}  // namespace

JobReport analyze_job(const std::vector<ProcessReport>& reports,
                      const std::optional<JobObservations>& observed,
                      const JobAnalysisOptions& options) {
  Builder builder{reports, observed, options, {}, 0, {}, {}, {}};
  builder.run();
  return std::move(builder.job);
}

bool has_process_findings(const JobReport& job) { return !job.findings.empty(); }

}  // namespace gpuleak::analysis
