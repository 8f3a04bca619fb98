#include "analysis/growth/leak_cause.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis/growth/creating_calls.h"
#include "gpuleak/vocabulary.h"
#include "quantity/units.h"

namespace gpuleak::analysis {

using vocabulary::Cause;
using vocabulary::cause_slug;

namespace {

// Many tensor sites that grow by about the same count per step are the
// saved activations of one kept autograd graph.
bool many_sites_grow_together(const std::vector<SiteGrowth>& leaking) {
  std::size_t tensor_sites = std::count_if(leaking.begin(), leaking.end(),
                                           [](const SiteGrowth& s) { return s.tensor_level; });
  if (tensor_sites < 3) return false;
  double low = 1e300, high = 0;
  for (const SiteGrowth& s : leaking) {
    if (!s.tensor_level) continue;
    low = std::min(low, s.allocations_per_step);
    high = std::max(high, s.allocations_per_step);
  }
  return low >= 0.5 && high <= 3 * low;
}

// "solver.cu:42 (in step)" (Site::label with the function), or "" when the
// frame has neither file nor function.
std::string where_called(const Frame& f) {
  if (f.file.empty()) return f.function.empty() ? std::string() : "in " + f.function;
  Site at;
  at.function = f.function;
  at.file = f.file;
  at.line = f.line;
  return at.label() + (f.function.empty() ? "" : " (in " + f.function + ")");
}

// What the top site keeps per step, for a sentence: "4.00 MiB".
std::string bytes_per_step(const SiteGrowth& top) {
  return quantity::format_bytes(static_cast<std::uint64_t>(std::max(0.0, top.rate_bytes_per_step)));
}

// ", 3 cuBLAS handles a step of 32.0 MiB each": the site's allocations per
// step are the objects made, one allocation each at the creating call's site
// (an object that allocates twice there shows as two of half the size).
std::string objects_per_step(const SiteGrowth& top, const CreatingCall& call) {
  if (top.allocations_per_step < 0.5 || top.rate_bytes_per_step <= 0) return {};
  auto count = static_cast<std::uint64_t>(std::lround(top.allocations_per_step));
  auto each = static_cast<std::uint64_t>(top.rate_bytes_per_step / top.allocations_per_step);
  return fmt::format(" ({} {} {}{} a step, {} each)", count, call.library, call.object,
                     count == 1 ? "" : "s", quantity::format_bytes(each));
}

// The call as the program wrote it: the frame's own function (cufftPlan1d, not
// the family cufftPlan), without the ABI version suffix (cublasCreate_v2).
std::string called_name(const Frame& frame, std::string_view family) {
  std::string name = frame.function.substr(0, frame.function.find('('));
  auto version = name.rfind("_v");
  if (version != std::string::npos && version + 2 < name.size() &&
      name.find_first_not_of("0123456789", version + 2) == std::string::npos) {
    name.erase(version);
  }
  return name.starts_with(family) ? name : std::string(family);
}

// " at solver.cu:42 (in solve_one)", " in c10d::NCCLComm::create" (a frame
// without a source line), or "".
std::string where_suffix(const std::string& where) {
  if (where.empty()) return {};
  return where.starts_with("in ") ? " " + where : " at " + where;
}

LeakCause library_handle_cause(const SiteGrowth& top, const CreatingCallOnStack& found) {
  const CreatingCall& call = *found.call;
  std::string at;
  if (found.caller_frame) at = where_called(top.frames[*found.caller_frame]);
  std::string create = called_name(top.frames[found.call_frame], call.create);
  LeakCause c;
  c.cause = cause_slug(Cause::kLibraryHandlesNeverDestroyed);
  c.text = fmt::format(
      "a {} {} is made by {}{} and never destroyed with {}: the device memory it holds stays "
      "allocated, and {} more stay with every step{}",
      call.library, call.object, create, where_suffix(at), call.destroy, bytes_per_step(top),
      objects_per_step(top, call));
  c.fix = fmt::format(
      "make one {} {} and reuse it (they are meant to live as long as the program), or call {} "
      "on each one when done with it",
      call.library, call.object, call.destroy);
  return c;
}

LeakCause device_buffer_cause(const SiteGrowth& top) {
  AllocationCalls calls = allocation_calls(top.kind);
  std::string at;
  if (auto i = calling_frame(top.frames)) at = where_called(top.frames[*i]);
  LeakCause c;
  c.cause = cause_slug(Cause::kDeviceBuffersNeverFreed);
  c.text = fmt::format(
      "memory allocated with {}{} is not freed: every step leaves about {:.0f} more buffer(s) "
      "({}) allocated",
      calls.allocate, where_suffix(at), std::max(1.0, top.allocations_per_step),
      bytes_per_step(top));
  c.fix = fmt::format(
      "call {} on each buffer once the step is done with it, or allocate it once before the "
      "loop and reuse it",
      calls.release);
  return c;
}

// The allocation was asked for by native code of the program's own (a
// PyTorch C++/CUDA extension, a native library it loads), not by PyTorch,
// Python or a CUDA library: that code allocates and must free, so it gets
// CUDA's words even in a process that runs Python.
bool asked_by_native_code(const SiteGrowth& top) {
  std::optional<std::size_t> caller = calling_frame(top.frames);
  return caller && top.frames[*caller].language == Frame::Language::kNative;
}

}  // namespace

LeakCause leak_cause(const std::vector<SiteGrowth>& leaking, const HolderFinding* top_holder,
                     bool runs_python) {
  const SiteGrowth& top = leaking.front();
  bool holder_decides = top_holder && (top_holder->kind == "graph" || top_holder->kind == "tensor");
  if (!holder_decides) {
    if (auto found = find_creating_call(top.frames)) return library_handle_cause(top, *found);
    if (auto found = creating_call_of_kind(top.kind, top.frames))
      return library_handle_cause(top, *found);
    bool native_buffer = !runs_python || (!top.tensor_level && asked_by_native_code(top));
    if (native_buffer && top.site_id != kPoolSiteId) return device_buffer_cause(top);
  }
  LeakCause c;
  // The holder found decides between a graph and tensors; without one, many
  // sites growing together say a graph.
  if (!holder_decides && !top.tensor_level) {
    c.cause = cause_slug(Cause::kNonTensorDriverAllocations);
  } else if (holder_decides ? top_holder->kind == "graph" : many_sites_grow_together(leaking)) {
    c.cause = cause_slug(Cause::kAutogradGraphKeptAlive);
  } else {
    c.cause = cause_slug(Cause::kTensorsKeptAlive);
  }
  if (c.cause == cause_slug(Cause::kAutogradGraphKeptAlive)) {
    c.text =
        "an autograd graph is kept alive: a tensor that still has grad_fn is stored across "
        "steps, "
        "so every activation saved for its backward pass stays in memory";
    c.fix =
        "keep loss.item() or .detach() instead of the tensor, and run evaluation under "
        "torch.no_grad()";
  } else if (c.cause == cause_slug(Cause::kTensorsKeptAlive)) {
    c.text =
        "tensors are kept alive by a Python reference (a list, dict, attribute, global, cache, "
        "exception or hook) that grows every step";
    c.fix =
        "stop keeping the tensors (bound the container, store .item() or .cpu() copies, or clear "
        "it each step)";
  } else {
    c.text =
        "memory handed out by the CUDA driver outside PyTorch's allocator (an extension or "
        "library "
        "calling cudaMalloc) is never freed";
    c.fix = "free the buffers allocated at the frames shown, or reuse one buffer";
  }
  if (top_holder && !top_holder->fix.empty()) c.fix = top_holder->fix;
  return c;
}

}  // namespace gpuleak::analysis
