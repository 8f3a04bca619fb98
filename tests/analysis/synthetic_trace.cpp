#include "analysis/synthetic_trace.h"

namespace gpuleak::analysis::testing {

SyntheticTrace::SyntheticTrace() {
  trace::ProcessRecord p;
  p.pid = 4242;
  p.parent_pid = 1;
  p.start_monotonic_ns = time_ns_;
  p.command_line = "python train.py";
  emit(p);
}

SyntheticTrace::SyntheticTrace(ProcessAnalysis& sink) : sink_(&sink) {
  trace::ProcessRecord p;
  p.pid = 4242;
  p.parent_pid = 1;
  p.start_monotonic_ns = time_ns_;
  p.command_line = "python train.py";
  emit(p);
}

void SyntheticTrace::emit(trace::Record record) {
  if (sink_)
    sink_->consume(record);
  else
    records_.push_back(std::move(record));
}

std::uint32_t SyntheticTrace::python_site(const std::string& file, std::uint32_t line,
                                          const std::string& function) {
  std::uint32_t code = next_code_++;
  emit(trace::PythonCodeRecord{code, file, function, line > 3 ? line - 3 : 1});
  std::uint32_t stack = next_stack_++;
  emit(trace::StackRecord{stack, {}, {{code, line}}});
  return stack;
}

std::uint32_t SyntheticTrace::native_site(const std::string& module_path) {
  std::uint64_t base = next_module_base_;
  next_module_base_ += 0x1000000;
  emit(trace::ModuleRecord{base, base, base + 0x100000, module_path});
  std::uint32_t stack = next_stack_++;
  emit(trace::StackRecord{stack, {base + 0x1234, base + 0x5678}, {}});
  return stack;
}

std::uint32_t SyntheticTrace::python_stack(const std::vector<PyFrame>& outermost_first) {
  return python_stack(outermost_first, {});
}

std::uint32_t SyntheticTrace::python_stack(
    const std::vector<PyFrame>& outermost_first,
    const std::vector<std::uint64_t>& native_innermost_first) {
  trace::StackRecord stack;
  stack.stack_id = next_stack_++;
  stack.native = native_innermost_first;
  for (auto f = outermost_first.rbegin(); f != outermost_first.rend(); ++f) {
    auto [it, inserted] = codes_.try_emplace({f->file, f->function}, next_code_);
    if (inserted) {
      ++next_code_;
      emit(
          trace::PythonCodeRecord{it->second, f->file, f->function, f->line > 3 ? f->line - 3 : 1});
    }
    stack.python.push_back({it->second, f->line});
  }
  emit(stack);
  return stack.stack_id;
}

std::uint32_t SyntheticTrace::native_stack(const std::vector<std::uint64_t>& outermost_first) {
  trace::StackRecord stack;
  stack.stack_id = next_stack_++;
  stack.native.assign(outermost_first.rbegin(), outermost_first.rend());
  emit(stack);
  return stack.stack_id;
}

void SyntheticTrace::step_from(trace::StepSource source, std::uint64_t step_number,
                               std::uint32_t clock) {
  emit(trace::StepRecord{next_seq(), time_ns_, step_number, source, clock});
}

std::uint64_t SyntheticTrace::alloc(std::uint32_t stack, std::uint64_t size,
                                    trace::MemoryKind kind) {
  std::uint64_t address = next_address_;
  next_address_ += (size + 0xfff) & ~0xfffull;
  return alloc_at(stack, size, address, kind);
}

std::uint64_t SyntheticTrace::lose_alloc(std::uint64_t size) {
  std::uint64_t address = next_address_;
  next_address_ += (size + 0xfff) & ~0xfffull;
  lose_events(1);
  return address;
}

std::uint64_t SyntheticTrace::alloc_at(std::uint32_t stack, std::uint64_t size,
                                       std::uint64_t address, trace::MemoryKind kind) {
  trace::AllocRecord r;
  r.seq = next_seq();
  r.time_ns = time_ns_;
  r.address = address;
  r.size = size;
  r.kind = kind;
  r.device = 0;
  r.stack_id = stack;
  r.thread_id = thread_id_;
  emit(r);
  return address;
}

void SyntheticTrace::free(std::uint64_t address, trace::MemoryKind kind) {
  trace::FreeRecord r;
  r.seq = next_seq();
  r.time_ns = time_ns_;
  r.address = address;
  r.kind = kind;
  r.device = 0;
  r.thread_id = thread_id_;
  emit(r);
}

void SyntheticTrace::step(std::uint64_t step_number) {
  emit(trace::StepRecord{next_seq(), time_ns_, step_number, trace::StepSource::kOptimizerHook});
}

void SyntheticTrace::lost_record(std::uint64_t events) {
  emit(trace::LostRecord{next_seq(), time_ns_, events, {}});
}

void SyntheticTrace::sample(trace::Metric metric, std::uint64_t value) {
  emit(trace::SampleRecord{next_seq(), time_ns_, metric, 0, value});
}

void SyntheticTrace::annotate(const std::string& key, const std::string& value) {
  emit(trace::AnnotationRecord{next_seq(), time_ns_, key, value});
}

void SyntheticTrace::alloc_failed(std::uint32_t stack, std::uint64_t size) {
  emit(trace::AllocFailedRecord{next_seq(), time_ns_, size, trace::MemoryKind::kDevice, 243, 0, 2,
                                1, stack});
}

ProcessAnalysis SyntheticTrace::analyze(const AnalysisOptions& options) const {
  ProcessAnalysis analysis(options);
  for (const auto& r : records_) analysis.consume(r);
  return analysis;
}

}  // namespace gpuleak::analysis::testing
