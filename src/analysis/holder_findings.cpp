#include "analysis/holder_findings.h"

#include <nlohmann/json.hpp>

#include "analysis/annotation_fields.h"

namespace gpuleak::analysis {

void HolderFindings::add_answer(const std::string& annotation_value) {
  nlohmann::json answer = nlohmann::json::parse(annotation_value, nullptr, false);
  if (answer.is_discarded() || !answer.contains("sites") || !answer["sites"].is_array()) return;
  for (const auto& site : answer["sites"]) {
    if (!site.is_object()) continue;
    auto id = site.find("site_id");
    if (id == site.end() || !id->is_number_unsigned() || id->get<std::uint64_t>() > UINT32_MAX)
      continue;
    HolderFinding finding;
    finding.json = site.dump();
    finding.kind = text_field(site, "kind");
    if (finding.kind.empty()) finding.kind = "unknown";
    finding.fix = text_field(site, "fix");
    auto holder = site.find("holder");
    if (holder != site.end() && holder->is_object()) {
      finding.bounded = flag_field(*holder, "bounded");
      std::string type = text_field(*holder, "type");
      std::string name = text_field(*holder, "name");
      std::string owner = text_field(*holder, "owner");
      finding.description = type + (name.empty() ? "" : " `" + name + "`") +
                            (owner.empty() ? "" : " (" + owner + ")");
    }
    auto [it, inserted] =
        by_site_.try_emplace(static_cast<std::uint32_t>(id->get<std::uint64_t>()), finding);
    if (!inserted && !(finding.description.empty() && !it->second.description.empty())) {
      it->second = std::move(finding);
    }
  }
}

const HolderFinding* HolderFindings::find(std::uint32_t site_id) const {
  auto it = by_site_.find(site_id);
  return it == by_site_.end() ? nullptr : &it->second;
}

void report_holder(const HolderFinding& finding, GrowthReport& growth) {
  growth.holder_json = finding.json;
}

}  // namespace gpuleak::analysis
