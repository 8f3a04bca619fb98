// The CUDA driver APIs the collector follows, by CUPTI callback id, and what
// each means for memory accounting.
#pragma once

#include <cstdint>
#include <span>

namespace gpuleak::collector {

enum class ApiRole : std::uint8_t {
  kAllocate,  // memory comes into existence at API exit
  kRelease,   // memory goes away (sequence number taken at API entry)
  kContext,   // context created/destroyed/retained/released
};

struct DriverApi {
  std::uint32_t cbid;
  const char* name;
  ApiRole role;
};

// Every followed API, in CUPTI callback-id order.
std::span<const DriverApi> followed_driver_apis();

// Whether the API's entry callback has work (releases take their sequence
// number there, contexts are destroyed there). Allocations have none: they
// are recorded at exit.
bool acts_at_entry(std::uint32_t cbid);

}  // namespace gpuleak::collector
