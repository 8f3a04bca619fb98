// Login names for uids, looked up once each (getpwuid_r) and remembered.
// Not thread-safe: one owner.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>

namespace gpuleak::monitor {

class UserNames {
 public:
  // "alice", the number when the uid has no name, "?" when unknown.
  const std::string& name(std::optional<uid_t> uid);

 private:
  std::map<uid_t, std::string> names_;
  std::string unknown_ = "?";
};

}  // namespace gpuleak::monitor
