#include "symbolize/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// A module file libdwfl may open: a regular file (never a FIFO or a device,
// which could block or never end) that starts with the ELF magic, so that a
// trace naming /etc/passwd or /proc/self/environ as a module makes nothing
// of it be read beyond four bytes.
bool is_elf_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st {};
  char magic[4] = {};
  bool elf = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 64 &&
             ::pread(fd, magic, sizeof magic, 0) == 4 &&
             std::memcmp(magic,
                         "\x7f"
                         "ELF",
                         4) == 0;
  ::close(fd);
  return elf;
}

bool is_function_scope(Dwarf_Die* die) {
  int tag = dwarf_tag(die);
  return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
}

// The name of a subprogram or inlined subroutine, through its abstract
// origin: the linkage name demangled when there is one (it has the
// parameters, like the ELF symbols), else the plain name.
std::string function_name(Dwarf_Die* die) {
  Dwarf_Attribute attribute;
  for (int name : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, name, &attribute)) {
      if (const char* text = dwarf_formstring(&attribute)) return demangle(text);
    }
  }
  if (dwarf_attr_integrate(die, DW_AT_name, &attribute)) {
    if (const char* text = dwarf_formstring(&attribute)) return text;
  }
  return {};
}

// Where an inlined subroutine was called from: DW_AT_call_file/_line.
void call_site(Dwarf_Die* cu, Dwarf_Die* inlined, std::string* file, std::uint32_t* line) {
  Dwarf_Attribute attribute;
  Dwarf_Word value = 0;
  if (dwarf_attr(inlined, DW_AT_call_line, &attribute) && dwarf_formudata(&attribute, &value) == 0)
    *line = static_cast<std::uint32_t>(value);
  Dwarf_Files* files = nullptr;
  size_t count = 0;
  if (dwarf_attr(inlined, DW_AT_call_file, &attribute) &&
      dwarf_formudata(&attribute, &value) == 0 && dwarf_getsrcfiles(cu, &files, &count) == 0 &&
      value < count) {
    if (const char* name = dwarf_filesrc(files, value, nullptr, nullptr)) *file = name;
  }
}

// The inline chain at `address` (in the Dwfl session's address space): the
// innermost function's name, and the functions it was inlined into with
// their call lines. Leaves `frame` as it is when no code was inlined there.
void add_inline_chain(Dwfl_Module* module, Dwarf_Addr address, NativeFrame* frame) {
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(module, address, &bias);
  if (!cu) return;
  // dwarf_getscopes gives the innermost scope at the address; above an
  // inlined subroutine it continues with the abstract definition's scopes,
  // so the concrete chain (who it was inlined into) comes from the DIE
  // nesting around the innermost subroutine instead.
  Dwarf_Die* at_address = nullptr;
  int found = dwarf_getscopes(cu, address - bias, &at_address);
  Dwarf_Die* innermost = nullptr;
  for (int i = 0; i < found && !innermost; ++i) {
    if (is_function_scope(&at_address[i])) innermost = &at_address[i];
  }
  if (!innermost || dwarf_tag(innermost) != DW_TAG_inlined_subroutine) {
    std::free(at_address);
    return;
  }
  Dwarf_Die* scopes = nullptr;
  int count = dwarf_getscopes_die(innermost, &scopes);
  std::free(at_address);
  if (count <= 0) return;
  std::vector<Dwarf_Die*> functions;  // innermost first
  for (int i = 0; i < count; ++i) {
    if (is_function_scope(&scopes[i])) functions.push_back(&scopes[i]);
  }
  if (functions.size() >= 2 && dwarf_tag(functions.front()) == DW_TAG_inlined_subroutine) {
    std::string innermost_name = function_name(functions.front());
    if (!innermost_name.empty()) {
      std::vector<trace::InlinedCaller> callers;
      for (std::size_t i = 0; i + 1 < functions.size(); ++i) {
        if (dwarf_tag(functions[i]) != DW_TAG_inlined_subroutine) break;
        trace::InlinedCaller caller;
        bool physical = i + 2 == functions.size();
        // The function the address lies in keeps the ELF symbol's name, as
        // frames without inlining have.
        caller.function = physical && !frame->function.empty() ? frame->function
                                                               : function_name(functions[i + 1]);
        call_site(cu, functions[i], &caller.file, &caller.line);
        callers.push_back(std::move(caller));
      }
      frame->function = std::move(innermost_name);
      frame->inlined_into = std::move(callers);
    }
  }
  std::free(scopes);
}

}  // namespace

// Its own name: libdw declares a global `struct Dwarf` already.
struct Symbolizer::DwflSession {
  Dwfl* session = nullptr;
  ~DwflSession() {
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
    frame.inlined_into = e->second.inlined_into;
    return frame;
  }
  std::uint64_t address = return_address > 0 ? return_address - 1 : 0;
  const trace::ModuleRecord* module = module_of(address);
  if (!module) return frame;
  frame.module = module->path;
  frame.module_offset = address - module->load_bias;

  if (!dwarf_ || modules_changed_) {
    dwarf_ = std::make_unique<DwflSession>();
    dwarf_->session = dwfl_begin(&kOfflineCallbacks);
    if (dwarf_->session) {
      dwfl_report_begin(dwarf_->session);
      for (const auto& m : modules_) {
        if (!is_elf_file(m.path)) continue;
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
  add_inline_chain(dwfl_module, address, &frame);
  return frame;
}

trace::SymbolRecord Symbolizer::to_record(const NativeFrame& frame) {
  return trace::SymbolRecord{frame.address, frame.function, frame.file,
                             frame.line,    frame.module,   frame.inlined_into};
}

}  // namespace gpuleak::symbolize
