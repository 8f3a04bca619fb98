# Finds the libraries gpuleak builds against. All of them come from Debian's
# packages (scripts/setup installs them) or from npm (node_modules, pinned by
# package-lock.json). Nothing here is vendored.

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(tomlplusplus CONFIG REQUIRED)
if(GPULEAK_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_package(Python3 COMPONENTS Interpreter)
endif()

pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(LIBDW REQUIRED IMPORTED_TARGET libdw)
pkg_check_modules(LIBUNWIND REQUIRED IMPORTED_TARGET libunwind)
pkg_check_modules(TREE_SITTER REQUIRED IMPORTED_TARGET tree-sitter)

# CUDA headers (cuda.h, cupti.h) are only needed by the collector. The CI
# machine has no GPU; if the toolkit headers are absent the collector and the
# CUDA examples are skipped and everything else still builds and tests.
set(GPULEAK_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root (headers only)")
find_path(GPULEAK_CUPTI_INCLUDE cupti.h
  HINTS ${GPULEAK_CUDA_ROOT}/include ${GPULEAK_CUDA_ROOT}/extras/CUPTI/include)
find_path(GPULEAK_CUDA_INCLUDE cuda.h HINTS ${GPULEAK_CUDA_ROOT}/include)
if(GPULEAK_CUPTI_INCLUDE AND GPULEAK_CUDA_INCLUDE)
  set(GPULEAK_HAVE_CUDA_HEADERS ON)
  message(STATUS "gpuleak: CUDA headers in ${GPULEAK_CUDA_INCLUDE}; building the collector")
elseif(GPULEAK_REQUIRE_COLLECTOR)
  message(FATAL_ERROR "gpuleak: no cupti.h/cuda.h under ${GPULEAK_CUDA_ROOT} (GPULEAK_CUDA_ROOT), and "
                      "GPULEAK_REQUIRE_COLLECTOR is on: the collector and its tests would not be built")
else()
  set(GPULEAK_HAVE_CUDA_HEADERS OFF)
  message(STATUS "gpuleak: no cupti.h/cuda.h; the collector is not built")
endif()

find_program(GPULEAK_NVCC nvcc HINTS ${GPULEAK_CUDA_ROOT}/bin)
# Tools the tests use when present (tests/report: headless Chromium via node).
find_program(GPULEAK_NODE node)

# tree-sitter-python's generated parser comes from npm (node_modules), pinned
# in package-lock.json; it is compiled here, never copied into the repository.
set(GPULEAK_TS_PYTHON_DIR ${CMAKE_SOURCE_DIR}/node_modules/tree-sitter-python/src)
if(NOT EXISTS ${GPULEAK_TS_PYTHON_DIR}/parser.c)
  message(FATAL_ERROR "tree-sitter-python is not installed: run scripts/setup (npm ci) first")
endif()

# The kubelet's pod-resources API (gRPC) names the pods GPUs were allocated
# to (src/monitor/pod_resources.h). Optional: without Debian's libgrpc++-dev
# and protobuf-compiler-grpc the exporter names pods from the kubelet's log
# folders only. GPULEAK_POD_RESOURCES=ON makes its absence an error, OFF
# leaves it out even where gRPC is installed.
set(GPULEAK_POD_RESOURCES AUTO CACHE STRING "Read the kubelet's pod-resources API: AUTO, ON or OFF")
set_property(CACHE GPULEAK_POD_RESOURCES PROPERTY STRINGS AUTO ON OFF)
set(GPULEAK_HAVE_POD_RESOURCES OFF)
if(NOT GPULEAK_POD_RESOURCES STREQUAL "OFF")
  pkg_check_modules(GRPCPP QUIET IMPORTED_TARGET grpc++ protobuf)
  find_program(GPULEAK_PROTOC protoc)
  find_program(GPULEAK_GRPC_CPP_PLUGIN grpc_cpp_plugin)
  if(GRPCPP_FOUND AND GPULEAK_PROTOC AND GPULEAK_GRPC_CPP_PLUGIN)
    set(GPULEAK_HAVE_POD_RESOURCES ON)
    message(STATUS "gpuleak: gRPC ${GRPCPP_grpc++_VERSION}; the exporter reads the kubelet's pod-resources API")
  elseif(GPULEAK_POD_RESOURCES STREQUAL "ON")
    message(FATAL_ERROR "gpuleak: GPULEAK_POD_RESOURCES is ON but gRPC is missing: "
                        "apt-get install libgrpc++-dev protobuf-compiler-grpc")
  else()
    message(STATUS "gpuleak: no gRPC (libgrpc++-dev, protobuf-compiler-grpc); the exporter names "
                   "pods from the kubelet's log folders only, not its pod-resources API")
  endif()
else()
  message(STATUS "gpuleak: GPULEAK_POD_RESOURCES=OFF; the exporter names pods from the kubelet's "
                 "log folders only, not its pod-resources API")
endif()
