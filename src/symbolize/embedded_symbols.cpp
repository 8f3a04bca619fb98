#include "symbolize/embedded_symbols.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <variant>
#include <vector>

#include "symbolize/symbolizer.h"
#include "trace/codec.h"
#include "trace/trace_feed.h"
#include "trace/trace_writer.h"

namespace gpuleak::symbolize {

bool embed_symbols(const std::string& path, std::size_t* written, std::string* error) {
  *written = 0;
  Symbolizer symbolizer;
  // A stack id written twice (a damaged trace) counts as its last record.
  std::map<std::uint32_t, std::vector<std::uint64_t>> native_by_stack;
  auto consume = [&](const trace::Record& record) {
    if (const auto* module = std::get_if<trace::ModuleRecord>(&record)) {
      symbolizer.add_module(*module);
    } else if (const auto* symbol = std::get_if<trace::SymbolRecord>(&record)) {
      symbolizer.add_symbol(*symbol);
    } else if (const auto* stack = std::get_if<trace::StackRecord>(&record)) {
      native_by_stack[stack->stack_id] = stack->native;
    }
  };
  if (!trace::read_whole_trace(path, consume, error)) return false;
  std::vector<std::uint64_t> addresses;
  for (const auto& [id, native] : native_by_stack)
    addresses.insert(addresses.end(), native.begin(), native.end());
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());

  std::string block;
  std::uint32_t count = 0;
  for (std::uint64_t address : addresses) {
    const NativeFrame& frame = symbolizer.resolve(address);
    if (frame.function.empty() && frame.file.empty()) continue;
    trace::encode_record(Symbolizer::to_record(frame), block);
    ++count;
  }
  if (!trace::append_records(path, block, count, error)) return false;
  *written = count;
  return true;
}

}  // namespace gpuleak::symbolize
