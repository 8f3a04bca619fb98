// The definitions a trace carries (stacks, Python code objects, loaded
// modules, API and thread names, embedded symbols and source lines) and how
// to turn a stack id into frames a person can read. Source text comes only
// from where the SourceLookup allows (analysis/model/source_lines.h).
//
// Frames are innermost first. A stack with both kinds holds native frames
// (from the allocation down to the Python interpreter) followed by the
// Python frames that called it.
//
// Not thread-safe. Symbolization is lazy and cached.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analysis/model/report_model.h"
#include "analysis/model/source_lines.h"
#include "symbolize/symbolizer.h"
#include "trace/records.h"

namespace gpuleak::analysis {

// Origins (StackCatalog::origin) that are a framework's pool: the segments it
// reserves from the driver, not memory of their own.
inline constexpr const char* kCachingAllocatorOrigin = "PyTorch caching allocator";
inline constexpr const char* kCupyPoolOrigin = "CuPy memory pool";

class StackCatalog {
 public:
  // Adds `record` when it is one the catalog keeps (a stack, code object,
  // module, symbol, source line, API name or thread name); returns false
  // for every other record.
  bool add_definition(const trace::Record& record);
  void add(const trace::StackRecord& stack);
  void add(const trace::PythonCodeRecord& code);
  void add(const trace::ModuleRecord& module);
  void add(const trace::SymbolRecord& symbol);
  void add(const trace::ApiNameRecord& api);
  void add(const trace::ThreadRecord& thread);
  void add(const trace::SourceLineRecord& line);
  void set_source_lookup(SourceLookup lookup);

  const trace::StackRecord* stack(std::uint32_t stack_id) const;
  const trace::PythonCodeRecord* python_code(std::uint32_t code_id) const;
  std::vector<Frame> frames(std::uint32_t stack_id);
  std::string api_name(std::uint32_t api) const;
  std::string thread_name(std::uint32_t thread_id) const;

  // Where a driver allocation comes from, judged by the libraries on its
  // native stack: "PyTorch caching allocator", "CuPy memory pool", "NCCL",
  // "cuBLAS", "cuDNN", or "".
  std::string origin(std::uint32_t stack_id);

  // Every native address of every stack (to embed symbols after a run).
  std::vector<std::uint64_t> native_addresses() const;
  std::vector<std::uint32_t> stack_ids() const;
  bool has_python_code() const { return !codes_.empty(); }
  symbolize::Symbolizer& symbolizer() { return symbolizer_; }
  const std::vector<trace::ModuleRecord>& modules() const { return modules_; }

 private:
  std::unordered_map<std::uint32_t, trace::StackRecord> stacks_;
  std::unordered_map<std::uint32_t, trace::PythonCodeRecord> codes_;
  std::map<std::uint32_t, std::string> api_names_;
  std::map<std::uint32_t, std::string> thread_names_;
  std::vector<trace::ModuleRecord> modules_;
  std::unordered_map<std::uint32_t, std::vector<Frame>> frame_cache_;
  symbolize::Symbolizer symbolizer_;
  SourceLookup source_lookup_;
  // Source text by (file, line): embedded, or read (found or not) once.
  std::map<std::pair<std::string, std::uint32_t>, std::string> source_lines_;
  std::string source_text(const std::string& file, std::uint32_t line);
};

// Picks the frame to blame: the innermost non-internal frame with a file
// that is not standing at its def line (Frame::at_definition), else the
// innermost non-internal frame with a file, else the innermost frame with a
// file, else the innermost with a name -- never one of gpuleak's plumbing
// frames. Also names the autograd node whose backward made the allocation,
// when a native frame is one.
Site choose_site(const std::vector<Frame>& frames);
// Whether a source line is a function's def statement (after indentation).
bool is_def_line(std::string_view source_line);
// "AddmmBackward0" for "torch::autograd::generated::AddmmBackward0::apply(...)"
// and for the node frame the allocator hook records ("vtable for
// torch::autograd::generated::AddmmBackward0"), else "".
std::string backward_node_of(const std::string& function);
// True for frames inside CUDA, CUPTI, the collector, the Python interpreter,
// the standard library, PyTorch's own code, or gpuleak's Python package.
bool is_internal_native(const std::string& module, const std::string& function);
bool is_internal_python(const std::string& filename);
// A file of gpuleak's own Python package (python/gpuleak/..., or
// site-packages/gpuleak/... where the wheel installed it).
bool is_gpuleak_python(const std::string& filename);
// A source file among the CUDA toolkit's headers (its inlined templates).
bool is_toolkit_header(const std::string& file);

}  // namespace gpuleak::analysis
