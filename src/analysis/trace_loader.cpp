#include "analysis/trace_loader.h"

#include <new>

#include "trace/trace_feed.h"

namespace gpuleak::analysis {

ProcessReport analyze_trace_file(const std::string& path, const AnalysisOptions& options,
                                 const ProgressCallback& progress) {
  ProcessAnalysis analysis(options);
  trace::TraceFeed feed(path);
  auto consume = [&analysis](const trace::Record& record) { analysis.consume(record); };
  feed.read(consume, progress);
  feed.finish(consume);
  analysis.set_damage(feed.damage());
  analysis.set_lost_seqs(feed.findings().declared_skipped, feed.findings().counted_skipped);
  if (const auto& error = feed.error()) analysis.set_trace_error(error->what(), error->offset());
  return analysis.build_report(path);
}

TraceReading read_trace_report(const std::string& path, const AnalysisOptions& options,
                               const std::string& reading, const ProgressCallback& progress) {
  TraceReading out;
  try {
    out.report = analyze_trace_file(path, options, progress);
  } catch (const trace::TraceError& e) {
    out.error = e.what();
  } catch (const std::bad_alloc&) {
    out.error = path + ": not enough memory to " + reading;
  }
  return out;
}

}  // namespace gpuleak::analysis
