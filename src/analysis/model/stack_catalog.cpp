#include "analysis/model/stack_catalog.h"

#include <algorithm>
#include <initializer_list>
#include <type_traits>
#include <variant>

namespace gpuleak::analysis {

namespace {

std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

std::string Site::label() const {
  if (!file.empty() && line > 0) return basename_of(file) + ":" + std::to_string(line);
  if (!file.empty()) return basename_of(file);
  if (!function.empty()) return function;
  return "?";
}

bool starts_with_any(const std::string& s, std::initializer_list<const char*> prefixes) {
  for (const char* prefix : prefixes) {
    if (s.starts_with(prefix)) return true;
  }
  return false;
}

// The modules between an allocation and the collector: CUPTI and the driver
// above a driver API call, gpuleak's own allocator hook (torch-hook-*.so,
// built at run time) above PyTorch's allocator, the driver interposer
// (libgpuleak_interposer.so) above a wrapped driver call.
const std::initializer_list<const char*> kPlumbingModules = {"libgpuleak_collector.so",
                                                             "libgpuleak_interposer.so",
                                                             "libcupti.so",
                                                             "libcuda.so",
                                                             "libunwind",
                                                             "torch-hook-"};

bool is_plumbing_module(const std::string& module) {
  return starts_with_any(basename_of(module), kPlumbingModules);
}

bool is_internal_native(const std::string& module, const std::string& function) {
  std::string base = basename_of(module);
  // python-frame-reader-*.so is gpuleak's own too (python/gpuleak/frame_reader.py).
  if (starts_with_any(base, kPlumbingModules) ||
      starts_with_any(base, {"python-frame-reader-", "libcudart.so", "libpython", "libc10",
                             "libtorch", "libc.so", "libstdc++", "libnccl", "libcublas", "libcudnn",
                             "libffi", "_ctypes", "libgcc_s", "libgomp"})) {
    return true;
  }
  if (base.starts_with("python")) return true;  // the interpreter executable
  // The CUDA runtime is often linked statically into the program.
  return starts_with_any(function, {"cudart::", "__cudart", "libcudart_static", "cudaApi", "_Py",
                                    "Py", "__libc_start"}) ||
         function == "_start";
}

bool is_toolkit_header(const std::string& file) {
  // The CUDA runtime's templates (cudaMalloc<float> in cuda_runtime.h) are
  // inlined into the program: their lines are the toolkit's, the caller's is
  // the one to blame.
  return contains(file, "/cuda/include/") || contains(file, "/targets/x86_64-linux/include/") ||
         contains(file, "/targets/sbsa-linux/include/") ||
         (contains(file, "/cuda") && contains(file, "/include/cuda_runtime"));
}

bool is_internal_python(const std::string& filename) {
  // An IPython cell (the shell names it <ipython-input-N-hash>) is the
  // user's code; <frozen ...> and <string> are Python's.
  if (filename.starts_with("<ipython-input-")) return false;
  if (filename.empty() || filename[0] == '<') return true;
  // IPython and its kernel run the cell: the cell's line is the one to blame.
  if (contains(filename, "/IPython/") || contains(filename, "-packages/ipykernel/")) return true;
  if (contains(filename, "/site-packages/torch/") || contains(filename, "/dist-packages/torch/"))
    return true;
  // Frameworks the user's code calls into: the line to blame is the user's
  // call, not the framework's allocation (docs/client-matrix.md). Code that
  // torch.compile generated lives in torchinductor's cache folder.
  for (const char* package :
       {"lightning/", "pytorch_lightning/", "lightning_fabric/", "transformers/", "accelerate/",
        "cupy/", "cupyx/", "cupy_backends/", "jax/", "jaxlib/", "flax/", "optax/", "triton/"}) {
    if (contains(filename, (std::string("-packages/") + package).c_str())) return true;
  }
  if (contains(filename, "/torchinductor_")) return true;
  if (is_gpuleak_python(filename)) return true;
  // The standard library: .../lib/python3.X/... outside site-packages.
  auto lib = filename.find("/lib/python3");
  if (lib != std::string::npos && !contains(filename, "-packages/")) return true;
  return false;
}

bool is_gpuleak_python(const std::string& filename) {
  // The package in the source tree, a build or an install (.../python/gpuleak/...,
  // also the wheel's _native copy), or installed from the wheel (site-packages/gpuleak/...).
  return contains(filename, "/python/gpuleak/") || contains(filename, "-packages/gpuleak/");
}

std::string backward_node_of(const std::string& function) {
  // The node's own frame, recorded by the allocator hook instead of the
  // engine thread's stack: "vtable for torch::autograd::generated::AddmmBackward0".
  constexpr std::string_view kNodeVtable = "vtable for torch::autograd::";
  if (std::string_view(function).starts_with(kNodeVtable)) {
    std::string_view scope = std::string_view(function).substr(kNodeVtable.size());
    // The last name of the scope, template arguments included.
    auto colon = scope.substr(0, scope.find('<')).rfind("::");
    return std::string(colon == std::string_view::npos ? scope : scope.substr(colon + 2));
  }
  // "torch::autograd::generated::AddmmBackward0::apply(...)" -> "AddmmBackward0"
  auto apply = function.find("::apply(");
  if (apply == std::string::npos) apply = function.size();
  std::string scope = function.substr(0, apply);
  auto colon = scope.rfind("::");
  std::string name = colon == std::string::npos ? scope : scope.substr(colon + 2);
  auto backward = name.find("Backward");
  if (backward == std::string::npos || backward == 0 || apply == function.size()) return {};
  return name;
}

bool is_def_line(std::string_view text) {
  std::size_t start = text.find_first_not_of(" \t");
  if (start == std::string_view::npos) return false;
  text.remove_prefix(start);
  return text.starts_with("def ") || text.starts_with("async def ");
}

Site choose_site(const std::vector<Frame>& frames) {
  Site site;
  const Frame* pick = nullptr;
  // The innermost frame of the program's own code that runs a statement of
  // it (a compiled function's frame, at its def line, gives way to its caller).
  for (const Frame& f : frames) {
    if (!f.internal && !f.file.empty() && !f.at_definition) {
      pick = &f;
      break;
    }
  }
  for (const Frame& f : frames) {
    if (pick) break;
    if (!f.internal && !f.file.empty()) pick = &f;
  }
  // Never a frame of gpuleak's own plumbing (the allocator hook, CUPTI, the
  // collector): the innermost other frame with a file, then with a name.
  if (!pick) {
    for (const Frame& f : frames) {
      if (!f.plumbing && !f.file.empty()) {
        pick = &f;
        break;
      }
    }
  }
  if (!pick) {
    for (const Frame& f : frames) {
      if (!f.plumbing && !f.function.empty()) {
        pick = &f;
        break;
      }
    }
  }
  if (pick) {
    site.function = pick->function;
    site.file = pick->file;
    site.line = pick->line;
    site.source_line = pick->source_line;
  }
  for (const Frame& f : frames) {
    if (f.language != Frame::Language::kNative) break;
    if (std::string node = backward_node_of(f.function); !node.empty()) {
      site.backward_node = node;
      break;
    }
  }
  return site;
}

bool StackCatalog::add_definition(const trace::Record& record) {
  return std::visit(
      [this](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, trace::StackRecord> ||
                      std::is_same_v<T, trace::PythonCodeRecord> ||
                      std::is_same_v<T, trace::ModuleRecord> ||
                      std::is_same_v<T, trace::SymbolRecord> ||
                      std::is_same_v<T, trace::SourceLineRecord> ||
                      std::is_same_v<T, trace::ApiNameRecord> ||
                      std::is_same_v<T, trace::ThreadRecord>) {
          add(r);
          return true;
        }
        return false;
      },
      record);
}

void StackCatalog::add(const trace::StackRecord& stack) { stacks_[stack.stack_id] = stack; }
void StackCatalog::add(const trace::PythonCodeRecord& code) { codes_[code.code_id] = code; }

const trace::PythonCodeRecord* StackCatalog::python_code(std::uint32_t code_id) const {
  auto it = codes_.find(code_id);
  return it == codes_.end() ? nullptr : &it->second;
}
void StackCatalog::add(const trace::ModuleRecord& module) {
  modules_.push_back(module);
  symbolizer_.add_module(module);
  frame_cache_.clear();
}
void StackCatalog::add(const trace::SymbolRecord& symbol) {
  symbolizer_.add_symbol(symbol);
  frame_cache_.clear();
}
void StackCatalog::add(const trace::ApiNameRecord& api) { api_names_[api.api] = api.name; }
void StackCatalog::add(const trace::ThreadRecord& thread) {
  thread_names_[thread.thread_id] = thread.name;
}
void StackCatalog::add(const trace::SourceLineRecord& line) {
  source_lines_[{line.file, line.line}] = line.text;
  frame_cache_.clear();
}
void StackCatalog::set_source_lookup(SourceLookup lookup) {
  source_lookup_ = std::move(lookup);
  frame_cache_.clear();
}

std::string StackCatalog::source_text(const std::string& file, std::uint32_t line) {
  if (file.empty() || line == 0) return {};
  auto key = std::make_pair(file, line);
  if (auto it = source_lines_.find(key); it != source_lines_.end()) return it->second;
  if (source_lookup_.mode == SourceLookup::Mode::kEmbeddedOnly) return {};
  std::string path = file;
  if (source_lookup_.mode == SourceLookup::Mode::kCheckout) {
    auto found = find_in_checkout(source_lookup_.root, file);
    path = found ? *found : std::string();
  }
  std::string text;
  if (!path.empty()) {
    auto lines = read_source_lines(path, {line});
    if (auto it = lines.find(line); it != lines.end()) text = it->second;
  }
  source_lines_[key] = text;  // remembered also when not found: each file:line is tried once
  return text;
}

const trace::StackRecord* StackCatalog::stack(std::uint32_t stack_id) const {
  auto it = stacks_.find(stack_id);
  return it == stacks_.end() ? nullptr : &it->second;
}

std::string StackCatalog::api_name(std::uint32_t api) const {
  auto it = api_names_.find(api);
  return it == api_names_.end() ? "api " + std::to_string(api) : it->second;
}

std::string StackCatalog::thread_name(std::uint32_t thread_id) const {
  auto it = thread_names_.find(thread_id);
  return it == thread_names_.end() ? std::string() : it->second;
}

std::vector<Frame> StackCatalog::frames(std::uint32_t stack_id) {
  if (auto it = frame_cache_.find(stack_id); it != frame_cache_.end()) return it->second;
  std::vector<Frame> out;
  const trace::StackRecord* s = stack(stack_id);
  if (s) {
    bool leading = true;  // still among the innermost frames
    for (std::uint64_t address : s->native) {
      const symbolize::NativeFrame& n = symbolizer_.resolve(address);
      Frame f;
      f.language = Frame::Language::kNative;
      f.function = n.function;
      f.file = n.file;
      f.line = n.line;
      f.module = n.module;
      f.address = address;
      f.internal = is_internal_native(n.module, n.function) || is_toolkit_header(n.file);
      leading = leading && is_plumbing_module(n.module);
      f.plumbing = leading;
      f.inlined = !n.inlined_into.empty();
      f.source_line = source_text(f.file, f.line);
      out.push_back(f);
      // Each function the code was inlined into is a frame of its own, at
      // the line of the inlined call, with the same return address.
      for (std::size_t i = 0; i < n.inlined_into.size(); ++i) {
        Frame caller = f;
        caller.function = n.inlined_into[i].function;
        caller.file = n.inlined_into[i].file;
        caller.line = n.inlined_into[i].line;
        caller.inlined = i + 1 < n.inlined_into.size();
        caller.internal =
            is_internal_native(n.module, caller.function) || is_toolkit_header(caller.file);
        caller.source_line = source_text(caller.file, caller.line);
        out.push_back(std::move(caller));
      }
    }
    for (const trace::PythonFrame& p : s->python) {
      Frame f;
      f.language = Frame::Language::kPython;
      std::uint32_t first_line = 0;
      if (auto c = codes_.find(p.code_id); c != codes_.end()) {
        f.function = c->second.function;
        f.file = c->second.filename;
        first_line = c->second.first_line;
      }
      f.line = p.line;
      f.internal = is_internal_python(f.file);
      f.source_line = source_text(f.file, f.line);
      f.at_definition = f.line != 0 && f.line == first_line && is_def_line(f.source_line);
      out.push_back(std::move(f));
    }
  }
  frame_cache_[stack_id] = out;
  return out;
}

std::string StackCatalog::origin(std::uint32_t stack_id) {
  for (const Frame& f : frames(stack_id)) {
    if (f.language != Frame::Language::kNative) continue;
    std::string base = basename_of(f.module);
    if (base.starts_with("libc10_cuda")) return kCachingAllocatorOrigin;
    if (base.starts_with("libnccl")) return "NCCL";
    if (base.starts_with("libcublas")) return "cuBLAS";
    if (base.starts_with("libcudnn")) return "cuDNN";
    // CuPy's pool: cupy/cuda/memory (SingleDeviceMemoryPool) asking cudaMalloc for a segment.
    if (f.file.find("cupy/cuda/memory") != std::string::npos ||
        f.module.find("cupy/cuda/memory") != std::string::npos ||
        f.function.find("SingleDeviceMemoryPool") != std::string::npos) {
      return kCupyPoolOrigin;
    }
  }
  return {};
}

std::vector<std::uint32_t> StackCatalog::stack_ids() const {
  std::vector<std::uint32_t> out;
  for (const auto& [id, s] : stacks_) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::uint64_t> StackCatalog::native_addresses() const {
  std::vector<std::uint64_t> out;
  for (const auto& [id, s] : stacks_) out.insert(out.end(), s.native.begin(), s.native.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace gpuleak::analysis
