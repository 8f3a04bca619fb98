// Follows the traces of a running job (one per process, appearing as
// processes start) and says on stderr, while the job runs, when a process
// leaks. For PyTorch jobs it first asks the process who holds the growing
// memory (a holder request, docs/python-protocol.md) and waits briefly for
// the answer, so the message can name the holder and the fix; a walk that
// ran out of time is asked once more, with more time.
//
// Single-threaded: call poll() from the loop that waits for the program.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "analysis/process_analysis.h"

namespace gpuleak::cli {

class LiveWatch {
 public:
  LiveWatch(std::string trace_dir, analysis::AnalysisOptions options, bool holder_requests,
            std::ostream& messages);
  ~LiveWatch();

  // Reads what the processes wrote since the last call.
  void poll();

  // Number of LEAK messages printed.
  int leak_messages() const { return leak_messages_; }

 private:
  struct Followed;
  void read_new(Followed& f);
  void consider(Followed& f);
  // `seconds` > 0 asks the walk for that time budget instead of its default.
  void send_holder_request(Followed& f, int seconds = 0);

  std::string trace_dir_;
  analysis::AnalysisOptions options_;
  bool holder_requests_;
  std::ostream& messages_;
  std::map<std::string, std::unique_ptr<Followed>> followed_;
  int leak_messages_ = 0;
  int next_request_id_ = 1;
};

}  // namespace gpuleak::cli
