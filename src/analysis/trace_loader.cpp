#include "analysis/trace_loader.h"

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

}  // namespace gpuleak::analysis
