#include "analysis/processes/process_samples.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace gpuleak::analysis {

using nlohmann::json;

namespace {

// Fields of a line read back: the file is input, so a field of the wrong type
// reads as missing and the line may be skipped, never trusted blindly.
template <class T>
std::optional<T> number(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<T>();
}

std::string text(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::vector<int> int_list(const json& object, const char* key) {
  std::vector<int> out;
  auto it = object.find(key);
  if (it == object.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (v.is_number_integer()) out.push_back(v.get<int>());
  }
  return out;
}

bool read_sample(const json& line, ProcessSample& sample) {
  auto time = number<std::uint64_t>(line, "time_ns");
  if (!time) return false;
  sample.time_ns = *time;
  auto alive = line.find("alive");
  if (alive != line.end() && alive->is_array()) {
    for (const auto& entry : *alive) {
      if (!entry.is_array() || entry.size() != 3 || !entry[0].is_number_integer() ||
          !entry[1].is_string() || entry[1].get<std::string>().size() != 1 ||
          !entry[2].is_number_integer())
        return false;
      sample.alive.push_back(
          {entry[0].get<int>(), entry[1].get<std::string>()[0], entry[2].get<int>()});
    }
  }
  auto gpu = line.find("gpu");
  if (gpu != line.end() && gpu->is_array()) {
    for (const auto& entry : *gpu) {
      if (!entry.is_array() || entry.size() != 3 || !entry[0].is_number_integer() ||
          !entry[1].is_number_integer())
        return false;
      ObservedGpuUse use{entry[0].get<int>(), entry[1].get<int>(), std::nullopt};
      if (entry[2].is_number_unsigned()) use.used_bytes = entry[2].get<std::uint64_t>();
      sample.gpu.push_back(use);
    }
  }
  auto devices = line.find("devices");
  if (devices != line.end() && devices->is_array()) {
    for (const auto& entry : *devices) {
      if (!entry.is_array() || entry.size() != 3 || !entry[0].is_number_integer() ||
          !entry[1].is_number_unsigned() || !entry[2].is_number_unsigned())
        return false;
      sample.devices.push_back(
          {entry[0].get<int>(), entry[1].get<std::uint64_t>(), entry[2].get<std::uint64_t>()});
    }
  }
  sample.other_gpu_pids = int_list(line, "other_gpu_pids");
  return true;
}

}  // namespace

const ObservedProcess* JobObservations::process(int pid) const {
  // The latest process seen with this pid (a pid can be reused in a long job).
  for (auto it = processes.rbegin(); it != processes.rend(); ++it) {
    if (it->pid == pid) return &*it;
  }
  return nullptr;
}

namespace {

// Creates the file 0600 before the stream opens it: it names the job's
// processes and command lines, private to the user like the traces
// (docs/security.md).
const std::string& created_private(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  return path;
}

}  // namespace

ProcessSampleWriter::ProcessSampleWriter(const std::string& path)
    : out_(created_private(path), std::ios::trunc) {}

void ProcessSampleWriter::write_line(const std::string& line) {
  if (!out_) return;
  out_ << line << '\n';
  out_.flush();
}

void ProcessSampleWriter::write_job(int main_pid, std::uint64_t start_monotonic_ns,
                                    std::uint64_t start_unix_ns, bool nvml_available,
                                    const std::string& nvml_message) {
  write_line(json{{"record", "job"},
                  {"schema", kProcessSamplesSchema},
                  {"main_pid", main_pid},
                  {"start_monotonic_ns", start_monotonic_ns},
                  {"start_unix_ns", start_unix_ns},
                  {"nvml", {{"available", nvml_available}, {"message", nvml_message}}}}
                 .dump(-1, ' ', false, json::error_handler_t::replace));
}

void ProcessSampleWriter::write_process(const ObservedProcess& p) {
  write_line(json{{"record", "process"},
                  {"pid", p.pid},
                  {"start_ticks", p.start_ticks},
                  {"parent_pid", p.parent_pid},
                  {"comm", p.comm},
                  {"argv", p.argv},
                  {"first_seen_ns", p.first_seen_ns}}
                 .dump(-1, ' ', false, json::error_handler_t::replace));
}

void ProcessSampleWriter::write_sample(const ProcessSample& s) {
  json alive = json::array(), gpu = json::array(), devices = json::array();
  for (const auto& a : s.alive) alive.push_back({a.pid, std::string(1, a.state), a.parent_pid});
  for (const auto& g : s.gpu) {
    gpu.push_back({g.pid, g.device, g.used_bytes ? json(*g.used_bytes) : json(nullptr)});
  }
  for (const auto& d : s.devices) devices.push_back({d.device, d.used_bytes, d.total_bytes});
  write_line(json{{"record", "sample"},
                  {"time_ns", s.time_ns},
                  {"alive", alive},
                  {"gpu", gpu},
                  {"devices", devices},
                  {"other_gpu_pids", s.other_gpu_pids}}
                 .dump());
}

void ProcessSampleWriter::write_main_exit(std::uint64_t time_ns, int status) {
  write_line(json{{"record", "main_exit"}, {"time_ns", time_ns}, {"status", status}}.dump());
}

void ProcessSampleWriter::write_grace(std::uint64_t time_ns, double waited_s,
                                      const std::vector<int>& alive) {
  write_line(
      json{{"record", "grace"}, {"time_ns", time_ns}, {"waited_s", waited_s}, {"alive", alive}}
          .dump());
}

std::optional<JobObservations> read_process_samples(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  JobObservations job;
  bool have_job = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json value = json::parse(line, nullptr, false);
    if (!value.is_object()) {
      ++job.damaged_lines;
      continue;
    }
    std::string record = text(value, "record");
    bool ok = true;
    if (record == "job") {
      auto main_pid = number<int>(value, "main_pid");
      ok = main_pid.has_value() && text(value, "schema") == kProcessSamplesSchema;
      if (ok) {
        have_job = true;
        job.main_pid = *main_pid;
        job.start_monotonic_ns = number<std::uint64_t>(value, "start_monotonic_ns").value_or(0);
        job.start_unix_ns = number<std::uint64_t>(value, "start_unix_ns").value_or(0);
        auto nvml = value.find("nvml");
        if (nvml != value.end() && nvml->is_object()) {
          auto available = nvml->find("available");
          job.nvml_available =
              available != nvml->end() && available->is_boolean() && available->get<bool>();
          job.nvml_message = text(*nvml, "message");
        }
      }
    } else if (record == "process") {
      ObservedProcess p;
      auto pid = number<int>(value, "pid");
      ok = pid.has_value();
      if (ok) {
        p.pid = *pid;
        p.start_ticks = number<std::uint64_t>(value, "start_ticks").value_or(0);
        p.parent_pid = number<int>(value, "parent_pid").value_or(0);
        p.comm = text(value, "comm");
        p.first_seen_ns = number<std::uint64_t>(value, "first_seen_ns").value_or(0);
        auto argv = value.find("argv");
        if (argv != value.end() && argv->is_array()) {
          for (const auto& a : *argv) {
            if (a.is_string()) p.argv.push_back(a.get<std::string>());
          }
        }
        job.processes.push_back(std::move(p));
      }
    } else if (record == "sample") {
      ProcessSample sample;
      ok = read_sample(value, sample);
      if (ok && (job.samples.empty() || sample.time_ns >= job.samples.back().time_ns))
        job.samples.push_back(std::move(sample));
    } else if (record == "main_exit") {
      auto time = number<std::uint64_t>(value, "time_ns");
      ok = time.has_value();
      if (ok) {
        job.main_exit_ns = *time;
        job.main_exit_status = number<int>(value, "status").value_or(-1);
      }
    } else if (record == "grace") {
      auto time = number<std::uint64_t>(value, "time_ns");
      ok = time.has_value();
      if (ok) {
        job.grace_end_ns = *time;
        job.grace_waited_s = number<double>(value, "waited_s").value_or(0);
        job.alive_after_grace = int_list(value, "alive");
      }
    }
    // Unknown record types are for later versions: skipped, not damage.
    if (!ok) ++job.damaged_lines;
  }
  if (!have_job) return std::nullopt;
  return job;
}

}  // namespace gpuleak::analysis
