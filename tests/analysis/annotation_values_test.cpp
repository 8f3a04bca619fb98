// The process's annotations read into typed fields (annotation_values.h):
// what the collector and the Python package write reads back whole; a field
// of the wrong type reads as missing and a value that is not an object as no
// annotation, never as an exception.
#include "analysis/model/annotation_values.h"

#include <gtest/gtest.h>

namespace gpuleak::analysis {
namespace {

TEST(AnnotationValues, what_the_collector_and_the_package_write_reads_back_whole) {
  auto torch = read_torch_tracking(
      R"({"mode": "allocator-hook", "alloc_conf": "", "torch": "2.11.0", "hook_error": null})");
  ASSERT_TRUE(torch);
  EXPECT_EQ(torch->mode, "allocator-hook");
  EXPECT_EQ(torch->alloc_conf, "");
  EXPECT_EQ(torch->torch, "2.11.0");
  EXPECT_FALSE(torch->hook_error);

  auto clock =
      read_event_clock(R"({"clock": "tsc", "resolution_ns": 1, "monotonic_read_ns": 26.7})");
  ASSERT_TRUE(clock);
  EXPECT_EQ(clock->clock, "tsc");
  EXPECT_EQ(clock->resolution_ns, 1u);
  EXPECT_EQ(clock->monotonic_read_ns, 26.7);

  auto rank = read_distributed_rank(R"({"rank": 3, "local_rank": 1, "world_size": 8})");
  ASSERT_TRUE(rank);
  EXPECT_EQ(rank->rank, 3);
  EXPECT_EQ(rank->local_rank, 1);
  EXPECT_EQ(rank->world_size, 8);

  auto backend = read_capture_backend(
      R"({"name": "cupti", "reason": "r", "interposer_loaded": false,
          "interposer_loaded_before_driver": false, "start_requests": 2,
          "reentrant_start_requests": 0})");
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->name, "cupti");
  EXPECT_EQ(backend->reason, "r");
  EXPECT_EQ(backend->interposer_loaded, false);
  EXPECT_EQ(backend->interposer_loaded_before_driver, false);
  EXPECT_EQ(backend->start_requests, 2u);
  EXPECT_EQ(backend->reentrant_start_requests, 0u);

  auto jax = read_framework_tracking(
      R"({"framework": "JAX", "mode": "preallocated-pool", "hidden_allocations": true,
          "device_memory_holds_arrays": false, "how_to_see": "XLA_PYTHON_CLIENT_ALLOCATOR=platform",
          "mem_fraction": "0.5"})");
  ASSERT_TRUE(jax);
  EXPECT_EQ(jax->framework, "JAX");
  EXPECT_EQ(jax->hidden_allocations, true);
  EXPECT_EQ(jax->device_memory_holds_arrays, false);
  EXPECT_EQ(jax->how_to_see, "XLA_PYTHON_CLIENT_ALLOCATOR=platform");
  EXPECT_EQ(jax->mem_fraction, "0.5");
  EXPECT_FALSE(jax->version);

  auto role = read_process_role(
      R"({"dataloader_worker": {"id": 2, "num_workers": 4},
          "multiprocessing": {"name": "SpawnPoolWorker-3", "parent_pid": 4700,
                              "start_method": "spawn"}})");
  ASSERT_TRUE(role && role->dataloader_worker && role->multiprocessing);
  EXPECT_EQ(role->dataloader_worker->id, 2);
  EXPECT_EQ(role->dataloader_worker->num_workers, 4);
  EXPECT_EQ(role->multiprocessing->name, "SpawnPoolWorker-3");
  EXPECT_EQ(role->multiprocessing->parent_pid, 4700);
  EXPECT_EQ(role->multiprocessing->start_method, "spawn");
}

TEST(AnnotationValues, a_field_of_the_wrong_type_reads_as_missing) {
  auto torch = read_torch_tracking(R"({"mode": 7, "torch": ["2"], "hook_error": false})");
  ASSERT_TRUE(torch);
  EXPECT_FALSE(torch->mode);
  EXPECT_FALSE(torch->torch);
  EXPECT_FALSE(torch->hook_error);

  auto clock = read_event_clock(R"({"clock": 1, "resolution_ns": -1, "monotonic_read_ns": "30"})");
  ASSERT_TRUE(clock);
  EXPECT_FALSE(clock->clock);
  EXPECT_FALSE(clock->resolution_ns);
  EXPECT_FALSE(clock->monotonic_read_ns);

  auto rank = read_distributed_rank(
      R"({"rank": "1", "local_rank": 1.5, "world_size": 18446744073709551615})");
  ASSERT_TRUE(rank);
  EXPECT_FALSE(rank->rank);
  EXPECT_FALSE(rank->local_rank);
  EXPECT_FALSE(rank->world_size);

  auto backend = read_capture_backend(
      R"({"name": ["cupti"], "interposer_loaded": "true", "start_requests": 0.5})");
  ASSERT_TRUE(backend);
  EXPECT_FALSE(backend->name);
  EXPECT_FALSE(backend->interposer_loaded);
  EXPECT_FALSE(backend->start_requests);

  auto framework = read_framework_tracking(
      R"({"framework": 7, "hidden_allocations": "yes", "device_memory_holds_arrays": 1,
          "how_to_see": ["x"], "mem_fraction": 0.5})");
  ASSERT_TRUE(framework);
  EXPECT_FALSE(framework->framework);
  EXPECT_FALSE(framework->hidden_allocations);
  EXPECT_FALSE(framework->device_memory_holds_arrays);
  EXPECT_FALSE(framework->how_to_see);
  EXPECT_FALSE(framework->mem_fraction);

  auto role = read_process_role(
      R"({"dataloader_worker": {"id": "2"}, "multiprocessing": {"name": 5, "parent_pid": "1"}})");
  ASSERT_TRUE(role && role->dataloader_worker && role->multiprocessing);
  EXPECT_FALSE(role->dataloader_worker->id);
  EXPECT_FALSE(role->multiprocessing->name);
  EXPECT_FALSE(role->multiprocessing->parent_pid);
  auto parts = read_process_role(R"({"dataloader_worker": "yes", "multiprocessing": [1, 2]})");
  ASSERT_TRUE(parts);
  EXPECT_FALSE(parts->dataloader_worker);
  EXPECT_FALSE(parts->multiprocessing);
}

TEST(AnnotationValues, a_value_that_is_not_an_object_is_no_annotation) {
  for (const char* value :
       {"", "null", "3", "\"allocator-hook\"", "[1, 2]", "{\"mode\": ", "\xff\xfe"}) {
    EXPECT_FALSE(read_torch_tracking(value)) << value;
    EXPECT_FALSE(read_event_clock(value)) << value;
    EXPECT_FALSE(read_distributed_rank(value)) << value;
    EXPECT_FALSE(read_capture_backend(value)) << value;
    EXPECT_FALSE(read_framework_tracking(value)) << value;
    EXPECT_FALSE(read_process_role(value)) << value;
    EXPECT_FALSE(read_python_loop(value)) << value;
  }
}

TEST(AnnotationValues, the_python_loop_annotation_reads_back_and_forgives_wrong_types) {
  auto on = read_python_loop(
      R"({"available": true, "tool_id": 4, "script": "/job/train.py", "code_objects": 12})");
  ASSERT_TRUE(on);
  EXPECT_EQ(on->available, true);
  EXPECT_EQ(on->tool_id, 4);
  EXPECT_EQ(on->script, "/job/train.py");
  EXPECT_EQ(on->code_objects, 12);
  EXPECT_FALSE(on->reason);
  auto off = read_python_loop(
      R"({"available": false, "reason": "Python 3.11 has no sys.monitoring; following the main script's loop needs Python 3.12 or later"})");
  ASSERT_TRUE(off);
  EXPECT_EQ(off->available, false);
  EXPECT_NE(off->reason->find("needs Python 3.12"), std::string::npos);
  auto wrong = read_python_loop(R"({"available": "no", "reason": 3, "tool_id": "4"})");
  ASSERT_TRUE(wrong);
  EXPECT_FALSE(wrong->available);
  EXPECT_FALSE(wrong->reason);
  EXPECT_FALSE(wrong->tool_id);
}

}  // namespace
}  // namespace gpuleak::analysis
