// Writes the fuzz target's seed corpus (seed_traces.h) into a folder, at
// build time: write_seed_traces DIR
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "seed_traces.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_seed_traces DIR\n");
    return 2;
  }
  std::filesystem::create_directories(argv[1]);
  for (const auto& seed : gpuleak::fuzz::seeds()) {
    std::string path = std::string(argv[1]) + "/" + seed.name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(seed.bytes.data(), static_cast<std::streamsize>(seed.bytes.size()));
    if (!out) {
      std::fprintf(stderr, "write_seed_traces: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
