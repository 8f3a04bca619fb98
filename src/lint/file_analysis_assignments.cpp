// FileAnalysis, what names are bound to: the assignments to a dotted name, in
// the file or in one scope, the last one before a point, and whether a value
// is a container that grows.

#include <algorithm>

#include "file_analysis.h"
#include "vocabulary.h"

namespace gpuleak::lint {

bool FileAnalysis::is_mutable_container(NodeId value) const {
  switch (tree_.kind(value)) {
    case NodeKind::kList:
    case NodeKind::kDictionary:
    case NodeKind::kSet:
      return true;
    case NodeKind::kCall: {
      std::string qualified = qualified_name(callee(value));
      std::string_view last = vocabulary::last_component(qualified);
      if (last == "deque") return keyword_argument(value, "maxlen") == kNoNode;
      return last == "list" || last == "dict" || last == "set" || last == "defaultdict" ||
             last == "OrderedDict";
    }
    default:
      return false;
  }
}

NodeId FileAnalysis::first_assigned_value(const std::string& dotted) const {
  if (dotted.empty()) return kNoNode;
  const std::vector<NodeId>& all = assignments_to(dotted);
  return all.empty() ? kNoNode : tree_.child_by_field(all.front(), Field::kRight);
}

const std::vector<NodeId>& FileAnalysis::slot_assignments_to(const std::string& dotted) const {
  static const std::vector<NodeId> kNone;
  auto it = slot_assignments_.find(dotted);
  return it == slot_assignments_.end() ? kNone : it->second;
}

const std::vector<NodeId>& FileAnalysis::assignments_to(const std::string& dotted) const {
  static const std::vector<NodeId> kNone;
  auto it = assignments_by_target_.find(dotted);
  return it == assignments_by_target_.end() ? kNone : it->second;
}

std::string FileAnalysis::scoped_key(std::size_t scope, std::string_view dotted) {
  std::string key = std::to_string(scope);
  key += ':';
  key += dotted;
  return key;
}

const std::vector<NodeId>& FileAnalysis::assignments_in_scope(std::string_view dotted,
                                                              std::size_t scope) const {
  static const std::vector<NodeId> kNone;
  auto it = scoped_assignments_.find(scoped_key(scope, dotted));
  return it == scoped_assignments_.end() ? kNone : it->second;
}

NodeId FileAnalysis::last_assignment_before(std::string_view dotted, NodeId at,
                                            std::size_t scope) const {
  // In source order per scope: a binary search, however often the name is
  // bound elsewhere in a large file.
  auto it = scoped_assignments_.find(scoped_key(scope, dotted));
  if (it == scoped_assignments_.end()) return kNoNode;
  const std::vector<NodeId>& all = it->second;
  auto end = std::lower_bound(all.begin(), all.end(), at);
  return end == all.begin() ? kNoNode : *(end - 1);
}

}  // namespace gpuleak::lint
