#include "collector/cupti_library.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <set>

namespace gpuleak::collector {

namespace {

std::vector<std::string> loaded_library_paths() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        if (info->dlpi_name && *info->dlpi_name) {
          static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
        }
        return 0;
      },
      &paths);
  return paths;
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

void add_glob(const std::string& pattern, std::vector<std::string>& out) {
  glob_t matches{};
  if (::glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
    // Newest version first: glob sorts ascending.
    for (std::size_t i = matches.gl_pathc; i-- > 0;) out.emplace_back(matches.gl_pathv[i]);
  }
  ::globfree(&matches);
}

}  // namespace

std::vector<std::string> cupti_candidates(const std::string& explicit_path) {
  std::vector<std::string> out;
  if (!explicit_path.empty()) out.push_back(explicit_path);

  auto loaded = loaded_library_paths();
  for (const auto& path : loaded) {
    if (path.find("libcupti.so") != std::string::npos) out.push_back(path);
  }
  for (const auto& path : loaded) {
    if (path.find("libcudart.so") != std::string::npos) {
      std::string dir = directory_of(path);
      add_glob(dir + "/libcupti.so*", out);
      add_glob(dir + "/../extras/CUPTI/lib64/libcupti.so*", out);
    }
    // PyTorch's wheels: .../site-packages/nvidia/<package>/lib/lib*.so
    for (const char* marker : {"/site-packages/", "/dist-packages/"}) {
      auto at = path.find(marker);
      if (at == std::string::npos) continue;
      std::string packages = path.substr(0, at + std::string(marker).size());
      add_glob(packages + "nvidia/cuda_cupti/lib/libcupti.so*", out);
      add_glob(packages + "nvidia/cu*/lib/libcupti.so*", out);
      add_glob(packages + "nvidia/*/lib/libcupti.so*", out);
    }
  }
  for (const char* name : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"})
    out.emplace_back(name);
  add_glob("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*", out);
  add_glob("/usr/local/cuda/lib64/libcupti.so*", out);
  add_glob("/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so*", out);
  add_glob("/usr/local/cuda-*/extras/CUPTI/lib64/libcupti.so*", out);
  add_glob("/usr/local/cuda-*/lib64/libcupti.so*", out);

  // Keep the first occurrence of each path.
  std::set<std::string> seen;
  std::vector<std::string> unique;
  for (auto& p : out) {
    if (seen.insert(p).second) unique.push_back(std::move(p));
  }
  return unique;
}

bool load_cupti(const std::string& explicit_path, CuptiFunctions* out, std::string* error) {
  std::string tried;
  for (const std::string& candidate : cupti_candidates(explicit_path)) {
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      if (!tried.empty()) tried += ", ";
      tried += candidate;
      continue;
    }
    CuptiFunctions f;
    f.subscribe = reinterpret_cast<decltype(f.subscribe)>(::dlsym(handle, "cuptiSubscribe"));
    f.subscribe_v2 =
        reinterpret_cast<decltype(f.subscribe_v2)>(::dlsym(handle, "cuptiSubscribe_v2"));
    f.unsubscribe = reinterpret_cast<decltype(f.unsubscribe)>(::dlsym(handle, "cuptiUnsubscribe"));
    f.enable_callback =
        reinterpret_cast<decltype(f.enable_callback)>(::dlsym(handle, "cuptiEnableCallback"));
    f.result_string =
        reinterpret_cast<decltype(f.result_string)>(::dlsym(handle, "cuptiGetResultString"));
    if (f.subscribe && f.unsubscribe && f.enable_callback) {
      f.path = candidate;
      *out = f;
      return true;
    }
    if (!tried.empty()) tried += ", ";
    tried += candidate + " (lacks the callback API)";
    ::dlclose(handle);
  }
  *error = "libcupti not found (tried " + (tried.empty() ? std::string("nothing") : tried) +
           "); set GPULEAK_CUPTI_LIBRARY to its path";
  return false;
}

}  // namespace gpuleak::collector
