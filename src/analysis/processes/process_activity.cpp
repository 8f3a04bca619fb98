#include "analysis/processes/process_activity.h"

#include <nlohmann/json.hpp>

#include "analysis/model/annotation_fields.h"
#include "analysis/model/annotation_values.h"

namespace gpuleak::analysis {

namespace {

bool creates_context(trace::ContextAction action) {
  return action == trace::ContextAction::kCreated ||
         action == trace::ContextAction::kPrimaryRetained;
}

}  // namespace

double ProcessActivity::seconds(std::uint64_t time_ns) const {
  return time_ns > start_ns_ ? static_cast<double>(time_ns - start_ns_) / 1e9 : 0;
}

bool ProcessActivity::from_caching_allocator(std::uint32_t stack_id) {
  auto [it, inserted] = cache_origin_.try_emplace(stack_id, false);
  if (inserted && stack_id != 0) it->second = catalog_.origin(stack_id) == kCachingAllocatorOrigin;
  return it->second;
}

void ProcessActivity::consume(const trace::Record& record) {
  std::visit(
      [this](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, trace::ProcessRecord>) {
          pid_ = r.pid;
          start_ns_ = r.start_monotonic_ns;
        } else if constexpr (std::is_same_v<T, trace::ThreadRecord>) {
          if (r.thread_id == pid_ && pid_ != 0) main_thread_name_ = r.name;
        } else if constexpr (std::is_same_v<T, trace::ContextRecord>) {
          last_activity_ns_ = r.time_ns;
          if (!creates_context(r.action)) return;
          ++contexts_created_;
          if (!first_context_) first_context_ = FirstUse{r.time_ns, r.device, 0, true};
        } else if constexpr (std::is_same_v<T, trace::AnnotationRecord>) {
          if (r.key == "first_cuda_use") {
            // The collector's stack of the first context creation. Input from
            // the traced process: a field of the wrong type is ignored.
            nlohmann::json value = nlohmann::json::parse(r.value, nullptr, false);
            if (!value.is_object()) return;
            std::optional<std::uint32_t> id = optional_id_field(value, "stack_id");
            if (!id) return;
            if (!first_context_) first_context_ = FirstUse{r.time_ns, -1, 0, true};
            first_context_->stack_id = *id;
            auto device = value.find("device");
            if (device != value.end() && device->is_number_integer() && first_context_->device < 0)
              first_context_->device = device->get<std::int32_t>();
          } else if (r.key == "process_role") {
            role_ = read_process_role(r.value);
          } else if (r.key == "python_exit") {
            if (!python_exit_ns_) python_exit_ns_ = r.time_ns;
          }
        } else if constexpr (std::is_same_v<T, trace::ExitRecord>) {
          if (!exit_ns_) exit_ns_ = r.time_ns;
        }
      },
      record);
}

void ProcessActivity::on_alloc(const LiveAllocation& a, std::uint64_t time_ns) {
  last_activity_ns_ = time_ns;
  if (!first_alloc_) first_alloc_ = FirstUse{time_ns, a.device, a.stack_id, false};
  if (is_tensor_kind(a.kind)) tensor_bytes_ += a.size;
  if (occupies_device(a.kind)) {
    driver_bytes_ += a.size;
    if (from_caching_allocator(a.stack_id)) cache_bytes_ += a.size;
  }
  note_memory(time_ns);
}

void ProcessActivity::on_free(const LiveAllocation& a, std::uint64_t free_time_ns) {
  if (free_time_ns > last_activity_ns_.value_or(0)) last_activity_ns_ = free_time_ns;
  auto take = [](std::uint64_t& total, std::uint64_t size) {
    total = total > size ? total - size : 0;
  };
  if (is_tensor_kind(a.kind)) take(tensor_bytes_, a.size);
  if (occupies_device(a.kind)) {
    take(driver_bytes_, a.size);
    if (from_caching_allocator(a.stack_id)) take(cache_bytes_, a.size);
  }
  note_memory(last_activity_ns_.value_or(free_time_ns));
}

void ProcessActivity::note_memory(std::uint64_t time_ns) {
  // Within one spacing of the last point, the last point takes the newest
  // values: the series says what was held as of each of its times.
  if (!memory_times_ns_.empty() && time_ns < memory_times_ns_.back() + spacing_ns_) {
    DriverMemoryPoint& last = memory_.back();
    last.time_s = seconds(memory_times_ns_.back());
    last.cache_bytes = cache_bytes_;
    last.tensor_bytes = tensor_bytes_;
    last.driver_bytes = driver_bytes_;
    return;
  }
  DriverMemoryPoint point{seconds(time_ns), cache_bytes_, tensor_bytes_, driver_bytes_};
  if (memory_.size() == kMaxMemoryPoints) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < memory_.size(); i += 2, ++kept) {
      memory_[kept] = memory_[i];
      memory_times_ns_[kept] = memory_times_ns_[i];
    }
    memory_.resize(kept);
    memory_times_ns_.resize(kept);
    spacing_ns_ *= 2;
  }
  memory_.push_back(point);
  memory_times_ns_.push_back(time_ns);
}

ProcessCudaUse ProcessActivity::summary() {
  ProcessCudaUse use;
  std::optional<FirstUse> first = first_context_ ? first_context_ : first_alloc_;
  if (first) {
    CudaFirstUse f;
    f.time_s = seconds(first->time_ns);
    f.device = first->device;
    f.context_created = first->context;
    std::uint32_t stack = first->stack_id;
    // A context record without a stack: the first allocation's stack says
    // where the program was when it first needed the GPU.
    if (stack == 0 && first_alloc_) stack = first_alloc_->stack_id;
    if (stack != 0) {
      f.frames = catalog_.frames(stack);
      f.site = choose_site(f.frames);
    }
    use.first_use = std::move(f);
  }
  use.contexts_created = contexts_created_;
  if (last_activity_ns_) use.last_activity_s = seconds(*last_activity_ns_);
  if (python_exit_ns_) use.python_exit_s = seconds(*python_exit_ns_);
  if (exit_ns_) use.exit_s = seconds(*exit_ns_);
  use.main_thread_name = main_thread_name_;
  use.role = role_;
  use.memory = memory_;
  return use;
}

}  // namespace gpuleak::analysis
