#include "analysis/model/annotation_values.h"

#include <nlohmann/json.hpp>

#include "analysis/model/annotation_fields.h"

namespace gpuleak::analysis {

namespace {

using nlohmann::json;

// The annotation's JSON when it is an object; nothing otherwise (not JSON,
// or another kind of value).
std::optional<json> object_of(const std::string& value) {
  json parsed = json::parse(value, nullptr, false);
  if (!parsed.is_object()) return std::nullopt;
  return parsed;
}

// The object under `key`, or nothing when it is missing or not an object.
const json* member_object(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? &*it : nullptr;
}

}  // namespace

std::optional<TorchTracking> read_torch_tracking(const std::string& value) {
  auto object = object_of(value);
  if (!object) return std::nullopt;
  TorchTracking t;
  t.mode = optional_text_field(*object, "mode");
  t.alloc_conf = optional_text_field(*object, "alloc_conf");
  t.torch = optional_text_field(*object, "torch");
  t.hook_error = optional_text_field(*object, "hook_error");
  return t;
}

std::optional<EventClock> read_event_clock(const std::string& value) {
  auto object = object_of(value);
  if (!object) return std::nullopt;
  EventClock c;
  c.clock = optional_text_field(*object, "clock");
  c.resolution_ns = optional_count_field(*object, "resolution_ns");
  c.monotonic_read_ns = optional_number_field(*object, "monotonic_read_ns");
  return c;
}

std::optional<DistributedRank> read_distributed_rank(const std::string& value) {
  auto object = object_of(value);
  if (!object) return std::nullopt;
  DistributedRank d;
  d.rank = optional_integer_field(*object, "rank");
  d.local_rank = optional_integer_field(*object, "local_rank");
  d.world_size = optional_integer_field(*object, "world_size");
  d.launcher = optional_text_field(*object, "launcher");
  return d;
}

std::optional<CaptureBackend> read_capture_backend(const std::string& value) {
  auto object = object_of(value);
  if (!object) return std::nullopt;
  CaptureBackend b;
  b.name = optional_text_field(*object, "name");
  b.reason = optional_text_field(*object, "reason");
  b.interposer_loaded = optional_flag_field(*object, "interposer_loaded");
  b.interposer_loaded_before_driver =
      optional_flag_field(*object, "interposer_loaded_before_driver");
  b.start_requests = optional_count_field(*object, "start_requests");
  b.reentrant_start_requests = optional_count_field(*object, "reentrant_start_requests");
  return b;
}

std::optional<FrameworkTracking> read_framework_tracking(const std::string& value) {
  auto object = object_of(value);
  if (!object) return std::nullopt;
  FrameworkTracking f;
  f.framework = optional_text_field(*object, "framework");
  f.mode = optional_text_field(*object, "mode");
  f.hidden_allocations = optional_flag_field(*object, "hidden_allocations");
  f.device_memory_holds_arrays = optional_flag_field(*object, "device_memory_holds_arrays");
  f.version = optional_text_field(*object, "version");
  f.how_to_see = optional_text_field(*object, "how_to_see");
  f.mem_fraction = optional_text_field(*object, "mem_fraction");
  return f;
}

std::optional<PythonLoopAnnotation> read_python_loop(const std::string& value) {
  auto object = object_of(value);
  if (!object) return std::nullopt;
  PythonLoopAnnotation p;
  p.available = optional_flag_field(*object, "available");
  p.reason = optional_text_field(*object, "reason");
  p.script = optional_text_field(*object, "script");
  p.tool_id = optional_integer_field(*object, "tool_id");
  p.code_objects = optional_integer_field(*object, "code_objects");
  return p;
}

void read_attach_event(const std::string& value, std::optional<AttachSession>& session) {
  auto object = object_of(value);
  if (!object) return;
  if (!session) session = AttachSession{};
  std::optional<std::string> event = optional_text_field(*object, "event");
  if (event == "begin") {
    if (const json* baseline = member_object(*object, "baseline"))
      session->baseline_torch_allocated_bytes =
          optional_integer_field(*baseline, "torch_allocated_bytes");
  } else if (event == "end") {
    session->detached = true;
    session->end_reason = optional_text_field(*object, "reason");
    session->steps = optional_integer_field(*object, "steps");
  }
}

std::optional<ProcessRoleAnnotation> read_process_role(const std::string& value) {
  auto object = object_of(value);
  if (!object) return std::nullopt;
  ProcessRoleAnnotation role;
  if (const json* worker = member_object(*object, "dataloader_worker")) {
    role.dataloader_worker = ProcessRoleAnnotation::DataLoaderWorker{
        optional_integer_field(*worker, "id"), optional_integer_field(*worker, "num_workers")};
  }
  if (const json* mp = member_object(*object, "multiprocessing")) {
    role.multiprocessing = ProcessRoleAnnotation::Multiprocessing{
        optional_text_field(*mp, "name"), optional_integer_field(*mp, "parent_pid"),
        optional_text_field(*mp, "start_method")};
  }
  return role;
}

}  // namespace gpuleak::analysis
