// Test-only tool: prints every record of a gpuleak trace as one JSON object
// per line, so the Python tests can check what the package recorded without
// a second implementation of the trace format. Events come in the order they
// happened (EventSequencer), definitions where the file has them.
//
// Usage: gpuleak_test_trace_dump <trace-file>
// Exit status: 0 read to the end, 1 unreadable (the readable prefix is printed).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <variant>

#include "trace/event_sequencer.h"
#include "trace/records.h"
#include "trace/trace_reader.h"

namespace {

using gpuleak::trace::Record;
using nlohmann::json;
namespace t = gpuleak::trace;

json to_json(const Record& record) {
  return std::visit(
      [](const auto& r) -> json {
        using R = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<R, t::ProcessRecord>) {
          return {{"type", "process"},
                  {"pid", r.pid},
                  {"parent_pid", r.parent_pid},
                  {"command_line", r.command_line},
                  {"collector_version", r.collector_version}};
        } else if constexpr (std::is_same_v<R, t::StepRecord>) {
          return {{"type", "step"},
                  {"seq", r.seq},
                  {"time_ns", r.time_ns},
                  {"step", r.step},
                  {"source", static_cast<int>(r.source)},
                  {"clock", r.clock}};
        } else if constexpr (std::is_same_v<R, t::SampleRecord>) {
          return {{"type", "sample"},     {"seq", r.seq},
                  {"time_ns", r.time_ns}, {"metric", static_cast<int>(r.metric)},
                  {"device", r.device},   {"value", r.value}};
        } else if constexpr (std::is_same_v<R, t::AnnotationRecord>) {
          return {{"type", "annotation"},
                  {"seq", r.seq},
                  {"time_ns", r.time_ns},
                  {"key", r.key},
                  {"value", r.value}};
        } else if constexpr (std::is_same_v<R, t::AllocRecord>) {
          return {{"type", "alloc"},
                  {"seq", r.seq},
                  {"address", r.address},
                  {"size", r.size},
                  {"kind", static_cast<int>(r.kind)},
                  {"api", r.api},
                  {"stack_id", r.stack_id}};
        } else if constexpr (std::is_same_v<R, t::FreeRecord>) {
          return {{"type", "free"},
                  {"seq", r.seq},
                  {"address", r.address},
                  {"kind", static_cast<int>(r.kind)},
                  {"api", r.api}};
        } else if constexpr (std::is_same_v<R, t::ApiNameRecord>) {
          return {{"type", "api_name"}, {"id", r.api}, {"name", r.name}};
        } else if constexpr (std::is_same_v<R, t::ExitRecord>) {
          return {{"type", "exit"}, {"seq", r.seq}};
        } else if constexpr (std::is_same_v<R, t::LostRecord>) {
          return {{"type", "lost"}, {"seq", r.seq}, {"events", r.events}};
        } else {
          return {{"type", "other"}};
        }
      },
      record);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <trace-file>\n", argv[0]);
    return 2;
  }
  t::EventSequencer sequencer;
  Record record;
  int status = 0;
  try {
    t::TraceReader reader(argv[1]);
    while (reader.next(record) == t::TraceReader::Status::kRecord) {
      std::uint64_t seq = 0;
      if (t::record_seq(record, &seq)) {
        sequencer.push(std::move(record));
      } else {
        std::cout << to_json(record).dump() << '\n';
      }
      while (sequencer.pop(record)) std::cout << to_json(record).dump() << '\n';
    }
  } catch (const t::TraceError& error) {
    std::fprintf(stderr, "%s\n", error.what());
    status = 1;
  }
  sequencer.finish();
  while (sequencer.pop(record)) std::cout << to_json(record).dump() << '\n';
  return status;
}
