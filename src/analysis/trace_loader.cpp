#include "analysis/trace_loader.h"

#include <set>

#include "trace/codec.h"
#include "trace/event_sequencer.h"
#include "trace/trace_reader.h"
#include "trace/trace_writer.h"

namespace gpuleak::analysis {

namespace {

// Feeds every record of `path` to `analysis`, in event order. Returns the
// error that stopped reading early, if any (the records before it count).
std::optional<trace::TraceError> feed(const std::string& path, ProcessAnalysis& analysis,
                                      const ProgressCallback& progress) {
  trace::TraceReader reader(path);  // throws when the file is unusable from the start
  trace::EventSequencer sequencer;
  trace::Record record;
  std::optional<trace::TraceError> error;
  std::uint64_t count = 0;
  try {
    while (reader.next(record) == trace::TraceReader::Status::kRecord) {
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
    trace::encode_record(symbolize::Symbolizer::to_record(frame), block);
    ++count;
  }
  if (count == 0) return true;
  auto writer = trace::TraceWriter::append_to(path, error);
  if (!writer || !writer->write_block(block, count, error)) return false;
  *written = count;
  return true;
}

}  // namespace gpuleak::analysis
