#include "analysis/steps/step_finder.h"

#include <algorithm>

namespace gpuleak::analysis {

namespace {

// A loop found inside one long iteration of another must fill this much of it.
constexpr double kNestedCover = 0.5;

// A thread that was not running the followed loop when it was found joins it
// after starting this many of its iterations (request handlers started after
// the first one served a few batches).
constexpr std::uint32_t kJoinAfterAnchors = 3;

std::uint64_t mix(std::uint64_t seed, std::uint64_t value) {
  std::uint64_t h = seed ^ (value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  return h;
}

// Keys of statements a deeper call passed through have the low bit clear
// (they fold when they repeat back to back); keys of the allocating
// statement itself have it set (they never fold).
constexpr std::uint64_t kLeafBit = 1;

std::uint64_t time_of(const trace::Record& record) {
  return std::visit(
      [](const auto& r) -> std::uint64_t {
        if constexpr (requires { r.time_ns; }) return r.time_ns;
        return 0;
      },
      record);
}

}  // namespace

const trace::AllocRecord* StepFinder::as_alloc(const HeldEvent& event) {
  const auto* alloc = std::get_if<trace::AllocRecord>(&event);
  return alloc != nullptr && alloc->stack_id != 0 ? alloc : nullptr;
}

std::uint64_t StepFinder::time_of(const HeldEvent& event) {
  return std::visit(
      [](const auto& e) -> std::uint64_t {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, std::unique_ptr<trace::Record>>) {
          return analysis::time_of(*e);
        } else {
          return e.time_ns;
        }
      },
      event);
}

// The event kinds go in as they are; anything else (the finder is given
// events only, but takes any record) goes in whole, on the heap.
StepFinder::HeldEvent StepFinder::to_held_event(trace::Record&& record) {
  return std::visit(
      [&](auto&& r) -> HeldEvent {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_constructible_v<HeldEvent, std::in_place_type_t<T>, T&&>) {
          return HeldEvent(std::in_place_type<T>, std::forward<decltype(r)>(r));
        } else {
          return std::make_unique<trace::Record>(std::move(record));
        }
      },
      std::move(record));
}

StepFinder::HeldEvent StepFinder::to_held_event(const trace::Record& record) {
  return std::visit(
      [&](const auto& r) -> HeldEvent {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_constructible_v<HeldEvent, std::in_place_type_t<T>, const T&>) {
          return HeldEvent(std::in_place_type<T>, r);
        } else {
          return std::make_unique<trace::Record>(record);
        }
      },
      record);
}

bool FoundLoop::runs_on(std::uint32_t thread) const {
  return thread_per_iteration || std::find(threads.begin(), threads.end(), thread) != threads.end();
}

StepFinder::StepFinder(StepFinderOptions options)
    : options_(options), next_search_at_(options.min_search_events) {}

const FoundLoop* StepFinder::loop(std::uint32_t id) const {
  return id >= 1 && id <= loops_.size() ? &loops_[id - 1] : nullptr;
}

const StepFinder::Path& StepFinder::path_of(std::uint32_t stack_id) {
  auto [it, inserted] = paths_.try_emplace(stack_id);
  Path& path = it->second;
  if (!inserted) return path;
  std::uint64_t hash = 0x51ed270b27a5c1f3ull;
  if (const trace::StackRecord* stack = catalog_->stack(stack_id)) {
    // Outermost frame first. Python frames say where the program is; when a
    // stack has none (CUDA C++, threads Python does not run), its native
    // return addresses do the same.
    if (!stack->python.empty()) {
      for (auto f = stack->python.rbegin(); f != stack->python.rend(); ++f) {
        hash = mix(hash, (std::uint64_t{f->code_id} << 32) | f->line);
        path.prefix_hashes.push_back(hash & ~kLeafBit);
      }
    } else {
      for (auto a = stack->native.rbegin(); a != stack->native.rend(); ++a) {
        hash = mix(hash, *a);
        path.prefix_hashes.push_back(hash & ~kLeafBit);
      }
    }
  }
  path.leaf_key = mix(hash, stack_id) | kLeafBit;
  // A stack the definitions have not named yet is asked again next time.
  if (catalog_->stack(stack_id) == nullptr) {
    unknown_path_ = std::move(path);
    paths_.erase(it);
    return unknown_path_;
  }
  return path;
}

std::uint64_t StepFinder::key_at(std::uint32_t stack_id, std::size_t depth) {
  const Path& path = path_of(stack_id);
  std::size_t length = path.prefix_hashes.size();
  if (length == 0 || depth + 1 >= length) return path.leaf_key;
  return path.prefix_hashes[depth];
}

void StepFinder::push(const trace::Record& record, const StackCatalog& catalog) {
  catalog_ = &catalog;
  held_.push_back(Held{to_held_event(record)});
  on_pushed();
}

void StepFinder::push(trace::Record&& record, const StackCatalog& catalog) {
  catalog_ = &catalog;
  held_.push_back(Held{to_held_event(std::move(record))});
  on_pushed();
}

void StepFinder::on_pushed() {
  const trace::AllocRecord* alloc = as_alloc(held_.back().event);
  if (alloc != nullptr) {
    ++allocations_seen_;
    ++held_allocations_;
    recent_.push_back(std::pair{alloc->thread_id, alloc->stack_id});
    if (recent_.size() > options_.search_window_events) recent_.pop_front();
    const FoundLoop* returning = known_anchor(*alloc);
    if (following_ != 0) {
      on_alloc_following(*alloc, returning);
    } else if (returning != nullptr) {
      resume(returning->id);
    } else {
      maybe_search(false);
    }
  }
  trim_held();
}

void StepFinder::resume(std::uint32_t id) {
  // A loop seen before is back. What came between may hold a loop of its
  // own (a validation pass): look for it first. The returning record (the
  // last held) stays held: it starts the loop's next iteration.
  following_ = 0;
  search(/*require_ongoing=*/false, held_.size() - 1);
  FoundLoop& back = loops_[id - 1];
  // Its iterations since it came back (while the loop followed till now
  // was deciding it had ended) are held too.
  place_boundaries(back, 0, held_.size() - 1);
  release_until(held_.size() - 1);
  ready_.push_back(Ready{true, id, back.iterations++, time_of(held_.back().event)});
  following_ = id;
  previous_key_.clear();
  outsiders_.clear();
  if (const trace::AllocRecord* a = as_alloc(held_.back().event)) {
    previous_key_[a->thread_id] = back.anchor_key;
  }
  since_anchor_ = 0;
  since_anchor_all_ = 0;
  next_nested_search_ = 0;
}

void StepFinder::close_piece(FoundLoop& loop) {
  loop.mean_piece_events =
      0.9 * loop.mean_piece_events + 0.1 * (static_cast<double>(since_anchor_) + 1.0);
  loop.mean_piece_all_events =
      0.9 * loop.mean_piece_all_events + 0.1 * static_cast<double>(since_anchor_all_);
  since_anchor_ = 0;
  since_anchor_all_ = 0;
}

const FoundLoop* StepFinder::known_anchor(const trace::AllocRecord& alloc) {
  const FoundLoop* found = nullptr;
  const FoundLoop* followed = following_ != 0 ? &loops_[following_ - 1] : nullptr;
  for (const FoundLoop& loop : loops_) {
    if (loop.id == following_ || loop.retired || !loop.runs_on(alloc.thread_id)) continue;
    // A loop under a statement of the followed loop's body is not another
    // loop coming back: it runs inside each iteration (see search()).
    if (followed != nullptr && loop.depth > followed->depth &&
        followed->part_of_every_iteration(key_at(loop.anchor_stack, followed->depth)))
      continue;
    std::uint64_t key = key_at(alloc.stack_id, loop.depth);
    std::uint64_t& previous = previous_key_by_loop_[{loop.id, alloc.thread_id}];
    bool anchor = key == loop.anchor_key && (loop.anchor_is_leaf || previous != key);
    previous = key;
    if (anchor && found == nullptr) found = &loop;
  }
  return found;
}

void StepFinder::on_alloc_following(const trace::AllocRecord& alloc, const FoundLoop* returning) {
  FoundLoop& loop = loops_[following_ - 1];
  ++since_anchor_all_;
  if (!loop.runs_on(alloc.thread_id) && joins_loop(loop, alloc)) {
    loop.threads.push_back(alloc.thread_id);
    previous_key_.erase(alloc.thread_id);  // this allocation starts its next iteration
  }
  if (!loop.runs_on(alloc.thread_id)) {
    // The loop's threads went quiet while others work: it has ended.
    if (static_cast<double>(since_anchor_all_) >
        std::max(256.0, options_.lost_after_pieces * loop.mean_piece_all_events)) {
      lose_loop();
    }
    return;
  }
  std::uint64_t key = key_at(alloc.stack_id, loop.depth);
  std::uint64_t& previous_key = previous_key_[alloc.thread_id];
  bool anchor = key == loop.anchor_key && (loop.anchor_is_leaf || previous_key != key);
  previous_key = key;
  if (anchor) ++loop.body_iterations;
  loop.count_body_statement(key);
  double overdue_after = std::max(2.0 * static_cast<double>(options_.repetition.min_occurrences),
                                  2.0 * loop.mean_piece_events);
  if (anchor) {
    if (static_cast<double>(since_anchor_) > overdue_after) {
      // A long iteration: another loop may have run inside it (a short
      // validation pass); its iterations are still held.
      std::uint32_t outer = following_;
      following_ = 0;
      search(/*require_ongoing=*/false, held_.size() - 1, kNestedCover, outer);
      following_ = outer;
    }
    if (probation_) {
      Held& h = held_.back();
      h.boundary_before = true;
      h.loop_id = loop.id;
      h.iteration = loop.iterations++;
      ++probation_iterations_;
      close_piece(loop);
      if (probation_iterations_ >= next_probation_check_) {
        next_probation_check_ *= 2;
        if (probation_found_shallower(loop)) return;
      }
      // Held long enough: nothing above it repeats.
      std::uint64_t now = time_of(held_.back().event);
      if (probation_iterations_ >= 256 || held_allocations_ >= options_.search_window_events ||
          now >= probation_since_ns_ + 1'000'000'000ull) {
        if (!probation_found_shallower(loop)) end_probation(loop);
      }
      return;
    }
    // The iteration that began at the last anchor is complete: everything
    // before this record is decided.
    release_until(held_.size() - 1);
    ready_.push_back(Ready{true, loop.id, loop.iterations++, time_of(held_.front().event)});
    close_piece(loop);
    next_nested_search_ = 0;
    if (loop.depth > 0 && loop.iterations >= next_recheck_) {
      next_recheck_ = loop.iterations + std::min<std::uint64_t>(loop.iterations, 1024);
      recheck_shallower(loop);
    }
    return;
  }
  ++since_anchor_;
  // An iteration far longer than usual: the program may be in another loop
  // inside it (a validation pass between two training steps) or back in
  // one seen before.
  if (static_cast<double>(since_anchor_) > overdue_after) {
    if (returning != nullptr) {
      resume(returning->id);
      return;
    }
    if (since_anchor_ >= next_nested_search_) {
      next_nested_search_ =
          since_anchor_ +
          std::max<std::size_t>(since_anchor_ / 4, options_.repetition.min_occurrences);
      std::uint32_t outer = following_;
      following_ = 0;
      if (search(/*require_ongoing=*/true, held_.size(), kNestedCover, outer) &&
          following_ != outer)
        return;
      following_ = outer;
    }
  }
  double lost_after = std::max(64.0, options_.lost_after_pieces * loop.mean_piece_events);
  if (static_cast<double>(since_anchor_) > lost_after) lose_loop();
}

bool StepFinder::joins_loop(const FoundLoop& loop, const trace::AllocRecord& alloc) {
  // The key at the loop's depth holds the whole call path down to the
  // loop's statement: another thread that reaches the anchor by the same
  // path runs the same loop (one more request handler).
  Outsider& outsider = outsiders_[alloc.thread_id];
  std::uint64_t key = key_at(alloc.stack_id, loop.depth);
  bool anchor = key == loop.anchor_key && (loop.anchor_is_leaf || outsider.previous_key != key);
  outsider.previous_key = key;
  if (anchor) ++outsider.anchors;
  return anchor && outsider.anchors >= kJoinAfterAnchors;
}

void StepFinder::lose_loop() {
  // The loop has ended (or the program is in another one): search again,
  // from the last iteration's start, which is still held.
  following_ = 0;
  probation_ = false;
  next_search_at_ = held_allocations_ + options_.min_search_events;
}

void StepFinder::maybe_search(bool at_end) {
  if (!at_end && held_allocations_ < next_search_at_) return;
  if (search(/*require_ongoing=*/!at_end, held_.size())) return;
  std::size_t step = std::max(options_.min_search_events,
                              std::min(held_allocations_ / 2, options_.search_window_events / 4));
  next_search_at_ = held_allocations_ + step;
}

std::optional<StepFinder::Candidate> StepFinder::search_thread(
    const std::vector<std::uint32_t>& stacks, std::size_t below_depth, bool require_ongoing,
    const std::vector<bool>* thread_starts) {
  RepetitionOptions repetition = options_.repetition;
  repetition.max_pieces_since_last = require_ongoing ? options_.lost_after_pieces : 0;
  std::size_t max_length = 0;
  for (std::uint32_t stack : stacks) {
    max_length = std::max(max_length, path_of(stack).prefix_hashes.size());
  }
  std::size_t depths =
      std::min({std::max<std::size_t>(max_length, 1), options_.max_depth, below_depth});
  // Stacks deeper than max_depth: their allocating frames are compared too.
  bool leaf_pass = max_length > options_.max_depth && below_depth > max_length;
  std::vector<std::uint64_t> keys;
  std::vector<std::size_t> origin;  // index into `stacks` of each key
  for (std::size_t pass = 0; pass < depths + (leaf_pass ? 1 : 0); ++pass) {
    std::size_t depth = pass < depths ? pass : max_length;  // the leaf pass: every key a leaf
    keys.clear();
    origin.clear();
    for (std::size_t e = 0; e < stacks.size(); ++e) {
      std::uint64_t key = key_at(stacks[e], depth);
      bool new_thread = thread_starts != nullptr && (*thread_starts)[e];
      if ((key & kLeafBit) == 0 && !keys.empty() && keys.back() == key && !new_thread) continue;
      keys.push_back(key);
      origin.push_back(e);
    }
    if (keys.size() < 2 * repetition.min_occurrences) continue;
    auto found = find_repetition(keys, repetition);
    if (!found) continue;
    // Autograd's engine thread records under the Python stack lent by the
    // thread that called backward(), whose innermost frame is gpuleak's
    // wrapper: its backward passes repeat there, once per step, and deeper
    // depths are inside the wrapper too.
    if (in_gpuleak_frame(stacks[origin[found->first_index]], depth)) return std::nullopt;
    Candidate c;
    c.depth = depth;
    c.anchor = found->anchor;
    c.first = origin[found->first_index];
    c.last = origin[found->last_index];
    c.occurrences = found->occurrences;
    c.similarity = found->similarity;
    return c;  // the shallowest depth that repeats is the thread's loop
  }
  return std::nullopt;
}

bool StepFinder::in_gpuleak_frame(std::uint32_t stack_id, std::size_t depth) const {
  const trace::StackRecord* stack = catalog_ ? catalog_->stack(stack_id) : nullptr;
  if (stack == nullptr || stack->python.empty()) return false;
  std::size_t from_outermost = std::min(depth, stack->python.size() - 1);
  const trace::PythonFrame& frame = stack->python[stack->python.size() - 1 - from_outermost];
  const trace::PythonCodeRecord* code = catalog_->python_code(frame.code_id);
  return code != nullptr && is_gpuleak_python(code->filename);
}

FoundLoop StepFinder::loop_of(std::uint32_t thread, const std::vector<std::uint32_t>& stacks,
                              const Candidate& c) const {
  FoundLoop loop;
  loop.thread_id = thread;
  loop.threads = {thread};
  loop.depth = c.depth;
  loop.anchor_key = c.anchor;
  loop.anchor_is_leaf = (c.anchor & kLeafBit) != 0;
  loop.anchor_stack = stacks[c.first];
  loop.mean_piece_events =
      static_cast<double>(c.last - c.first) / static_cast<double>(c.occurrences - 1);
  loop.similarity = c.similarity;
  return loop;
}

void FoundLoop::count_body_statement(std::uint64_t key) {
  if (key == last_counted_key && body_iterations == last_counted_iteration) return;
  last_counted_key = key;
  last_counted_iteration = body_iterations;
  auto it = body_statements.find(key);
  if (it == body_statements.end()) {
    if (body_statements.size() >= kMaxBodyStatements) return;
    it = body_statements.emplace(key, BodyStatement{}).first;
  }
  if (it->second.last_iteration != body_iterations) {
    it->second.last_iteration = body_iterations;
    ++it->second.iterations;
  }
}

bool FoundLoop::part_of_every_iteration(std::uint64_t key) const {
  if (body_iterations < 8) return false;
  auto it = body_statements.find(key);
  return it != body_statements.end() &&
         2 * it->second.iterations >= static_cast<std::uint64_t>(body_iterations);
}

bool StepFinder::search(bool require_ongoing, std::size_t held_end, double min_cover,
                        std::uint32_t inside_loop) {
  const FoundLoop* inside = inside_loop != 0 ? &loops_[inside_loop - 1] : nullptr;
  // Each thread's allocations in the held records, latest window only.
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> by_thread;
  for (std::size_t i = 0; i < held_end; ++i) {
    if (const trace::AllocRecord* a = as_alloc(held_[i].event)) {
      by_thread[a->thread_id].push_back(a->stack_id);
    }
  }
  std::optional<FoundLoop> best;
  double best_score = 0;
  bool best_python = false, python_thread_undecided = false;
  for (auto& [thread, stacks] : by_thread) {
    if (stacks.size() < options_.min_search_events) continue;
    if (stacks.size() > options_.search_window_events) {
      stacks.erase(stacks.begin(),
                   stacks.end() - static_cast<std::ptrdiff_t>(options_.search_window_events));
    }
    bool python = std::any_of(stacks.begin(), stacks.end(), [&](std::uint32_t id) {
      const trace::StackRecord* s = catalog_->stack(id);
      return s != nullptr && !s->python.empty();
    });
    auto found = search_thread(stacks, SIZE_MAX, require_ongoing);
    if (!found) {
      python_thread_undecided |= python;
      continue;
    }
    // Inside one long iteration, only a loop that fills most of it counts
    // (a validation pass), not a short one that happened in it.
    if (static_cast<double>(found->last - found->first + 1) <
        min_cover * static_cast<double>(stacks.size()))
      continue;
    // A loop under a statement that most iterations of the followed loop run
    // (the requests of a batch, walked inside `model(batch)`) is part of its
    // body, however long this iteration was: not another phase, as a
    // validation pass called every 40 steps is.
    if (inside != nullptr && found->depth > inside->depth &&
        inside->part_of_every_iteration(key_at(stacks[found->first], inside->depth)))
      continue;
    // The loop that covers most of the thread's work wins; Python frames
    // name the user's loop, native ones (other threads) rarely do.
    double score = static_cast<double>(found->last - found->first + 1) * (python ? 2.0 : 1.0);
    if (!best || score > best_score) {
      best = loop_of(thread, stacks, *found);
      best_score = score;
      best_python = python;
    }
  }
  if (!best) {
    best = search_short_threads(by_thread, held_end, require_ongoing, &best_python);
    if (!best) return false;
    python_thread_undecided = false;
  }
  // A loop of a thread Python does not run (autograd's backward thread)
  // repeats sooner than the Python loop that drives it; while a Python
  // thread's allocations might still show theirs, wait (within reason).
  bool patient = require_ongoing && held_end == held_.size() &&
                 held_allocations_ < options_.search_window_events / 2;
  if (!best_python && python_thread_undecided && patient) return false;
  // The same loop may run on several threads (request handlers): each
  // thread that goes round it often enough counts its iterations too.
  best->threads = {best->thread_id};
  for (const auto& [thread, stacks] : by_thread) {
    if (thread == best->thread_id) continue;
    std::size_t occurrences = 0;
    std::uint64_t previous = 0;
    for (std::uint32_t stack : stacks) {
      std::uint64_t key = key_at(stack, best->depth);
      if (key == best->anchor_key && (best->anchor_is_leaf || previous != key)) ++occurrences;
      previous = key;
    }
    if (occurrences >= options_.repetition.min_occurrences) best->threads.push_back(thread);
  }
  follow(adopt(*best), held_end);
  return true;
}

std::optional<FoundLoop> StepFinder::search_short_threads(
    const std::unordered_map<std::uint32_t, std::vector<std::uint32_t>>& by_thread,
    std::size_t held_end, bool require_ongoing, bool* python) {
  std::size_t short_threads = 0;
  for (const auto& [thread, stacks] : by_thread) {
    if (stacks.size() < options_.min_search_events) ++short_threads;
  }
  if (short_threads < 2 * options_.repetition.min_occurrences) return std::nullopt;
  std::vector<std::uint32_t> stacks;
  std::vector<bool> starts;
  std::uint32_t first_thread = 0, previous_thread = 0;
  for (std::size_t i = 0; i < held_end; ++i) {
    const trace::AllocRecord* a = as_alloc(held_[i].event);
    if (a == nullptr) continue;
    auto it = by_thread.find(a->thread_id);
    if (it == by_thread.end() || it->second.size() >= options_.min_search_events) continue;
    if (stacks.empty()) first_thread = a->thread_id;
    starts.push_back(stacks.empty() || a->thread_id != previous_thread);
    stacks.push_back(a->stack_id);
    previous_thread = a->thread_id;
  }
  if (stacks.size() > options_.search_window_events) {
    auto cut = static_cast<std::ptrdiff_t>(stacks.size() - options_.search_window_events);
    stacks.erase(stacks.begin(), stacks.begin() + cut);
    starts.erase(starts.begin(), starts.begin() + cut);
    starts.front() = true;
  }
  auto found = search_thread(stacks, SIZE_MAX, require_ongoing, &starts);
  // Each time round must be a thread of its own: the anchor at a thread's
  // start (one made per batch), not a call repeated within each thread.
  if (!found || !starts[found->first]) return std::nullopt;
  FoundLoop loop = loop_of(first_thread, stacks, *found);
  loop.thread_per_iteration = true;
  *python = std::any_of(stacks.begin(), stacks.end(), [&](std::uint32_t id) {
    const trace::StackRecord* s = catalog_->stack(id);
    return s != nullptr && !s->python.empty();
  });
  return loop;
}

void StepFinder::follow(std::uint32_t id, std::size_t held_end) {
  FoundLoop& loop = loops_[id - 1];
  place_boundaries(loop, 0, held_end);
  // Records before the last iteration's start are decided; from there on
  // the finder follows the loop.
  std::size_t last_anchor = 0;
  for (std::size_t i = held_end; i-- > 0;) {
    if (held_[i].boundary_before && held_[i].loop_id == id) {
      last_anchor = i;
      break;
    }
  }
  if (held_end == held_.size()) {
    following_ = id;
    next_recheck_ =
        std::max<std::uint64_t>(loop.iterations * 2, 2 * options_.repetition.min_occurrences);
    // A loop inside one statement (a model's layers) repeats long before the
    // program's own loop around it has gone round often enough to show:
    // while the depths above it have too little to tell, everything stays
    // held, so a loop found above it takes over from the very start.
    probation_ = loop.depth > 0 && shallower_undecided(loop);
    if (probation_) {
      probation_since_ns_ = time_of(held_.front().event);
      probation_iterations_ = 0;
      next_probation_check_ = 2 * options_.repetition.min_occurrences;
    }
    // The loop thread's key at the loop depth before the next event, and
    // its allocations since the last anchor.
    since_anchor_ = 0;
    since_anchor_all_ = 0;
    previous_key_.clear();
    outsiders_.clear();
    std::size_t first_anchor = SIZE_MAX, all_between = 0, anchors = 0;
    for (std::size_t i = 0; i < held_.size(); ++i) {
      if (held_[i].boundary_before && held_[i].loop_id == id) {
        if (first_anchor == SIZE_MAX) first_anchor = i;
        if (i < last_anchor) ++anchors;
      }
      if (const trace::AllocRecord* a = as_alloc(held_[i].event)) {
        if (first_anchor != SIZE_MAX && i < last_anchor) ++all_between;
        if (i > last_anchor) ++since_anchor_all_;
        if (!loop.runs_on(a->thread_id)) continue;
        previous_key_[a->thread_id] = key_at(a->stack_id, loop.depth);
        if (i > last_anchor) ++since_anchor_;
      }
    }
    // Allocations of every thread per iteration (the autograd engine's too).
    loop.mean_piece_all_events =
        anchors > 0 ? static_cast<double>(all_between) / static_cast<double>(anchors)
                    : loop.mean_piece_events;
  }
  if (following_ == id && probation_) return;  // nothing is let through yet
  release_until(last_anchor);
}

bool StepFinder::shallower_undecided(const FoundLoop& loop) {
  std::vector<std::uint32_t> stacks = held_stacks(loop.thread_id);
  for (std::size_t depth = 0; depth < loop.depth; ++depth) {
    std::size_t keys = 0, distinct_runs = 0;
    std::uint64_t previous = 0, first_key = 0;
    bool varies = false;
    for (std::uint32_t stack : stacks) {
      std::uint64_t key = key_at(stack, depth);
      if (keys == 0) first_key = key;
      varies |= key != first_key;
      if ((key & kLeafBit) == 0 && keys > 0 && key == previous) continue;
      ++keys;
      ++distinct_runs;
      previous = key;
    }
    // A depth where the program moves between statements, but not yet
    // often enough to show whether it repeats.
    if (varies && distinct_runs < 2 * options_.repetition.min_occurrences) return true;
  }
  return false;
}

std::vector<std::uint32_t> StepFinder::held_stacks(std::uint32_t thread) const {
  std::vector<std::uint32_t> stacks;
  for (std::size_t i = 0; i < held_.size(); ++i) {
    if (const trace::AllocRecord* a = as_alloc(held_[i].event)) {
      if (a->thread_id == thread) stacks.push_back(a->stack_id);
    }
  }
  return stacks;
}

void StepFinder::end_probation(FoundLoop& loop) {
  probation_ = false;
  std::size_t last_anchor = 0;
  for (std::size_t i = held_.size(); i-- > 0;) {
    if (held_[i].boundary_before && held_[i].loop_id == loop.id) {
      last_anchor = i;
      break;
    }
  }
  release_until(last_anchor);
}

bool StepFinder::probation_found_shallower(FoundLoop& loop) {
  // Any of the loop's threads may show the loop around it first (request
  // handlers each serve a share of the batches).
  std::vector<std::uint32_t> stacks;
  std::optional<Candidate> found;
  std::uint32_t thread_id = loop.thread_id;
  for (std::uint32_t thread : loop.threads) {
    stacks = held_stacks(thread);
    found = search_thread(stacks, loop.depth, /*require_ongoing=*/true);
    if (found) {
      thread_id = thread;
      break;
    }
  }
  if (!found) return false;
  // The loop inside took none of its boundaries out yet: drop them and let
  // the loop around it have the whole held stretch.
  for (std::size_t i = 0; i < held_.size(); ++i) {
    Held& h = held_[i];
    if (h.boundary_before && h.loop_id == loop.id) h.boundary_before = false;
  }
  loop.retired = true;
  loop.iterations = 0;
  probation_ = false;
  FoundLoop outer = loop_of(thread_id, stacks, *found);
  outer.threads = loop.threads;
  follow(adopt(outer), held_.size());
  return true;
}

void StepFinder::recheck_shallower(const FoundLoop& loop) {
  // Early on, a loop inside one statement (a model's layers) may be all
  // that repeats yet; once the program's own loop has gone round often
  // enough, it shows at a shallower depth, and the finder moves to it.
  // `loop` lives in loops_, which adopt() may grow: copy what is needed of
  // it first (ASan found the read after the move on an H200 trace).
  const std::uint32_t inner_id = loop.id;
  const std::size_t inner_depth = loop.depth;
  const std::vector<std::uint32_t> threads = loop.threads;
  std::uint32_t thread_id = loop.thread_id;
  std::vector<std::uint32_t> stacks;
  std::optional<Candidate> found;
  for (std::uint32_t candidate_thread : threads) {  // any of them may show it first
    stacks.clear();
    for (std::size_t i = 0; i < recent_.size(); ++i) {
      if (recent_[i].first == candidate_thread) stacks.push_back(recent_[i].second);
    }
    found = search_thread(stacks, inner_depth, /*require_ongoing=*/true);
    if (found) {
      thread_id = candidate_thread;
      break;
    }
  }
  if (!found) return;
  FoundLoop candidate = loop_of(thread_id, stacks, *found);
  candidate.threads = threads;
  std::uint32_t id = adopt(candidate);
  // The loop inside is part of the new one's body: it never comes back as
  // a loop of its own when an iteration runs long.
  loops_[inner_id - 1].retired = true;
  FoundLoop& shallower = loops_[id - 1];
  place_boundaries(shallower, 0, held_.size());
  std::size_t last_anchor = 0;
  for (std::size_t i = held_.size(); i-- > 0;) {
    if (held_[i].boundary_before && held_[i].loop_id == id) {
      last_anchor = i;
      break;
    }
  }
  // Its key before the next event, and the thread's allocations since its
  // anchor last came (from the recent allocations).
  std::size_t since = 0;
  std::uint64_t previous = 0;
  bool seen_anchor = false;
  for (std::size_t e = 0; e < stacks.size(); ++e) {
    std::uint64_t key = key_at(stacks[e], shallower.depth);
    bool anchor = key == shallower.anchor_key && (shallower.anchor_is_leaf || previous != key);
    previous = key;
    if (anchor) {
      since = 0;
      seen_anchor = true;
    } else if (seen_anchor) {
      ++since;
    }
  }
  following_ = id;
  previous_key_.clear();
  outsiders_.clear();
  previous_key_[thread_id] = previous;
  since_anchor_ = since;
  next_recheck_ =
      std::max<std::uint64_t>(shallower.iterations * 2, 2 * options_.repetition.min_occurrences);
  release_until(last_anchor);
}

std::uint32_t StepFinder::adopt(const FoundLoop& candidate) {
  for (FoundLoop& known : loops_) {
    // The anchor key holds the call path down to the loop's statement: the
    // same loop found on another thread is one more thread running it.
    if (known.depth == candidate.depth && known.anchor_key == candidate.anchor_key) {
      known.mean_piece_events = candidate.mean_piece_events;
      known.retired = false;
      known.thread_per_iteration |= candidate.thread_per_iteration;
      for (std::uint32_t thread : candidate.threads) {
        if (!known.runs_on(thread)) known.threads.push_back(thread);
      }
      return known.id;
    }
  }
  FoundLoop loop = candidate;
  loop.id = static_cast<std::uint32_t>(loops_.size() + 1);
  loop.iterations = 0;
  loops_.push_back(loop);
  return loop.id;
}

void StepFinder::place_boundaries(FoundLoop& loop, std::size_t begin, std::size_t end) {
  std::unordered_map<std::uint32_t, std::uint64_t> previous;  // per thread
  for (std::size_t i = begin; i < end; ++i) {
    const trace::AllocRecord* a = as_alloc(held_[i].event);
    if (a == nullptr || !loop.runs_on(a->thread_id)) continue;
    std::uint64_t key = key_at(a->stack_id, loop.depth);
    auto [last, first] = previous.try_emplace(a->thread_id, key);
    bool anchor = key == loop.anchor_key && (loop.anchor_is_leaf || first || last->second != key);
    last->second = key;
    if (!anchor) continue;
    // A boundary before every time round, the first too: it ends what came
    // before the loop (setup), as the warm-up's first boundary does.
    held_[i].boundary_before = true;
    held_[i].loop_id = loop.id;
    held_[i].iteration = loop.iterations++;
  }
}

void StepFinder::release_until(std::size_t held_index) {
  for (std::size_t n = 0; n < held_index && !held_.empty(); ++n) {
    const Held& h = held_.front();
    if (h.boundary_before) ready_.push_back(Ready{true, h.loop_id, h.iteration, time_of(h.event)});
    if (as_alloc(h.event) != nullptr) --held_allocations_;
    ready_.push_back(Ready{});  // the record itself, which stays where it is
    held_.release_front();
  }
  next_search_at_ = std::min(next_search_at_, held_allocations_ + options_.min_search_events);
}

void StepFinder::trim_held() {
  if (held_.size() <= options_.max_held_records) return;
  probation_ = false;
  // Nothing repeats (or the loop thread went quiet): let the oldest half go
  // on without boundaries, and search what stays.
  following_ = 0;
  release_until(held_.size() / 2);
}

void StepFinder::finish(const StackCatalog& catalog) {
  catalog_ = &catalog;
  if (following_ != 0 && probation_) probation_found_shallower(loops_[following_ - 1]);
  probation_ = false;
  // A loop that ended before the trace did: what came after it may be
  // another loop.
  if (following_ != 0 &&
      static_cast<double>(since_anchor_all_) >
          std::max(2.0 * static_cast<double>(options_.repetition.min_occurrences),
                   2.0 * loops_[following_ - 1].mean_piece_all_events)) {
    following_ = 0;
  }
  if (following_ == 0 && held_allocations_ > 0) search(/*require_ongoing=*/false, held_.size());
  release_until(held_.size());
}

bool StepFinder::pop(FinderItem& item) {
  if (ready_.empty()) return false;
  Ready next = ready_.front();
  ready_.pop_front();
  item.is_boundary = next.is_boundary;
  item.loop_id = next.loop_id;
  item.iteration = next.iteration;
  item.time_ns = next.time_ns;
  if (next.is_boundary) return true;  // item.record is left as it was
  std::visit(
      [&](auto&& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, std::unique_ptr<trace::Record>>) {
          item.record = std::move(*e);
        } else {
          item.record = std::forward<decltype(e)>(e);
        }
      },
      std::move(held_.released_front().event));
  held_.pop_released();
  return true;
}

std::optional<Frame> StepFinder::loop_frame(std::uint32_t loop_id, StackCatalog& catalog) const {
  const FoundLoop* loop = this->loop(loop_id);
  if (loop == nullptr) return std::nullopt;
  const trace::StackRecord* stack = catalog.stack(loop->anchor_stack);
  if (stack == nullptr) return std::nullopt;
  std::vector<Frame> frames = catalog.frames(loop->anchor_stack);
  if (frames.empty()) return std::nullopt;
  if (!stack->python.empty()) {
    // Python frames are the last ones, innermost first.
    std::size_t depth = std::min(loop->depth, stack->python.size() - 1);
    return frames[frames.size() - 1 - depth];
  }
  std::size_t depth = std::min(loop->depth, stack->native.size() - 1);
  std::uint64_t address = stack->native[stack->native.size() - 1 - depth];
  for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
    if (f->address == address) return *f;
  }
  return std::nullopt;
}

}  // namespace gpuleak::analysis
