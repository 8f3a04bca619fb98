// Turns native return addresses from a trace into function, file and line,
// offline, with elfutils' libdwfl (DWARF line tables, ELF symbol tables,
// separate debug files found by build id) and the C++ demangler.
//
// Modules come from the trace's ModuleRecords (path and load bias). When a
// module's file is missing on this machine the frame still names the module
// and its offset. Symbols embedded in the trace (SymbolRecords, written by
// `gpuleak run` right after the program exits) take precedence, so traces
// stay readable on other machines.
//
// Results are cached. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace/records.h"

namespace gpuleak::symbolize {

struct NativeFrame {
  std::uint64_t address = 0;  // the return address as recorded
  std::string function;       // demangled; empty if unknown; the innermost inlined one
  std::string file;           // source file; empty without debug info
  std::uint32_t line = 0;
  std::string module;  // path of the ELF object; empty if unknown
  std::uint64_t module_offset = 0;
  // When the code at `address` was inlined: the functions it was inlined
  // into, innermost first, each at the line of the inlined call; the last is
  // the function the address lies in. Empty otherwise.
  std::vector<trace::InlinedCaller> inlined_into;
};

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;
  Symbolizer(Symbolizer&&) noexcept;
  Symbolizer& operator=(Symbolizer&&) noexcept;

  void add_module(const trace::ModuleRecord& module);
  void add_symbol(const trace::SymbolRecord& symbol);

  // `return_address` as captured by the unwinder; the call instruction is
  // just before it, and that is what is looked up.
  const NativeFrame& resolve(std::uint64_t return_address);

  // The frame as a SymbolRecord, for embedding into a trace.
  static trace::SymbolRecord to_record(const NativeFrame& frame);

 private:
  NativeFrame lookup(std::uint64_t return_address);
  const trace::ModuleRecord* module_of(std::uint64_t address) const;

  std::vector<trace::ModuleRecord> modules_;
  std::unordered_map<std::uint64_t, NativeFrame> cache_;
  std::unordered_map<std::uint64_t, trace::SymbolRecord> embedded_;
  struct DwflSession;
  std::unique_ptr<DwflSession> dwarf_;
  bool modules_changed_ = false;
};

// "_ZN3foo3barEv" -> "foo::bar()"; returns the input when it is not mangled.
std::string demangle(const std::string& name);

}  // namespace gpuleak::symbolize
