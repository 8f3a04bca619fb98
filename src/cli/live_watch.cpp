#include "cli/live_watch.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "report/text_report.h"
#include "trace/trace_feed.h"

namespace gpuleak::cli {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// How long a LEAK message waits for the holder before it is printed without
// one (the process answers at a step boundary, or found it by itself).
constexpr auto kHolderPatience = std::chrono::seconds(3);

// A walk that ran out of its time budget (GPULEAK_HOLDER_SECONDS, 2 s by
// default) names what it reached, which may lie below the real holder; it is
// asked once more with this budget. The program waits for that walk, once.
constexpr int kRetrySeconds = 8;

}  // namespace

struct LiveWatch::Followed {
  explicit Followed(const std::string& trace_path)
      : path(trace_path), feed(std::make_unique<trace::TraceFeed>(trace_path, true)) {}
  std::string path;
  // In follow mode: each poll reads what was added. A new one when the
  // collector compacted the trace and replaced the file.
  std::unique_ptr<trace::TraceFeed> feed;
  std::unique_ptr<analysis::ProcessAnalysis> analysis;
  bool broken = false;  // the trace is damaged: stop following it
  bool reported = false;
  bool request_sent = false;
  bool retried = false;      // asked again after a walk that ran out of time
  std::string request_path;  // where the holder request was written
  Clock::time_point request_time;
};

LiveWatch::LiveWatch(std::string trace_dir, analysis::AnalysisOptions options, bool holder_requests,
                     std::ostream& messages)
    : trace_dir_(std::move(trace_dir)),
      options_(std::move(options)),
      holder_requests_(holder_requests),
      messages_(messages) {}

// Requests a process never took (it ended first) would otherwise stay in
// the user's trace folder.
LiveWatch::~LiveWatch() {
  for (const auto& [path, f] : followed_) {
    if (!f->request_sent) continue;
    std::error_code ec;
    for (const char* suffix : {"", ".partial", ".taken"}) fs::remove(f->request_path + suffix, ec);
  }
}

void LiveWatch::poll() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(trace_dir_, ec)) {
    if (entry.path().extension() != ".trace") continue;
    auto& slot = followed_[entry.path().string()];
    if (!slot) {
      slot = std::make_unique<Followed>(entry.path().string());
      slot->analysis = std::make_unique<analysis::ProcessAnalysis>(options_);
    }
  }
  for (auto& [path, f] : followed_) {
    if (f->broken) continue;
    read_new(*f);
    if (!f->broken) consider(*f);
  }
}

void LiveWatch::read_new(Followed& f) {
  try {
    f.feed->read([&f](const trace::Record& record) { f.analysis->consume(record); });
    if (f.feed->replaced()) {
      // Compacted: the new file holds what was read, as a summary, and the
      // events since. Start over on it (a leak already said stays said).
      f.feed = std::make_unique<trace::TraceFeed>(f.path, true);
      f.analysis = std::make_unique<analysis::ProcessAnalysis>(options_);
      f.feed->read([&f](const trace::Record& record) { f.analysis->consume(record); });
    }
  } catch (const trace::TraceError&) {
    // The file is not a trace yet (its header is not written): the next
    // poll opens it again.
    return;
  }
  // Damage stops the live view only (the final report reads the file again
  // and says what is wrong).
  if (f.feed->error()) f.broken = true;
}

void LiveWatch::send_holder_request(Followed& f, int seconds) {
  nlohmann::json request = {{"request_id", next_request_id_++}, {"sites", nlohmann::json::array()}};
  if (seconds > 0) request["seconds"] = seconds;
  std::size_t count = 0;
  for (std::uint32_t site : f.analysis->detected_sites()) {
    if (count++ == 3) break;
    nlohmann::json addresses = nlohmann::json::array();
    for (const auto& [address, size] : f.analysis->recent_allocations(site, 256)) {
      addresses.push_back({address, size});
    }
    request["sites"].push_back({{"site_id", site}, {"addresses", addresses}});
  }
  std::string final_path =
      trace_dir_ + "/gpuleak-" + std::to_string(f.analysis->process().pid) + ".holder-request.json";
  std::string partial = final_path + ".partial";
  {
    std::ofstream out(partial);
    out << request.dump();
  }
  std::error_code ec;
  fs::rename(partial, final_path, ec);
  f.request_sent = true;
  f.request_path = final_path;
  f.request_time = Clock::now();
}

void LiveWatch::consider(Followed& f) {
  if (f.reported) return;
  std::vector<std::uint32_t> sites = f.analysis->detected_sites();
  if (sites.empty()) return;
  bool wait_for_holder = holder_requests_ && f.analysis->python_active();
  if (wait_for_holder && !f.request_sent) {
    send_holder_request(f);
    return;
  }
  if (wait_for_holder) {
    std::optional<analysis::HolderFinding> holder = f.analysis->holder(sites.front());
    bool cut_short = holder && holder->answer.walk_timed_out;
    if (cut_short && !f.retried) {
      send_holder_request(f, kRetrySeconds);
      f.retried = true;
      return;
    }
    auto patience = kHolderPatience + std::chrono::seconds(f.retried ? kRetrySeconds : 0);
    if ((!holder || cut_short) && Clock::now() - f.request_time < patience) return;
  }
  analysis::GrowthReport growth = f.analysis->growth_report();
  if (growth.verdict != analysis::Verdict::kLeak) return;  // the holder said: bounded
  messages_ << "gpuleak: [pid " << f.analysis->process().pid << "] "
            << report::live_leak_message(growth) << std::endl;
  f.reported = true;
  ++leak_messages_;
}

}  // namespace gpuleak::cli
