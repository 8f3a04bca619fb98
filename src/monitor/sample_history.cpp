#include "monitor/sample_history.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <map>

#include "monitor/process_tree.h"

namespace gpuleak::monitor {

namespace {

std::string identity_key(const ProcessInfo& info, bool visible) {
  return visible ? fmt::format("{}@{}", info.pid, info.start_ticks)
                 : fmt::format("{}@elsewhere", info.pid);
}

std::uint64_t free_bytes(const GpuDevice& device) {
  std::uint64_t taken = device.memory_used_bytes + device.memory_reserved_bytes;
  return taken >= device.memory_total_bytes ? 0 : device.memory_total_bytes - taken;
}

}  // namespace

SampleHistory::SampleHistory(Options options)
    : options_(std::move(options)), tracker_(options_.trend) {}

Sample SampleHistory::add(const RawSample& raw) {
  Sample sample;
  sample.index = next_index_++;
  if (sample.index == 0) first_time_s_ = raw.monotonic_s;
  sample.unix_time_ms = raw.unix_time_ms;
  sample.elapsed_s = raw.monotonic_s - first_time_s_;
  sample.nvml = raw.nvml;
  sample.host = raw.host;
  sample.device_file_glob = raw.device_file_glob;
  const double now = raw.monotonic_s;

  sample.notes = raw.notes;
  // When NVML is missing altogether the renderers say so in their GPU line;
  // a read error of a working NVML is a partial problem worth a note.
  if (raw.nvml.available && !raw.nvml.message.empty()) {
    sample.notes.push_back(raw.nvml.message);
  }

  std::map<unsigned, std::uint64_t> device_free;
  std::map<unsigned, std::string> device_uuid;
  for (const auto& device : raw.devices) {
    DeviceView view;
    view.device = device;
    for (const auto& process : device.processes) {
      view.accounted_bytes += process.memory_bytes.value_or(0);
    }
    view.unaccounted_bytes = device.memory_used_bytes > view.accounted_bytes
                                 ? device.memory_used_bytes - view.accounted_bytes
                                 : 0;
    std::string key = "device " + device.uuid;
    tracker_.add(key, now, static_cast<double>(device.memory_used_bytes));
    view.used = tracker_.trend(key, static_cast<double>(free_bytes(device)));
    device_free[device.index] = free_bytes(device);
    device_uuid[device.index] = device.uuid;
    if (!device.process_list_error.empty()) {
      sample.notes.push_back(fmt::format("GPU {}: cannot list its processes ({})", device.index,
                                         device.process_list_error));
    }
    sample.devices.push_back(std::move(view));
  }

  // Which processes to show.
  const ProcessTable& table = raw.table;
  ProcessTree tree(table);
  auto gpu_use = raw.gpu_use_by_pid();
  std::set<int> chosen;
  for (const auto& [pid, uses] : gpu_use) chosen.insert(pid);
  for (const auto& [pid, info] : table.processes) {
    if (info.holds_device_handles() && pid != raw.own_pid) chosen.insert(pid);
  }
  std::set<int> holders = chosen;
  for (int pid : holders) {
    for (int child : tree.children(pid)) {
      const ProcessInfo* info = table.find(child);
      if (info && info->is_zombie()) chosen.insert(child);
    }
  }
  for (int pid : options_.watch_pids) {
    if (table.find(pid)) {
      chosen.insert(pid);
    } else {
      sample.notes.push_back(fmt::format("PID {} (asked for with --pid) does not exist", pid));
    }
  }

  for (int pid : chosen) {
    ProcessView view;
    view.pid = pid;
    const ProcessInfo* info = table.find(pid);
    view.visible = info != nullptr;
    if (info) {
      view.info = *info;
      view.user = users_.name(info->uid);
      view.relation = tree.relation(pid);
      view.orphan = tree.assess_orphan(pid);
    } else {
      view.info.pid = pid;
      view.user = std::string(1, '?');  // not = "?": GCC 12 warns falsely (-Wrestrict)
    }
    view.watched = options_.watch_pids.count(pid) > 0;
    const std::string identity = identity_key(view.info, view.visible);

    auto uses = gpu_use.find(pid);
    std::optional<double> earliest_full_s;
    std::optional<std::uint64_t> least_free;
    if (uses != gpu_use.end()) {
      for (const auto& use : uses->second) {
        ProcessDeviceView device_view;
        device_view.device_index = use.device_index;
        device_view.device_uuid = device_uuid[use.device_index];
        device_view.memory_bytes = use.memory_bytes;
        std::uint64_t headroom = device_free[use.device_index];
        if (!least_free || headroom < *least_free) least_free = headroom;
        if (use.memory_bytes) {
          std::string key = fmt::format("gpu {} {}", identity, device_view.device_uuid);
          tracker_.add(key, now, static_cast<double>(*use.memory_bytes));
          device_view.trend = tracker_.trend(key, static_cast<double>(headroom));
          view.gpu_memory_bytes = view.gpu_memory_bytes.value_or(0) + *use.memory_bytes;
          if (device_view.trend.seconds_until_full &&
              (!earliest_full_s || *device_view.trend.seconds_until_full < *earliest_full_s)) {
            earliest_full_s = device_view.trend.seconds_until_full;
          }
        }
        view.gpu.push_back(std::move(device_view));
      }
    }
    if (view.gpu_memory_bytes) {
      std::string key = "gpu-total " + identity;
      tracker_.add(key, now, static_cast<double>(*view.gpu_memory_bytes));
      std::optional<double> headroom;
      if (least_free) headroom = static_cast<double>(*least_free);
      view.gpu_trend = tracker_.trend(key, headroom);
      if (earliest_full_s) view.gpu_trend.seconds_until_full = earliest_full_s;
    }
    if (view.visible && !view.info.is_zombie()) {
      std::string key = "rss " + identity;
      tracker_.add(key, now, static_cast<double>(view.info.rss_bytes));
      std::optional<double> headroom;
      if (raw.host.known) headroom = static_cast<double>(raw.host.available_bytes);
      view.rss_trend = tracker_.trend(key, headroom);
    }
    sample.processes.push_back(std::move(view));
  }
  tracker_.end_round();

  std::stable_sort(sample.processes.begin(), sample.processes.end(),
                   [](const ProcessView& a, const ProcessView& b) {
                     std::uint64_t ga = a.gpu_memory_bytes.value_or(0);
                     std::uint64_t gb = b.gpu_memory_bytes.value_or(0);
                     if (ga != gb) return ga > gb;
                     if (a.info.device_handle_count != b.info.device_handle_count) {
                       return a.info.device_handle_count > b.info.device_handle_count;
                     }
                     return a.pid < b.pid;
                   });

  if (table.handle_scans_denied > 0) {
    std::vector<std::string> owners;
    for (uid_t uid : table.denied_owners) owners.push_back(users_.name(uid));
    sample.notes.push_back(fmt::format(
        "could not read the open files of {} processes owned by other users ({}); their GPU "
        "device handles are not shown (run as root to see them)",
        table.handle_scans_denied, fmt::join(owners, ", ")));
  }
  return sample;
}

}  // namespace gpuleak::monitor
