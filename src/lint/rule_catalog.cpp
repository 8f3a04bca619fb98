// The list of rules, and lookups by id or name.
#include <algorithm>
#include <cctype>

#include "rule.h"
#include "rules/rule_factories.h"

namespace gpuleak::lint {
namespace {

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

class FunctionRule final : public Rule {
 public:
  FunctionRule(const RuleInfo& described, FileCheck checking)
      : info_(described), check_(checking) {}
  const RuleInfo& info() const override { return info_; }
  void check(const FileAnalysis& file, FindingSink& sink) const override { check_(file, sink); }

 private:
  const RuleInfo& info_;
  FileCheck check_;
};

}  // namespace

std::unique_ptr<Rule> make_rule(const RuleInfo& info, FileCheck check) {
  return std::make_unique<FunctionRule>(info, check);
}

const std::vector<std::unique_ptr<Rule>>& all_rules() {
  static const std::vector<std::unique_ptr<Rule>> kRules = [] {
    std::vector<std::unique_ptr<Rule>> r;
    r.push_back(make_loss_accumulated_with_graph_rule());
    r.push_back(make_eval_outputs_kept_with_graph_rule());
    r.push_back(make_retain_graph_in_loop_rule());
    r.push_back(make_hidden_state_not_detached_rule());
    r.push_back(make_backward_create_graph_rule());
    r.push_back(make_tensor_kept_in_growing_container_rule());
    r.push_back(make_hook_keeps_activations_rule());
    r.push_back(make_exception_kept_rule());
    r.push_back(make_epoch_end_keeps_step_outputs_rule());
    r.push_back(make_cached_call_keeps_model_rule());
    r.push_back(make_metric_state_never_reset_rule());
    r.push_back(make_closure_keeps_owner_rule());
    r.push_back(make_cuda_in_dataloader_worker_rule());
    r.push_back(make_fork_after_cuda_init_rule());
    r.push_back(make_process_not_joined_on_failure_rule());
    r.push_back(make_dataloader_as_context_manager_rule());
    r.push_back(make_empty_cache_in_loop_rule());
    r.push_back(make_missing_zero_grad_rule());
    std::sort(r.begin(), r.end(),
              [](const auto& a, const auto& b) { return a->info().id < b->info().id; });
    return r;
  }();
  return kRules;
}

const std::vector<const RuleInfo*>& rule_catalog() {
  static const std::vector<const RuleInfo*> kInfos = [] {
    std::vector<const RuleInfo*> out;
    for (const auto& rule : all_rules()) out.push_back(&rule->info());
    return out;
  }();
  return kInfos;
}

const RuleInfo* find_rule(std::string_view id_or_name) {
  for (const RuleInfo* info : rule_catalog()) {
    if (equal_ignoring_case(info->id, id_or_name) || info->name == id_or_name) return info;
  }
  return nullptr;
}

std::string quote(const FileAnalysis& file, NodeId node, std::size_t max_chars) {
  if (node == kNoNode) return {};
  std::string_view text = file.text(node);
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ' || c == '\\') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
    if (out.size() > max_chars) {
      // Cut at a character boundary, not inside a UTF-8 sequence.
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
        out.pop_back();
      if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) out.pop_back();
      return out + "...";
    }
  }
  return out;
}

}  // namespace gpuleak::lint
