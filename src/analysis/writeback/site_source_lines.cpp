#include "analysis/writeback/site_source_lines.h"

#include <map>
#include <set>

#include "analysis/model/source_lines.h"
#include "analysis/model/stack_catalog.h"
#include "trace/codec.h"
#include "trace/trace_feed.h"
#include "trace/trace_writer.h"

namespace gpuleak::analysis {

bool embed_site_source_lines(const std::string& path, std::size_t* written, std::string* error) {
  *written = 0;
  StackCatalog catalog;
  auto consume = [&](const trace::Record& record) { catalog.add_definition(record); };
  if (!trace::read_whole_trace(path, consume, error)) return false;

  std::map<std::string, std::set<std::uint32_t>> wanted;
  std::size_t lines_wanted = 0;
  for (std::uint32_t stack_id : catalog.stack_ids()) {
    Site site = choose_site(catalog.frames(stack_id));
    if (site.file.empty() || site.line == 0 || lines_wanted >= kMaxSourceLinesEmbedded) continue;
    if (wanted[site.file].insert(site.line).second) ++lines_wanted;
  }
  std::string block;
  std::uint32_t count = 0;
  for (const auto& [file, lines] : wanted) {
    for (const auto& [line, text] : read_source_lines(file, lines)) {
      if (text.empty()) continue;
      trace::encode_record(trace::SourceLineRecord{file, line, text}, block);
      ++count;
    }
  }
  if (!trace::append_records(path, block, count, error)) return false;
  *written = count;
  return true;
}

}  // namespace gpuleak::analysis
