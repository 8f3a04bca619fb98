// The environment GraphFlow walks a function with: names and attribute paths
// ("self.hidden") mapped to ValueBits, with checkpoints that branches and
// loops return to.
//
// Branches used to copy the whole map at every `if`/`try`/comprehension, so
// one long function with many of them cost time quadratic in its length (a
// 1 MB function took 9 s, a 50 MB file did not finish). Here every change
// made while a checkpoint is open is journaled with the value it replaced:
// a branch is walked, its changes read back (changes_since), undone
// (rollback_to), and the merge of the branches applied, each step costing
// what the branch changed rather than everything bound so far.
//
// A name can be bound to no bits (`holder[k] = 0-bit value` marks `holder`
// as known): that differs from an unbound name, which attribute lookups
// work out from the attribute's name, so presence is kept apart from bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "file_analysis.h"

namespace gpuleak::lint {

class FlowEnvironment {
 public:
  // A position in the journal; changes after it can be read back and undone.
  struct Checkpoint {
    std::size_t position = 0;
  };
  struct Slot {
    bool bound = false;
    FlowBits bits = 0;
  };
  // One name changed since a checkpoint: its slot then and now.
  struct Change {
    std::string key;
    Slot before;
    Slot after;
  };

  // The bits of `key`, 0 when unbound.
  FlowBits get(const std::string& key) const;
  // nullptr when `key` is unbound.
  const FlowBits* find(const std::string& key) const;
  bool empty() const { return values_.empty(); }
  // Binds `key` to `bits`; 0 unbinds it.
  void assign(const std::string& key, FlowBits bits);
  // `env[key] |= bits`: binds `key` even when `bits` is 0.
  void add(const std::string& key, FlowBits bits);
  void erase(const std::string& key);
  // Sets the slot exactly (bound or not).
  void restore(const std::string& key, Slot slot);

  // Opens a checkpoint at the current state; every open checkpoint must be
  // closed, innermost first.
  Checkpoint open();
  // Every name changed since `at`, once each, in the order first changed.
  std::vector<Change> changes_since(Checkpoint at) const;
  // Undoes every change since `at`; the checkpoint stays open.
  void rollback_to(Checkpoint at);
  // Keeps the changes; the journal is dropped once no checkpoint is open.
  void close(Checkpoint at);

 private:
  Slot slot(const std::string& key) const;
  struct Undo {
    std::string key;
    Slot before;
  };
  std::unordered_map<std::string, FlowBits> values_;
  std::vector<Undo> journal_;
  int open_checkpoints_ = 0;
};

// Merges branches walked one after the other from the same checkpoint: a
// name ends bound to the union of what each branch left in it (a
// may-analysis), and a branch that did not touch a name left it as it was
// at the checkpoint.
class BranchUnion {
 public:
  // The changes one branch made, relative to the checkpoint.
  void add_branch(const std::vector<FlowEnvironment::Change>& changes);
  // Applies the union to `env` (rolled back to the checkpoint). With
  // `with_start`, the state at the checkpoint counts as one more branch
  // (an `if` without `else`: the condition may be false).
  void apply(FlowEnvironment& env, bool with_start) const;

 private:
  struct Merged {
    FlowEnvironment::Slot start;
    FlowEnvironment::Slot joined;
    std::size_t branches_touching = 0;
  };
  std::unordered_map<std::string, Merged> merged_;
  std::vector<std::string> order_;
  std::size_t branches_ = 0;
};

}  // namespace gpuleak::lint
