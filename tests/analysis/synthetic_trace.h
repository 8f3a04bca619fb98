// Builds synthetic event streams for the analysis tests: a process, Python
// code objects and stacks, allocations, frees, steps and samples, with
// consistent sequence numbers and times.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/process_analysis.h"
#include "trace/records.h"

namespace gpuleak::analysis::testing {

class SyntheticTrace {
 public:
  SyntheticTrace();
  // Streams every record straight into `sink` instead of keeping it (for
  // runs too long to hold in memory); records() then stays empty.
  explicit SyntheticTrace(ProcessAnalysis& sink);

  // A Python call site "file:line in function"; returns its stack id.
  std::uint32_t python_site(const std::string& file, std::uint32_t line,
                            const std::string& function);
  // A native stack whose frames lie inside a module at `module_path`.
  std::uint32_t native_site(const std::string& module_path);

  // A Python call stack, outermost frame first, each "file:line in function"
  // (one code object per file and function, shared across stacks).
  struct PyFrame {
    std::string file;
    std::uint32_t line;
    std::string function;
  };
  std::uint32_t python_stack(const std::vector<PyFrame>& outermost_first);
  // Python frames with native frames inside them (innermost native first),
  // as a thread running no Python records with a lent Python stack.
  std::uint32_t python_stack(const std::vector<PyFrame>& outermost_first,
                             const std::vector<std::uint64_t>& native_innermost_first);
  // A native-only stack of return addresses, outermost first.
  std::uint32_t native_stack(const std::vector<std::uint64_t>& outermost_first);

  // Allocations and frees are made by this thread from now on.
  void set_thread(std::uint32_t thread_id) { thread_id_ = thread_id; }
  // A step of another source (the default one is the optimizer hook).
  void step_from(trace::StepSource source, std::uint64_t step_number, std::uint32_t clock = 0);

  std::uint64_t alloc(std::uint32_t stack, std::uint64_t size,
                      trace::MemoryKind kind = trace::MemoryKind::kTorchBlock);
  // An allocation at a chosen address: an allocator handing a freed block
  // out again.
  std::uint64_t alloc_at(std::uint32_t stack, std::uint64_t size, std::uint64_t address,
                         trace::MemoryKind kind = trace::MemoryKind::kTorchBlock);
  void free(std::uint64_t address, trace::MemoryKind kind = trace::MemoryKind::kTorchBlock);
  void step(std::uint64_t step_number);
  void sample(trace::Metric metric, std::uint64_t value);
  void annotate(const std::string& key, const std::string& value);
  void alloc_failed(std::uint32_t stack, std::uint64_t size);
  void advance_ms(double ms) { time_ns_ += static_cast<std::uint64_t>(ms * 1e6); }
  // Events the collector dropped: their sequence numbers are taken, nothing
  // is recorded (the trace shows a gap).
  void lose_events(std::uint64_t events) { seq_ += events; }
  // An allocation the collector dropped: its number and address are taken,
  // nothing is recorded; returns the address (its free may be recorded).
  std::uint64_t lose_alloc(std::uint64_t size);
  // The collector's own count of what it dropped (a LostRecord).
  void lost_record(std::uint64_t events);

  const std::vector<trace::Record>& records() const { return records_; }
  // Feeds everything to a fresh analysis.
  ProcessAnalysis analyze(const AnalysisOptions& options = {}) const;

 private:
  std::uint64_t next_seq() { return seq_++; }
  void emit(trace::Record record);
  ProcessAnalysis* sink_ = nullptr;
  std::vector<trace::Record> records_;
  std::uint64_t seq_ = 0;
  std::uint64_t time_ns_ = 1'000'000'000;
  std::uint64_t next_address_ = 0x7f0000000000;
  std::uint32_t next_stack_ = 1;
  std::uint32_t next_code_ = 1;
  std::uint64_t next_module_base_ = 0x500000000000;
  std::uint32_t thread_id_ = 1;
  std::map<std::pair<std::string, std::string>, std::uint32_t> codes_;
};

}  // namespace gpuleak::analysis::testing
