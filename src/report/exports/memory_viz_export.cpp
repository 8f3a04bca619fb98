// The memory_viz export: the snapshot pickle PyTorch's memory visualizer
// reads (torch.cuda._memory_viz, pytorch.org/memory_viz), made from
// gpuleak's trace for any program, PyTorch or not.
//
// The shape follows what torch.cuda.memory._snapshot() returns:
//   {'segments': [segment...], 'device_traces': [[event...] per device],
//    'gpuleak': {what this file holds and leaves out}}
// A segment is memory the driver handed out; its blocks tile it exactly
// (gaps are 'inactive' blocks, as PyTorch's own snapshots have), each with
// the frames of the call that made it, innermost first. In a PyTorch
// process the segments are the caching allocator's and the blocks its
// tensors; elsewhere each driver allocation is a segment of one block.
// Blocks carry both `frames`/`requested_size` (PyTorch 2.x) and a one-entry
// `history` (PyTorch 1.13, whose functions take the segment list itself).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/model/live_set.h"
#include "analysis/model/stack_catalog.h"
#include "report/exports/pickle_writer.h"
#include "report/exports/writers.h"

namespace gpuleak::report {

using analysis::AllocationEvent;
using analysis::ExportDetail;
using analysis::Frame;
using analysis::LiveBlock;
using trace::MemoryKind;

namespace {

// The frames of each stack are written once and referenced after that.
class FrameLists {
 public:
  explicit FrameLists(const ExportDetail& d) : d_(d) {}
  void write(PickleWriter& p, std::uint32_t stack_id) {
    auto memo = memo_.find(stack_id);
    if (memo != memo_.end()) {
      p.memo_get(memo->second);
      return;
    }
    p.begin_list();
    auto it = d_.frames.find(stack_id);
    if (it != d_.frames.end()) {
      for (const Frame& f : it->second) {
        if (f.plumbing) continue;
        p.begin_dict();
        p.key("filename");
        p.string(!f.file.empty() ? f.file : f.module.empty() ? "??" : f.module);
        p.key("line");
        p.integer(f.line);
        p.key("name");
        p.string(!f.function.empty() ? f.function : fmt::format("0x{:x}", f.address));
        p.end_dict();
      }
    }
    p.end_list();
    auto index = static_cast<std::uint32_t>(memo_.size());
    p.memo_put(index);
    memo_.emplace(stack_id, index);
  }

 private:
  const ExportDetail& d_;
  std::map<std::uint32_t, std::uint32_t> memo_;
};

void write_block(PickleWriter& p, FrameLists& frames, std::uint64_t address, std::uint64_t size,
                 const char* state, std::optional<std::uint32_t> stack_id) {
  p.begin_dict();
  p.key("address");
  p.unsigned_integer(address);
  p.key("size");
  p.unsigned_integer(size);
  p.key("requested_size");
  p.unsigned_integer(stack_id ? size : 0);
  p.key("state");
  p.string(state);
  if (stack_id) {
    p.key("frames");
    frames.write(p, *stack_id);
    p.key("history");
    p.begin_list();
    p.begin_dict();
    p.key("addr");
    p.unsigned_integer(address);
    p.key("real_size");
    p.unsigned_integer(size);
    p.key("frames");
    frames.write(p, *stack_id);
    p.end_dict();
    p.end_list();
  } else {
    p.key("frames");
    p.begin_list();
    p.end_list();
  }
  p.end_dict();
}

struct Segment {
  std::uint64_t address = 0, size = 0;
  std::int32_t device = -1;
  std::optional<std::uint32_t> stack_id;  // the segment's own allocation, when it was seen
  std::vector<const LiveBlock*> blocks;   // tensors inside it, address order
};

bool is_cache_segment(const ExportDetail& d, const LiveBlock& b) {
  if (analysis::is_tensor_kind(b.kind) || !analysis::occupies_device(b.kind)) return false;
  auto it = d.origins.find(b.stack_id);
  return it != d.origins.end() && it->second == analysis::kCachingAllocatorOrigin;
}

// The segments of the live set: the cache's segments with the tensors inside
// them, and every other allocation that occupies the device as a segment of
// its own (a tensor found in no segment too: the cache made that segment
// before tracking began).
std::vector<Segment> segments_of(const ExportDetail& d) {
  std::vector<Segment> segments;
  std::vector<const LiveBlock*> tensors;
  for (const LiveBlock& b : d.live_blocks) {
    if (b.kind == MemoryKind::kTorchBlock) {
      tensors.push_back(&b);
    } else if (analysis::occupies_device(b.kind) && b.kind != MemoryKind::kVmmPhysical) {
      Segment s;
      s.address = b.address;
      s.size = b.size;
      s.device = b.device;
      s.stack_id = b.stack_id;
      if (!is_cache_segment(d, b)) s.blocks.push_back(&b);  // its own one block
      segments.push_back(std::move(s));
    }
  }
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.address < b.address; });
  for (const LiveBlock* t : tensors) {
    // The segment that starts at or below the tensor and holds it whole.
    auto it = std::upper_bound(segments.begin(), segments.end(), t->address,
                               [](std::uint64_t a, const Segment& s) { return a < s.address; });
    if (it != segments.begin()) {
      Segment& s = *std::prev(it);
      bool inside = t->address + t->size <= s.address + s.size;
      bool own_block = !s.blocks.empty() && s.blocks.front()->kind != MemoryKind::kTorchBlock;
      if (inside && !own_block) {
        s.blocks.push_back(t);
        continue;
      }
    }
    Segment s;
    s.address = t->address;
    s.size = t->size;
    s.device = t->device;
    s.blocks.push_back(t);
    segments.push_back(std::move(s));
  }
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.address < b.address; });
  return segments;
}

void write_segment(PickleWriter& p, FrameLists& frames, Segment& s) {
  std::sort(s.blocks.begin(), s.blocks.end(),
            [](const LiveBlock* a, const LiveBlock* b) { return a->address < b->address; });
  std::uint64_t allocated = 0;
  for (const LiveBlock* b : s.blocks) allocated += b->size;
  p.begin_dict();
  p.key("device");
  p.integer(std::max(s.device, 0));
  p.key("address");
  p.unsigned_integer(s.address);
  p.key("total_size");
  p.unsigned_integer(s.size);
  p.key("allocated_size");
  p.unsigned_integer(allocated);
  p.key("active_size");
  p.unsigned_integer(allocated);
  p.key("requested_size");
  p.unsigned_integer(allocated);
  p.key("stream");
  p.integer(0);
  p.key("segment_type");
  p.string(s.size >= std::uint64_t{1024} * 1024 ? "large" : "small");
  p.key("segment_pool_id");
  p.begin_tuple();
  p.integer(0);
  p.integer(0);
  p.end_tuple();
  p.key("is_expandable");
  p.boolean(false);
  p.key("frames");
  if (s.stack_id) {
    frames.write(p, *s.stack_id);
  } else {
    p.begin_list();
    p.end_list();
  }
  p.key("blocks");
  p.begin_list();
  // The blocks tile the segment: gaps between tensors are inactive blocks
  // (PyTorch 1.13's stats() checks that the sizes add up).
  std::uint64_t at = s.address;
  std::uint64_t end = s.address + s.size;
  for (const LiveBlock* b : s.blocks) {
    if (b->address < at) continue;  // overlaps the one before: a free the trace lost
    if (b->address > at) write_block(p, frames, at, b->address - at, "inactive", std::nullopt);
    write_block(p, frames, b->address, b->size, "active_allocated", b->stack_id);
    at = b->address + b->size;
  }
  if (at < end) write_block(p, frames, at, end - at, "inactive", std::nullopt);
  p.end_list();
  p.end_dict();
}

void write_event(PickleWriter& p, FrameLists& frames, const char* action,
                 const AllocationEvent& e) {
  p.begin_dict();
  p.key("action");
  p.string(action);
  p.key("addr");
  p.unsigned_integer(e.address);
  p.key("size");
  p.unsigned_integer(e.size);
  p.key("stream");
  p.unsigned_integer(e.stream);
  p.key("time_us");
  p.integer(static_cast<std::int64_t>(std::llround(e.time_s * 1e6)));
  p.key("frames");
  frames.write(p, e.stack_id);
  p.end_dict();
}

// The allocator's events in PyTorch's words: tensors are alloc /
// free_requested + free_completed; what the driver handed out is
// segment_alloc / segment_free, and outside PyTorch's cache also the
// one block it is.
void write_device_trace(PickleWriter& p, const ExportDetail& d, FrameLists& frames,
                        std::int32_t device) {
  p.begin_list();
  for (const AllocationEvent& e : d.events) {
    if (std::max(e.device, 0) != device) continue;
    bool tensor = e.kind == MemoryKind::kTorchBlock;
    if (!tensor && (!analysis::occupies_device(e.kind) || e.kind == MemoryKind::kVmmPhysical)) {
      continue;
    }
    if (tensor) {
      if (e.is_alloc) {
        write_event(p, frames, "alloc", e);
      } else {
        write_event(p, frames, "free_requested", e);
        write_event(p, frames, "free_completed", e);
      }
      continue;
    }
    auto origin = d.origins.find(e.stack_id);
    bool cache = origin != d.origins.end() && origin->second == analysis::kCachingAllocatorOrigin;
    if (e.is_alloc) {
      write_event(p, frames, "segment_alloc", e);
      if (!cache) write_event(p, frames, "alloc", e);
    } else {
      if (!cache) {
        write_event(p, frames, "free_requested", e);
        write_event(p, frames, "free_completed", e);
      }
      write_event(p, frames, "segment_free", e);
    }
  }
  p.end_list();
}

}  // namespace

void write_memory_viz(const analysis::ProcessReport& process, const ExportOptions& options,
                      std::ostream& out) {
  static const ExportDetail kNone;
  const ExportDetail& d = process.export_detail ? *process.export_detail : kNone;
  std::vector<Segment> segments = segments_of(d);
  std::int32_t devices = 1;
  for (const Segment& s : segments) devices = std::max(devices, s.device + 1);
  for (const AllocationEvent& e : d.events) devices = std::max(devices, e.device + 1);
  devices = std::min(devices, 64);  // a crafted device number never makes millions of lists

  PickleWriter p(out);
  FrameLists frames(d);
  p.begin_dict();
  p.key("segments");
  p.begin_list();
  for (Segment& s : segments) write_segment(p, frames, s);
  p.end_list();
  p.key("device_traces");
  p.begin_list();
  for (std::int32_t device = 0; device < devices; ++device)
    write_device_trace(p, d, frames, device);
  p.end_list();
  p.key("gpuleak");
  p.begin_dict();
  p.key("producer");
  p.string(options.producer);
  p.key("pid");
  p.integer(process.process.pid);
  p.key("trace");
  p.string(process.trace_path);
  p.key("live_allocations");
  p.unsigned_integer(d.live_blocks_total);
  p.key("live_allocations_written");
  p.unsigned_integer(d.live_blocks.size());
  p.key("events");
  p.unsigned_integer(d.events_total);
  p.key("events_written");
  p.unsigned_integer(d.events.size());
  p.key("left_out");
  p.string(fmt::format(
      "{}{}host-pinned memory, address reservations and mappings (not device memory)",
      d.live_blocks.size() < d.live_blocks_total
          ? fmt::format("{} of {} live allocations past the bound; ",
                        d.live_blocks_total - d.live_blocks.size(), d.live_blocks_total)
          : "",
      d.events.size() < d.events_total
          ? fmt::format("the first {} of {} events (only the last {} are in device_traces); ",
                        d.events_total - d.events.size(), d.events_total, d.events.size())
          : ""));
  p.end_dict();
  p.end_dict();
  p.finish();
}

}  // namespace gpuleak::report
