// Finds the steps of a program's loops in its own allocation stream (the
// `allocation-period` step source), without any mark from the program: what
// serves evaluation and inference loops, custom optimizers, JAX, CuPy and CUDA
// C++ programs alike. One pass of a loop is one step; the code below calls it
// an iteration of the loop it follows.
//
// The idea. A loop body makes the same calls each time round, so the places
// its allocations come from repeat. Looked at through the call stack, a loop
// in function F shows as the lines of F that the allocations pass through:
// at the depth of F's frame, the keys (the call path down to that frame and
// its line) cycle once per iteration, while deeper frames (inside the model,
// inside a layer) only say what one statement did. So for each thread the
// finder looks at the stack depths from the outermost inwards and takes the
// shallowest at which a key repeats whole (repetition.h): that is the
// outermost loop that goes round often enough, and its anchor key marks
// where each iteration starts. At a depth, consecutive events under the
// same call of one statement (one `model(x)`) fold into one key, so the
// layers of a model never look like iterations of the loop that calls it;
// an allocation made by the statement itself (a leaf) never folds, so a
// loop whose body is one allocating line still shows its iterations.
//
// The finder is a delay line in front of the analysis: records go in with
// push() in trace order and come out of pop() in the same order, with the
// boundaries that fall before them, once they are decided. While it follows
// a loop, a record is held only until the loop's next iteration begins; while
// it searches (at the start, or after a loop ended), records are held until a
// loop is found, so boundaries are placed from the loop's first iteration,
// or until `max_held_records`, when the oldest are let through without
// boundaries. A loop has ended when its anchor has not come back for
// `lost_after_pieces` times its usual length; when a loop seen before comes
// back, its iterations go on counting under the same id, so a training loop
// interrupted by validation passes is one loop, the validation loop another.
//
// Not thread-safe. Needs the stack definitions (StackCatalog) of the records
// it is given before it is given them, as traces have them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "analysis/model/stack_catalog.h"
#include "analysis/steps/repetition.h"
#include "trace/records.h"
#include "trace/ring_queue.h"

namespace gpuleak::analysis {

struct StepFinderOptions {
  RepetitionOptions repetition;
  // Records held while searching, at most; beyond, the oldest go on without
  // boundaries.
  std::size_t max_held_records = 1 << 17;
  // A search looks at this many of a thread's latest allocations at most.
  std::size_t search_window_events = 16384;
  // Searches start once a thread made this many allocations, and are
  // repeated each time the held allocations grew by half.
  std::size_t min_search_events = 24;
  double lost_after_pieces = 8;
  std::size_t max_depth = 64;
};

// A loop the finder found: one of the program's clocks.
struct FoundLoop {
  std::uint32_t id = 0;                // 1, 2, ... in order of discovery
  std::uint32_t thread_id = 0;         // the thread it was found on
  std::vector<std::uint32_t> threads;  // every thread that runs it (request handlers)
  std::size_t depth = 0;               // stack depth (outermost frame 0) of the loop's statements
  std::uint64_t anchor_key = 0;
  bool anchor_is_leaf = false;
  std::uint32_t anchor_stack = 0;    // a stack whose key is the anchor (to name the loop)
  std::uint64_t iterations = 0;      // boundaries placed so far (one before each time round)
  double mean_piece_events = 0;      // its threads' allocations per iteration
  double mean_piece_all_events = 0;  // every thread's allocations per iteration
  double similarity = 0;             // how alike its iterations were when it was found
  bool retired = false;              // a loop inside another one, found first and dropped
  // Each time round is a thread of its own (a worker started per batch):
  // found in the allocations of threads too short-lived to repeat anything
  // alone, taken one after another; every thread runs it.
  bool thread_per_iteration = false;
  bool runs_on(std::uint32_t thread) const;

  // The statements of its body (keys at its depth) and in how many of the
  // iterations followed they ran: a loop found under one that runs in most
  // iterations is the body's own inner loop, not another phase.
  struct BodyStatement {
    std::uint64_t iterations = 0;
    std::uint64_t last_iteration = ~0ull;
  };
  static constexpr std::size_t kMaxBodyStatements = 256;
  std::unordered_map<std::uint64_t, BodyStatement> body_statements;
  std::uint64_t body_iterations = 0;  // iterations followed (anchors seen) since found
  // The key counted last and in which iteration: most allocations come from
  // the same statement as the one before, which changes nothing the second
  // time in an iteration (saves a hash lookup per allocation).
  std::uint64_t last_counted_key = 0;
  std::uint64_t last_counted_iteration = ~0ull;
  void count_body_statement(std::uint64_t key);
  bool part_of_every_iteration(std::uint64_t key) const;
};

// What pop() hands out: a record, or a boundary that comes before the next one.
struct FinderItem {
  bool is_boundary = false;
  trace::Record record;         // when !is_boundary (a boundary leaves it as it was)
  std::uint32_t loop_id = 0;    // when is_boundary
  std::uint64_t iteration = 0;  // boundaries of this loop before this one
  std::uint64_t time_ns = 0;
};

class StepFinder {
 public:
  explicit StepFinder(StepFinderOptions options = {});

  // An event record (definitions go to the catalog, not here). The catalog
  // is the one the records' stacks are defined in (the same each call).
  // A copy is made of the event alone, not of a whole trace::Record.
  void push(const trace::Record& record, const StackCatalog& catalog);
  void push(trace::Record&& record, const StackCatalog& catalog);
  // The end of the trace: decide what is held.
  void finish(const StackCatalog& catalog);
  bool pop(FinderItem& item);

  const std::vector<FoundLoop>& loops() const { return loops_; }
  const FoundLoop* loop(std::uint32_t id) const;
  bool searching() const { return following_ == 0; }
  std::uint64_t allocations_seen() const { return allocations_seen_; }
  // The frame of the loop's statements (the anchor stack at the loop's depth),
  // for naming it: "evaluate" at eval.py:70. Empty when the stack is unknown.
  std::optional<Frame> loop_frame(std::uint32_t loop_id, StackCatalog& catalog) const;

 private:
  // A record while it waits in the finder: the event kinds without the
  // definitions' larger alternatives (88 bytes, not trace::Record's 160);
  // anything else the caller pushes waits whole, on the heap.
  using HeldEvent = std::variant<trace::AllocRecord, trace::FreeRecord, trace::AllocFailedRecord,
                                 trace::StepRecord, trace::SampleRecord, trace::AnnotationRecord,
                                 trace::ContextRecord, trace::ExitRecord, trace::LostRecord,
                                 std::unique_ptr<trace::Record>>;
  struct Held {
    HeldEvent event;
    bool boundary_before = false;
    std::uint32_t loop_id = 0;
    std::uint64_t iteration = 0;
  };
  static HeldEvent to_held_event(trace::Record&& record);
  static HeldEvent to_held_event(const trace::Record& record);
  void on_pushed();  // the record just pushed is held_.back()
  static const trace::AllocRecord* as_alloc(const HeldEvent& event);  // null: not an allocation
  static std::uint64_t time_of(const HeldEvent& event);
  // The records pushed and not popped yet, oldest first: the released ones
  // (decided, for pop() to hand out), then the held ones, in one array, so
  // that releasing a record never moves it. Indices, front() and size() are
  // the held ones'.
  class Records {
   public:
    std::size_t size() const { return all_.size() - released_; }
    bool empty() const { return size() == 0; }
    Held& operator[](std::size_t i) { return all_[released_ + i]; }
    const Held& operator[](std::size_t i) const { return all_[released_ + i]; }
    Held& front() { return all_[released_]; }
    Held& back() { return all_.back(); }
    void push_back(Held&& held) { all_.push_back(std::move(held)); }
    // The oldest held record is decided.
    void release_front() { ++released_; }
    Held& released_front() { return all_.front(); }
    void pop_released() {
      all_.pop_front();
      --released_;
    }

   private:
    trace::RingQueue<Held> all_;
    std::size_t released_ = 0;
  };
  // What pop() hands out next: a boundary, or (!is_boundary) the oldest
  // released record.
  struct Ready {
    bool is_boundary = false;
    std::uint32_t loop_id = 0;
    std::uint64_t iteration = 0;
    std::uint64_t time_ns = 0;
  };
  struct Path {
    std::vector<std::uint64_t> prefix_hashes;  // outermost first
    std::uint64_t leaf_key = 0;
  };
  const Path& path_of(std::uint32_t stack_id);
  std::uint64_t key_at(std::uint32_t stack_id, std::size_t depth);

  // A loop found in one thread's allocations: at which depth, its anchor,
  // and where (indices into the stacks searched) it first and last came.
  struct Candidate {
    std::size_t depth = 0;
    std::uint64_t anchor = 0;
    std::size_t first = 0, last = 0, occurrences = 0;
    double similarity = 0;
  };
  // The shallowest depth (below `below_depth`) at which a thread's
  // allocations, given by their stacks in order, repeat.
  // `thread_starts` (for threads taken one after another): where each
  // thread's allocations begin; calls are not folded across them.
  std::optional<Candidate> search_thread(const std::vector<std::uint32_t>& stacks,
                                         std::size_t below_depth, bool require_ongoing,
                                         const std::vector<bool>* thread_starts = nullptr);
  // Threads too short-lived to repeat anything alone, one after another: a
  // thread started per iteration. Searched when no thread shows a loop.
  std::optional<FoundLoop> search_short_threads(
      const std::unordered_map<std::uint32_t, std::vector<std::uint32_t>>& by_thread,
      std::size_t held_end, bool require_ongoing, bool* python);
  FoundLoop loop_of(std::uint32_t thread, const std::vector<std::uint32_t>& stacks,
                    const Candidate& candidate) const;
  // Whether a stack's frame at `depth` (its innermost Python frame when it
  // has fewer) is one of gpuleak's own: what repeats under it is not a loop
  // of the program.
  bool in_gpuleak_frame(std::uint32_t stack_id, std::size_t depth) const;

  // Whether a thread the followed loop does not run on has now gone round
  // it often enough to count its iterations too.
  bool joins_loop(const FoundLoop& loop, const trace::AllocRecord& alloc);
  // `returning`: a known loop other than the followed one whose anchor this is.
  void on_alloc_following(const trace::AllocRecord& alloc, const FoundLoop* returning);
  // Follows a loop seen before again, from the last held record on.
  void resume(std::uint32_t id);
  // The followed loop has ended: search again.
  void lose_loop();
  void maybe_search(bool at_end);
  // Searches the held allocations; on success places boundaries in held_ and
  // starts following the loop found.
  // `min_cover`: the fraction of a thread's held allocations the loop must
  // span (inside one long iteration of another loop: most of it).
  // `inside_loop`: the loop followed, when looking for one inside its
  // current iteration.
  bool search(bool require_ongoing, std::size_t held_end, double min_cover = 0,
              std::uint32_t inside_loop = 0);
  // Places a loop's boundaries in held_[0, held_end), lets through what is
  // decided, and follows it when held_end is the end.
  void follow(std::uint32_t id, std::size_t held_end);
  // Moves to a loop at a shallower depth than the one followed, if the
  // recent allocations show one.
  void recheck_shallower(const FoundLoop& loop);
  // Probation: whether a depth above the loop moves between statements but
  // too rarely yet to tell if it repeats; whether a loop above it shows now
  // (then it takes over); letting the held records through when it ends.
  bool shallower_undecided(const FoundLoop& loop);
  bool probation_found_shallower(FoundLoop& loop);
  void end_probation(FoundLoop& loop);
  std::vector<std::uint32_t> held_stacks(std::uint32_t thread) const;
  std::uint32_t adopt(const FoundLoop& candidate);
  void place_boundaries(FoundLoop& loop, std::size_t begin, std::size_t end);
  void release_until(std::size_t held_index);
  // The loop's anchor came again: the piece since the last one is over, and
  // its length (in the loop's threads' allocations, and in all) joins the
  // loop's running means.
  void close_piece(FoundLoop& loop);
  void trim_held();
  const FoundLoop* known_anchor(const trace::AllocRecord& alloc);

  const StackCatalog* catalog_ = nullptr;  // the latest push()'s
  StepFinderOptions options_;
  std::unordered_map<std::uint32_t, Path> paths_;
  Path unknown_path_;  // the path of a stack not defined yet (not cached)
  std::vector<FoundLoop> loops_;
  std::uint32_t following_ = 0;  // id of the loop followed, 0 while searching

  Records held_;
  trace::RingQueue<Ready> ready_;
  std::size_t held_allocations_ = 0;
  std::size_t next_search_at_ = 0;
  std::uint64_t allocations_seen_ = 0;

  // Following: the loop thread's key at the loop depth before this event,
  // and its allocations since the anchor last came.
  std::unordered_map<std::uint32_t, std::uint64_t> previous_key_;  // per thread
  // Threads the followed loop does not run on: their key at its depth, and
  // how many of its iterations they started (joins_loop()).
  struct Outsider {
    std::uint64_t previous_key = 0;
    std::uint32_t anchors = 0;
  };
  std::unordered_map<std::uint32_t, Outsider> outsiders_;
  std::size_t since_anchor_ = 0;        // the loop's threads' allocations since its anchor came
  std::size_t since_anchor_all_ = 0;    // every thread's
  std::uint64_t next_recheck_ = 0;      // iterations of the followed loop at the next recheck
  std::size_t next_nested_search_ = 0;  // since_anchor_ at the next search inside an iteration
  bool probation_ = false;  // the followed loop's boundaries are held back (see follow())
  std::uint64_t probation_since_ns_ = 0;
  std::uint64_t probation_iterations_ = 0;
  std::uint64_t next_probation_check_ = 0;
  // The latest allocations of every thread (thread, stack), for rechecks.
  trace::RingQueue<std::pair<std::uint32_t, std::uint32_t>> recent_;
  // Known loops' previous keys per thread (for recognising a loop's return).
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> previous_key_by_loop_;
};

}  // namespace gpuleak::analysis
