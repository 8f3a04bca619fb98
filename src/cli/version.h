#pragma once
namespace gpuleak {
inline constexpr const char* kVersion = "0.1.0";
}
