// gpuleak's version, as `gpuleak --version`, the exports' producer field,
// lint's JSON and SARIF and the exporter's identity print it. The same number
// as project(VERSION) in the top CMakeLists.txt. A constant; thread-safe.
#pragma once
namespace gpuleak {
inline constexpr const char* kVersion = "0.1.0";
}
