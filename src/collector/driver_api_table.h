// The CUDA driver APIs the collector follows, by CUPTI callback id, and what
// each means for memory accounting.
#pragma once

#include <cstdint>
#include <span>

namespace gpuleak::collector {

enum class ApiRole : std::uint8_t {
  kNotFollowed,  // any API the collector does not subscribe to
  kAllocate,     // memory comes into existence at API exit
  kRelease,      // memory goes away (sequence number taken at API entry)
  kContext,      // context created/destroyed/retained/released
};

struct DriverApi {
  std::uint32_t cbid;
  const char* name;
  ApiRole role;
};

// Every followed API, in CUPTI callback-id order.
std::span<const DriverApi> followed_driver_apis();

// The role of the API with this CUPTI callback id. Allocations have nothing
// to do at entry, releases take their sequence number there.
ApiRole role_of(std::uint32_t cbid);

}  // namespace gpuleak::collector
