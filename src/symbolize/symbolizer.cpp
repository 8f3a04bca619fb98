#include "symbolize/symbolizer.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace gpuleak::symbolize {

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string result(out);
  std::free(out);
  return result;
}

namespace {

char* g_debuginfo_path = nullptr;

const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &g_debuginfo_path,
};

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

struct Symbolizer::Dwarf {
  Dwfl* session = nullptr;
  ~Dwarf() {
    if (session) dwfl_end(session);
  }
};

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;
Symbolizer::Symbolizer(Symbolizer&&) noexcept = default;
Symbolizer& Symbolizer::operator=(Symbolizer&&) noexcept = default;

void Symbolizer::add_module(const trace::ModuleRecord& module) {
  for (const auto& m : modules_) {
    if (m.low == module.low && m.path == module.path) return;
  }
  modules_.push_back(module);
  modules_changed_ = true;
}

void Symbolizer::add_symbol(const trace::SymbolRecord& symbol) {
  embedded_[symbol.address] = symbol;
  cache_.erase(symbol.address);
}

const trace::ModuleRecord* Symbolizer::module_of(std::uint64_t address) const {
  // Most recently loaded first: an address range can be reused after dlclose.
  for (auto it = modules_.rbegin(); it != modules_.rend(); ++it) {
    if (address >= it->low && address < it->high) return &*it;
  }
  return nullptr;
}

const NativeFrame& Symbolizer::resolve(std::uint64_t return_address) {
  auto it = cache_.find(return_address);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(return_address, lookup(return_address)).first->second;
}

NativeFrame Symbolizer::lookup(std::uint64_t return_address) {
  NativeFrame frame;
  frame.address = return_address;
  if (auto e = embedded_.find(return_address); e != embedded_.end()) {
    frame.function = e->second.function;
    frame.file = e->second.file;
    frame.line = e->second.line;
    frame.module = e->second.module;
    return frame;
  }
  std::uint64_t address = return_address > 0 ? return_address - 1 : 0;
  const trace::ModuleRecord* module = module_of(address);
  if (!module) return frame;
  frame.module = module->path;
  frame.module_offset = address - module->load_bias;

  if (!dwarf_ || modules_changed_) {
    dwarf_ = std::make_unique<Dwarf>();
    dwarf_->session = dwfl_begin(&kOfflineCallbacks);
    if (dwarf_->session) {
      dwfl_report_begin(dwarf_->session);
      for (const auto& m : modules_) {
        if (!file_exists(m.path)) continue;
        dwfl_report_elf(dwarf_->session, m.path.c_str(), m.path.c_str(), -1, m.load_bias, false);
      }
      dwfl_report_end(dwarf_->session, nullptr, nullptr);
    }
    modules_changed_ = false;
  }
  if (!dwarf_->session) return frame;
  Dwfl_Module* dwfl_module = dwfl_addrmodule(dwarf_->session, address);
  if (!dwfl_module) return frame;
  if (const char* name = dwfl_module_addrname(dwfl_module, address))
    frame.function = demangle(name);
  if (Dwfl_Line* line = dwfl_module_getsrc(dwfl_module, address)) {
    int line_number = 0;
    const char* file = dwfl_lineinfo(line, nullptr, &line_number, nullptr, nullptr, nullptr);
    if (file) frame.file = file;
    frame.line = line_number > 0 ? static_cast<std::uint32_t>(line_number) : 0;
  }
  return frame;
}

trace::SymbolRecord Symbolizer::to_record(const NativeFrame& frame) {
  return trace::SymbolRecord{frame.address, frame.function, frame.file, frame.line, frame.module};
}

}  // namespace gpuleak::symbolize
