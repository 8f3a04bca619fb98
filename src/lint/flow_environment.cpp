#include "flow_environment.h"

#include <string_view>
#include <unordered_set>

namespace gpuleak::lint {

FlowEnvironment::Slot FlowEnvironment::slot(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? Slot{} : Slot{true, it->second};
}

FlowBits FlowEnvironment::get(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? 0 : it->second;
}

const FlowBits* FlowEnvironment::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

void FlowEnvironment::restore(const std::string& key, Slot to) {
  if (key.empty()) return;
  auto it = values_.find(key);
  Slot before = it == values_.end() ? Slot{} : Slot{true, it->second};
  if (before.bound == to.bound && before.bits == to.bits) return;
  if (open_checkpoints_ > 0) journal_.push_back({key, before});
  if (!to.bound) {
    values_.erase(it);
  } else if (it == values_.end()) {
    values_.emplace(key, to.bits);
  } else {
    it->second = to.bits;
  }
}

void FlowEnvironment::assign(const std::string& key, FlowBits bits) {
  restore(key, Slot{bits != 0, bits});
}

void FlowEnvironment::add(const std::string& key, FlowBits bits) {
  restore(key, Slot{true, static_cast<FlowBits>(get(key) | bits)});
}

void FlowEnvironment::erase(const std::string& key) { restore(key, Slot{}); }

FlowEnvironment::Checkpoint FlowEnvironment::open() {
  ++open_checkpoints_;
  return Checkpoint{journal_.size()};
}

std::vector<FlowEnvironment::Change> FlowEnvironment::changes_since(Checkpoint at) const {
  std::vector<Change> out;
  std::unordered_set<std::string_view> seen;
  for (std::size_t i = at.position; i < journal_.size(); ++i) {
    const Undo& u = journal_[i];
    if (!seen.insert(u.key).second) continue;  // the first entry holds the slot at `at`
    out.push_back({u.key, u.before, slot(u.key)});
  }
  return out;
}

void FlowEnvironment::rollback_to(Checkpoint at) {
  while (journal_.size() > at.position) {
    const Undo& u = journal_.back();
    if (!u.before.bound) {
      values_.erase(u.key);
    } else {
      values_[u.key] = u.before.bits;
    }
    journal_.pop_back();
  }
}

void FlowEnvironment::close(Checkpoint at) {
  (void)at;
  if (--open_checkpoints_ == 0) journal_.clear();
}

void BranchUnion::add_branch(const std::vector<FlowEnvironment::Change>& changes) {
  ++branches_;
  for (const auto& c : changes) {
    auto [it, inserted] = merged_.try_emplace(c.key);
    if (inserted) {
      it->second.start = c.before;
      order_.push_back(c.key);
    }
    Merged& m = it->second;
    ++m.branches_touching;
    m.joined.bound |= c.after.bound;
    m.joined.bits |= c.after.bits;
  }
}

void BranchUnion::apply(FlowEnvironment& env, bool with_start) const {
  for (const std::string& key : order_) {
    const Merged& m = merged_.at(key);
    FlowEnvironment::Slot out = m.joined;
    // A branch that left the name alone, or the state at the checkpoint.
    if (with_start || m.branches_touching < branches_) {
      out.bound |= m.start.bound;
      out.bits |= m.start.bits;
    }
    env.restore(key, out);
  }
}

}  // namespace gpuleak::lint
