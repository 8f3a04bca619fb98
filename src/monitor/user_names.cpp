#include "monitor/user_names.h"

#include <pwd.h>

#include <vector>

namespace gpuleak::monitor {

const std::string& UserNames::name(std::optional<uid_t> uid) {
  if (!uid) return unknown_;
  auto it = names_.find(*uid);
  if (it != names_.end()) return it->second;
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  std::string name;
  if (getpwuid_r(*uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found) {
    name = found->pw_name;
  } else {
    name = std::to_string(*uid);
  }
  return names_.emplace(*uid, std::move(name)).first->second;
}

}  // namespace gpuleak::monitor
