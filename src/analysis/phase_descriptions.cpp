// ProcessAnalysis, its phases in words: what a phase's iterations are, why
// they were taken as the iterations, and why no verdict could be reached yet.
#include <fmt/format.h>

#include "analysis/process_analysis.h"

namespace gpuleak::analysis {

std::string ProcessAnalysis::phase_name(const Phase& phase) {
  std::string name;
  auto described = clock_descriptions_.find(phase.clock);
  switch (phase.clock.source) {
    case trace::StepSource::kExplicit:
      name = "gpuleak.step() calls";
      break;
    case trace::StepSource::kOptimizerHook:
      name = "optimizer steps";
      break;
    case trace::StepSource::kDataLoader:
      name = described != clock_descriptions_.end() && !described->second.empty()
                 ? described->second
                 : "batches of a DataLoader";
      break;
    case trace::StepSource::kAllocationPeriod: {
      name = "iterations of a loop";
      const FoundLoop* loop = finder_.loop(phase.clock.clock);
      if (loop != nullptr && loop->thread_per_iteration) {
        // Its anchor is the threads' common start (libc's), not a line of
        // the program: name the first frame with a source line instead.
        name = "threads started one per iteration";
        std::vector<Frame> frames = catalog_.frames(loop->anchor_stack);
        for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
          if (f->file.empty() || f->function.empty()) continue;
          std::string file = f->file.substr(f->file.find_last_of('/') + 1);
          name +=
              " (each running " + f->function.substr(0, f->function.find('(')) + ", " + file + ")";
          break;
        }
        break;
      }
      if (auto frame = finder_.loop_frame(phase.clock.clock, catalog_)) {
        // A C++ function's name without its parameter list.
        std::string function = frame->function.substr(0, frame->function.find('('));
        name = "iterations of the loop in " + (function.empty() ? "?" : function);
        if (!frame->file.empty()) {
          std::string file = frame->file.substr(frame->file.find_last_of('/') + 1);
          name += " (" + file + (frame->line ? ":" + std::to_string(frame->line) : "") + ")";
        }
      }
      break;
    }
    case trace::StepSource::kPythonLoop:
      // "iterations of the loop in main (train.py:49)", from the package's
      // iteration_clock annotation.
      name = described != clock_descriptions_.end() && !described->second.empty()
                 ? described->second
                 : "iterations of a loop of the main script";
      break;
    case trace::StepSource::kTimeWindow:
      name = fmt::format("{:g}-second time windows", options_.time_window_s);
      break;
    default:
      name = "steps of an unknown source";
  }
  return phase.label.empty() ? name : phase.label + ": " + name;
}

std::string ProcessAnalysis::phase_reason(const Phase& phase) {
  switch (phase.clock.source) {
    case trace::StepSource::kExplicit:
      return "the program marks its iterations with gpuleak.step()";
    case trace::StepSource::kOptimizerHook:
      return "one step per optimizer.step() (torch.optim's step hooks; with several "
             "optimizers, the first that steps)";
    case trace::StepSource::kDataLoader:
      return "one step per batch the DataLoader hands out, where no optimizer steps";
    case trace::StepSource::kAllocationPeriod: {
      const FoundLoop* loop = finder_.loop(phase.clock.clock);
      if (loop == nullptr) return "a loop found in the allocations";
      if (loop->thread_per_iteration) {
        return fmt::format(
            "the program marks no steps here, and no thread repeats anything, but the threads it "
            "starts one after another allocate alike: each thread is one time round (~{:.0f} "
            "allocations, {:.0f} % alike from one to the next)",
            loop->mean_piece_events, 100 * loop->similarity);
      }
      return fmt::format(
          "the program marks no steps here, and its allocations repeat: the same places "
          "every ~{:.0f} allocations ({:.0f} % alike from one time round to the next)",
          loop->mean_piece_events, 100 * loop->similarity);
    }
    case trace::StepSource::kPythonLoop:
      return pool_judged(phase)
                 ? "the program marks no steps and its arrays are hidden in a pool: one step per "
                   "time round the main script's outermost busy loop (Python's sys.monitoring), "
                   "with the pool's bytes in use read at each"
                 : "the program marks no steps: one step per time round the main script's "
                   "outermost busy loop (Python's sys.monitoring)";
    case trace::StepSource::kTimeWindow:
      return "the program marks no steps and no loop was found in its allocations";
    default:
      return "";
  }
}

std::string ProcessAnalysis::undecided_reason(const GrowthReport& primary) {
  if (primary.verdict != Verdict::kNotYet) return "";
  double seconds = last_time_ns_ > first_time_ns_
                       ? static_cast<double>(last_time_ns_ - first_time_ns_) / 1e9
                       : 0;
  std::uint64_t needed = options_.growth.warmup_steps + options_.growth.min_steps;
  if (primary.step_source == trace::step_source_name(trace::StepSource::kTimeWindow)) {
    // The windows seen and needed as well: a short program whose loop
    // allocates nothing the collector sees (an executable graph launched per
    // iteration) is told how far it was from a verdict by time alone.
    return fmt::format(
        "no repeating loop was found in {:.1f} s of the program ({} allocations), and it "
        "marks no steps; judged by time instead: {} window{} of {:g} s, a verdict needs {}; "
        "mark each iteration with gpuleak.step() (a verdict needs {} iterations)",
        seconds, allocations_, primary.steps, primary.steps == 1 ? "" : "s", options_.time_window_s,
        needed, needed);
  }
  return fmt::format("only {} {} so far; a verdict needs {} ({} warm-up)", primary.steps,
                     primary.phase.empty() ? "steps" : primary.phase, needed,
                     options_.growth.warmup_steps);
}

std::string ProcessAnalysis::python_loop_note() const {
  if (python_loop_unavailable_.empty()) return "";
  return "gpuleak could not follow the main script's loop (" + python_loop_unavailable_ +
         "); mark each iteration with gpuleak.step()";
}

}  // namespace gpuleak::analysis
