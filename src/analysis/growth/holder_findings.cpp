#include "analysis/growth/holder_findings.h"

#include <nlohmann/json.hpp>

#include "analysis/model/annotation_fields.h"

namespace gpuleak::analysis {

namespace {

KeepingStatement keeping_statement_of(const nlohmann::json& kept) {
  KeepingStatement k;
  k.file = text_field(kept, "file");
  k.line = optional_count_field(kept, "line");
  k.statement = optional_text_field(kept, "statement");
  k.kind = text_field(kept, "kind");
  k.function = text_field(kept, "function");
  k.in_loop = flag_field(kept, "in_loop");
  auto caller = kept.find("called_from");
  if (caller != kept.end() && caller->is_object()) {
    CallingLine c;
    c.file = text_field(*caller, "file");
    c.line = optional_count_field(*caller, "line");
    c.statement = optional_text_field(*caller, "statement");
    c.function = text_field(*caller, "function");
    if (!c.file.empty() && c.line) k.called_from = c;
  }
  return k;
}

Holder holder_of(const nlohmann::json& holder) {
  Holder h;
  h.type = text_field(holder, "type");
  h.name = text_field(holder, "name");
  h.owner = text_field(holder, "owner");
  h.path = text_field(holder, "path");
  h.length = optional_integer_field(holder, "length");
  h.bounded = flag_field(holder, "bounded");
  h.maxlen = optional_integer_field(holder, "maxlen");
  h.filled_by = optional_text_field(holder, "filled_by");
  h.element = optional_text_field(holder, "element");
  h.held_in = optional_text_field(holder, "held_in");
  auto kept = holder.find("kept_at");
  if (kept != holder.end() && kept->is_object()) h.kept_at = keeping_statement_of(*kept);
  return h;
}

// One site's object of the annotation (its site_id already checked).
HolderAnswer answer_of(const nlohmann::json& site, std::uint32_t site_id) {
  HolderAnswer a;
  a.site_id = site_id;
  a.matched_addresses = optional_count_field(site, "matched_addresses").value_or(0);
  a.kind = text_field(site, "kind");
  auto holder = site.find("holder");
  if (holder != site.end() && holder->is_object()) a.holder = holder_of(*holder);
  a.graph_tensors_per_element = optional_integer_field(site, "graph_tensors_per_element");
  a.element_has_grad_fn = flag_field(site, "element_has_grad_fn");
  a.cause = optional_text_field(site, "cause");
  a.fix = optional_text_field(site, "fix");
  a.note = optional_text_field(site, "note");
  return a;
}

// How much an answer is worth against another for the same site: one that
// names a holder over one that does not, then one from a walk that finished
// over one that ran out of time.
int worth(const HolderFinding& finding) {
  return (finding.description.empty() ? 0 : 2) + (finding.answer.walk_timed_out ? 0 : 1);
}

}  // namespace

void HolderFindings::add_answer(const std::string& annotation_value) {
  nlohmann::json answer = nlohmann::json::parse(annotation_value, nullptr, false);
  if (answer.is_discarded() || !answer.contains("sites") || !answer["sites"].is_array()) return;
  bool walk_timed_out = flag_field(answer, "timed_out");
  for (const auto& site : answer["sites"]) {
    if (!site.is_object()) continue;
    std::optional<std::uint32_t> site_id = optional_id_field(site, "site_id");
    if (!site_id) continue;
    HolderFinding finding;
    finding.answer = answer_of(site, *site_id);
    finding.answer.walk_timed_out = walk_timed_out;
    finding.kind = finding.answer.kind.empty() ? "unknown" : finding.answer.kind;
    finding.fix = finding.answer.fix.value_or("");
    if (const auto& holder = finding.answer.holder) {
      finding.bounded = holder->bounded;
      finding.description = holder->type + (holder->name.empty() ? "" : " `" + holder->name + "`") +
                            (holder->owner.empty() ? "" : " (" + holder->owner + ")");
    }
    auto [it, inserted] = by_site_.try_emplace(*site_id, finding);
    if (!inserted && worth(finding) >= worth(it->second)) it->second = std::move(finding);
  }
}

const HolderFinding* HolderFindings::find(std::uint32_t site_id) const {
  auto it = by_site_.find(site_id);
  return it == by_site_.end() ? nullptr : &it->second;
}

void report_holder(const HolderFinding& finding, GrowthReport& growth) {
  growth.holder = finding.answer;
}

}  // namespace gpuleak::analysis
