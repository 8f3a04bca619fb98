#include "analysis/trace_loader.h"

#include <map>
#include <set>

#include "analysis/source_lines.h"
#include "trace/codec.h"
#include "trace/event_sequencer.h"
#include "trace/trace_damage.h"
#include "trace/trace_reader.h"
#include "trace/trace_writer.h"

namespace gpuleak::analysis {

namespace {

// Feeds every record of `path` to `analysis`, in event order, and tells it
// what is damaged. Returns the error that stopped reading early, if any (the
// records before it count).
std::optional<trace::TraceError> feed(const std::string& path, ProcessAnalysis& analysis,
                                      const ProgressCallback& progress) {
  trace::TraceReader reader(path);  // throws when the file is unusable from the start
  trace::EventSequencer sequencer;
  trace::DamageDetector damage;
  trace::Record record;
  std::optional<trace::TraceError> error;
  std::uint64_t count = 0;
  try {
    while (reader.next(record) == trace::TraceReader::Status::kRecord) {
      if (!damage.observe(record)) {
        const trace::ProcessRecord& other = *damage.foreign_process();
        std::uint64_t block_offset = reader.block_offset();
        error = trace::TraceError(
            path, block_offset,
            "the trace of another process (pid " + std::to_string(other.pid) +
                ") begins in the block at byte " + std::to_string(block_offset) +
                ": another trace was appended to this one; the records before it are readable");
        break;
      }
      sequencer.push(std::move(record));
      while (sequencer.pop(record)) analysis.consume(record);
      if (progress && (++count & 0xffff) == 0) progress(reader.offset(), reader.file_bytes());
    }
  } catch (const trace::TraceError& e) {
    error = e;
  }
  sequencer.finish();
  while (sequencer.pop(record)) analysis.consume(record);
  if (progress) progress(reader.offset(), reader.file_bytes());
  if (!error && !damage.saw_records()) {
    throw trace::TraceError(path, reader.offset(),
                            "holds only the trace header, no records: the process stopped "
                            "before its first flush, or the file was cut after its header");
  }
  analysis.set_damage(damage.judge(sequencer.findings(), error.has_value()));
  analysis.set_lost_seqs(sequencer.findings().declared_skipped,
                         sequencer.findings().counted_skipped);
  return error;
}

}  // namespace

ProcessReport analyze_trace_file(const std::string& path, const AnalysisOptions& options,
                                 const ProgressCallback& progress) {
  ProcessAnalysis analysis(options);
  if (auto error = feed(path, analysis, progress))
    analysis.set_trace_error(error->what(), error->offset());
  return analysis.build_report(path);
}

bool embed_symbols(const std::string& path, std::size_t* written, std::string* error) {
  *written = 0;
  ProcessAnalysis analysis;
  try {
    feed(path, analysis, {});
  } catch (const trace::TraceError& e) {
    *error = e.what();
    return false;
  }
  StackCatalog& catalog = analysis.catalog();
  std::string block;
  std::uint32_t count = 0;
  for (std::uint64_t address : catalog.native_addresses()) {
    const symbolize::NativeFrame& frame = catalog.symbolizer().resolve(address);
    if (frame.function.empty() && frame.file.empty()) continue;
    trace::SymbolRecord symbol = symbolize::Symbolizer::to_record(frame);
    trace::encode_record(symbol, block);
    catalog.add(symbol);
    ++count;
  }

  // The source line of every stack's site (the frame reports blame), read
  // now from this machine's files: reports show only these.
  std::map<std::string, std::set<std::uint32_t>> wanted;
  std::size_t lines_wanted = 0;
  for (std::uint32_t stack_id : catalog.stack_ids()) {
    Site site = choose_site(catalog.frames(stack_id));
    if (site.file.empty() || site.line == 0 || lines_wanted >= kMaxSourceLinesEmbedded) continue;
    if (wanted[site.file].insert(site.line).second) ++lines_wanted;
  }
  for (const auto& [file, lines] : wanted) {
    for (const auto& [line, text] : read_source_lines(file, lines)) {
      if (text.empty()) continue;
      trace::encode_record(trace::SourceLineRecord{file, line, text}, block);
      ++count;
    }
  }

  if (count == 0) return true;
  auto writer = trace::TraceWriter::append_to(path, error);
  if (!writer || !writer->write_block(block, count, error)) return false;
  *written = count;
  return true;
}

}  // namespace gpuleak::analysis
