// The cause of a leak from the growing sites and the holder the Python
// package named (analysis/growth/leak_cause.h), and how holder answers for the same
// site replace each other (analysis/growth/holder_findings.h).
#include "analysis/growth/leak_cause.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/growth/holder_findings.h"
#include "gpuleak/vocabulary.h"

namespace gpuleak::analysis {
namespace {

using vocabulary::Cause;
using vocabulary::cause_slug;

constexpr bool kPython = true;
constexpr bool kNoPython = false;

Frame native(std::string function, std::string module, std::string file = "",
             std::uint32_t line = 0) {
  Frame f;
  f.function = std::move(function);
  f.module = std::move(module);
  f.file = std::move(file);
  f.line = line;
  return f;
}

SiteGrowth tensor_site(std::uint32_t id, double allocations_per_step) {
  SiteGrowth s;
  s.site_id = id;
  s.tensor_level = true;
  s.allocations_per_step = allocations_per_step;
  return s;
}

TEST(LeakCause, one_tensor_site_without_a_holder_is_tensors_kept_alive) {
  LeakCause c = leak_cause({tensor_site(1, 1)}, nullptr, kPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kTensorsKeptAlive));
  EXPECT_NE(c.fix.find(".item()"), std::string::npos);
}

TEST(LeakCause, three_tensor_sites_growing_by_alike_counts_are_one_kept_graph) {
  LeakCause c =
      leak_cause({tensor_site(1, 1), tensor_site(2, 2), tensor_site(3, 3)}, nullptr, kPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kAutogradGraphKeptAlive));
}

TEST(LeakCause, three_tensor_sites_growing_by_unlike_counts_are_not_a_graph) {
  LeakCause c =
      leak_cause({tensor_site(1, 1), tensor_site(2, 1), tensor_site(3, 4)}, nullptr, kPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kTensorsKeptAlive));
}

TEST(LeakCause, a_driver_allocation_at_the_top_is_outside_the_tensor_allocator) {
  SiteGrowth driver = tensor_site(1, 1);
  driver.tensor_level = false;
  LeakCause c = leak_cause({driver}, nullptr, kPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kNonTensorDriverAllocations));
  EXPECT_EQ(c.fix, "free the buffers allocated at the frames shown, or reuse one buffer");
}

TEST(LeakCause, the_holder_decides_the_cause_and_its_fix_wins) {
  HolderFinding graph;
  graph.kind = "graph";
  graph.fix = "call .detach() on `hidden`";
  LeakCause c = leak_cause({tensor_site(1, 1)}, &graph, kPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kAutogradGraphKeptAlive));
  EXPECT_EQ(c.fix, "call .detach() on `hidden`");

  HolderFinding tensor;
  tensor.kind = "tensor";
  c = leak_cause({tensor_site(1, 1), tensor_site(2, 1), tensor_site(3, 1)}, &tensor, kPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kTensorsKeptAlive));
  EXPECT_NE(c.fix.find("stop keeping the tensors"), std::string::npos);
}

// A program that makes a cuBLAS handle per call: cuMemAlloc inside
// cublasCreate_v2, called from the program's own function.
SiteGrowth cublas_handle_site() {
  SiteGrowth s;
  s.site_id = 9;
  s.tensor_level = false;
  s.kind = trace::MemoryKind::kDevice;
  s.allocations_per_step = 1;
  s.rate_bytes_per_step = 4 << 20;
  s.frames = {native("cuMemAlloc_v2", "/usr/lib/libcuda.so.1"),
              native("cublasCreate_v2", "/usr/local/cuda/lib64/libcublas.so.13"),
              native("solve_one", "/work/solver", "solver.cu", 42),
              native("main", "/work/solver", "solver.cu", 80)};
  return s;
}

TEST(LeakCause, a_library_handle_made_per_step_is_named_by_its_create_and_destroy_calls) {
  for (bool python : {kPython, kNoPython}) {
    LeakCause c = leak_cause({cublas_handle_site()}, nullptr, python);
    EXPECT_EQ(c.cause, cause_slug(Cause::kLibraryHandlesNeverDestroyed));
    EXPECT_NE(c.text.find("cuBLAS handle is made by cublasCreate at solver.cu:42 (in solve_one)"),
              std::string::npos)
        << c.text;
    EXPECT_NE(c.text.find("cublasDestroy"), std::string::npos) << c.text;
    EXPECT_NE(
        c.text.find("4.00 MiB more stay with every step (1 cuBLAS handle a step, 4.00 MiB each)"),
        std::string::npos)
        << c.text;
    EXPECT_NE(c.fix.find("reuse it"), std::string::npos) << c.fix;
    EXPECT_EQ(c.fix.find(".item()"), std::string::npos) << c.fix;
  }
}

// Executable graphs are recorded as their own kind, from the driver's
// cuGraphInstantiateWithFlags: a program that calls the driver's entry point
// itself has no cudaGraphInstantiate frame, and is still told which object
// it leaks and which call destroys it, at its own line.
TEST(LeakCause, an_executable_graph_per_step_is_named_without_a_runtime_frame) {
  SiteGrowth s;
  s.site_id = 4;
  s.tensor_level = false;
  s.kind = trace::MemoryKind::kGraphExec;
  s.allocations_per_step = 1;
  s.rate_bytes_per_step = 736.0 * 1024;
  s.frames = {native("capture_step", "/work/decode", "decode.cu", 52),
              native("main", "/work/decode", "decode.cu", 70)};
  LeakCause c = leak_cause({s}, nullptr, kNoPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kLibraryHandlesNeverDestroyed));
  EXPECT_NE(c.text.find("executable graph is made by cudaGraphInstantiate at decode.cu:52"),
            std::string::npos)
      << c.text;
  EXPECT_NE(c.text.find("cudaGraphExecDestroy"), std::string::npos) << c.text;
  EXPECT_EQ(c.fix.find("cudaFree"), std::string::npos) << c.fix;

  // A device buffer at the same frames stays a buffer.
  s.kind = trace::MemoryKind::kDevice;
  c = leak_cause({s}, nullptr, kNoPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kDeviceBuffersNeverFreed));
}

TEST(LeakCause, a_plan_made_inside_another_library_call_names_the_outer_call) {
  SiteGrowth s = cublas_handle_site();
  s.frames = {native("cuMemAlloc_v2", "/usr/lib/libcuda.so.1"),
              native("cufftMakePlan2d", "/usr/local/cuda/lib64/libcufft.so.12"),
              native("cufftPlan2d", "/usr/local/cuda/lib64/libcufft.so.12"),
              native("process_frame", "/work/fft", "fft.cu", 17)};
  s.allocations_per_step = 3;
  s.rate_bytes_per_step = 3 * 1536.0 * 1024;
  LeakCause c = leak_cause({s}, nullptr, kNoPython);
  EXPECT_NE(c.text.find("cuFFT plan is made by cufftPlan2d at fft.cu:17"), std::string::npos)
      << c.text;
  EXPECT_NE(c.text.find("(3 cuFFT plans a step, 1.50 MiB each)"), std::string::npos) << c.text;
  EXPECT_NE(c.fix.find("cufftDestroy"), std::string::npos);
}

// A PyTorch C++/CUDA extension that cudaMallocs a scratch buffer per call:
// native code of the program's own asked for driver memory, in a process
// that runs Python. It gets CUDA's words and its own line, no Python advice.
TEST(LeakCause, an_extension_buffer_in_a_python_process_gets_cuda_words_and_its_line) {
  SiteGrowth s;
  s.site_id = 5;
  s.tensor_level = false;
  s.kind = trace::MemoryKind::kDevice;
  s.allocations_per_step = 1;
  s.rate_bytes_per_step = 4 << 20;
  Frame dispatch = native("at::_ops::call", "/venv/torch/lib/libtorch_cpu.so");
  dispatch.internal = true;
  Frame python;
  python.language = Frame::Language::kPython;
  python.function = "step";
  python.file = "/job/train.py";
  python.line = 31;
  s.frames = {native("cuMemAlloc_v2", "/usr/lib/libcuda.so.1"),
              native("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13"),
              native("scratch_forward", "/cache/torch_extensions/leak_scratch_ext.so",
                     "leak_scratch_ext.cu", 22),
              dispatch, python};
  LeakCause c = leak_cause({s}, nullptr, kPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kDeviceBuffersNeverFreed));
  EXPECT_NE(c.text.find("cudaMalloc at leak_scratch_ext.cu:22 (in scratch_forward)"),
            std::string::npos)
      << c.text;
  EXPECT_NE(c.fix.find("cudaFree"), std::string::npos) << c.fix;
  for (const char* python_word : {".item()", "detach", "Python reference", "no_grad"}) {
    EXPECT_EQ(c.text.find(python_word), std::string::npos) << python_word;
    EXPECT_EQ(c.fix.find(python_word), std::string::npos) << python_word;
  }
  // The same memory asked for by PyTorch itself (the caller is the user's
  // Python line) keeps the words for a process that runs Python.
  s.frames = {native("cuMemAlloc_v2", "/usr/lib/libcuda.so.1"), dispatch, python};
  EXPECT_EQ(leak_cause({s}, nullptr, kPython).cause,
            cause_slug(Cause::kNonTensorDriverAllocations));
}

// A communicator made through PyTorch (dist.new_group): the program's own
// line, not PyTorch's frame, is where it was made; without one, PyTorch's
// frame is named as "in ..." (it has no source line).
TEST(LeakCause, a_communicator_made_through_pytorch_names_the_program_s_line) {
  SiteGrowth s = cublas_handle_site();
  Frame torch_frame =
      native("c10d::NCCLComm::create(int, int, ncclUniqueId)", "/venv/torch/lib/libtorch_cuda.so");
  torch_frame.internal = true;
  Frame python;
  python.language = Frame::Language::kPython;
  python.function = "main";
  python.file = "/job/sweep.py";
  python.line = 54;
  s.frames = {native("cuMemCreate", "/usr/lib/libcuda.so.1"),
              native("ncclCuMemAlloc(void**, unsigned long)", "/venv/nvidia/lib/libnccl.so.2"),
              native("ncclCommInitRankConfig", "/venv/nvidia/lib/libnccl.so.2"), torch_frame,
              python};
  LeakCause c = leak_cause({s}, nullptr, kPython);
  EXPECT_NE(c.text.find("NCCL communicator is made by ncclCommInitRankConfig at sweep.py:54 (in "
                        "main)"),
            std::string::npos)
      << c.text;
  s.frames.pop_back();
  c = leak_cause({s}, nullptr, kPython);
  EXPECT_NE(c.text.find("made by ncclCommInitRankConfig in c10d::NCCLComm::create"),
            std::string::npos)
      << c.text;
  EXPECT_EQ(c.text.find("at in "), std::string::npos) << c.text;
}

TEST(LeakCause, a_process_without_python_gets_cuda_words_for_its_own_buffers) {
  SiteGrowth s = tensor_site(3, 2);
  s.kind = trace::MemoryKind::kDeviceAsync;  // tensor-level by kind, but no Python ran
  s.rate_bytes_per_step = 2 << 20;
  s.frames = {native("cuMemAllocAsync", "/usr/lib/libcuda.so.1"),
              native("cudaMallocAsync", "/work/loop", "", 0),
              native("run_step", "/work/loop", "loop.cu", 31)};
  LeakCause c = leak_cause({s}, nullptr, kNoPython);
  EXPECT_EQ(c.cause, cause_slug(Cause::kDeviceBuffersNeverFreed));
  EXPECT_NE(c.text.find("cudaMallocAsync at loop.cu:31 (in run_step)"), std::string::npos)
      << c.text;
  EXPECT_NE(c.text.find("2 more buffer(s)"), std::string::npos) << c.text;
  EXPECT_NE(c.fix.find("cudaFreeAsync"), std::string::npos) << c.fix;
  for (const std::string& text : {c.text, c.fix}) {
    for (const char* python_word : {"Python", "tensor", ".item()", "detach", "autograd"}) {
      EXPECT_EQ(text.find(python_word), std::string::npos) << python_word << " in: " << text;
    }
  }
  // The same site in a Python process keeps the tensor wording.
  EXPECT_EQ(leak_cause({s}, nullptr, kPython).cause, cause_slug(Cause::kTensorsKeptAlive));
}

TEST(LeakCause, a_holder_that_names_a_tensor_wins_over_a_creating_call) {
  HolderFinding tensor;
  tensor.kind = "tensor";
  EXPECT_EQ(leak_cause({cublas_handle_site()}, &tensor, kPython).cause,
            cause_slug(Cause::kTensorsKeptAlive));
}

TEST(HolderFindings, reads_the_holder_in_words_and_keeps_a_named_one_over_a_later_empty_one) {
  HolderFindings findings;
  findings.add_answer(
      R"({"sites": [{"site_id": 7, "kind": "tensor", "fix": "clear it",
          "holder": {"type": "list", "name": "losses", "owner": "module __main__",
                     "bounded": false}}]})");
  const HolderFinding* found = findings.find(7);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->description, "list `losses` (module __main__)");
  EXPECT_EQ(found->kind, "tensor");
  EXPECT_EQ(found->fix, "clear it");
  EXPECT_FALSE(found->bounded);

  findings.add_answer(R"({"sites": [{"site_id": 7, "kind": "unknown"}]})");
  ASSERT_NE(findings.find(7), nullptr);
  EXPECT_EQ(findings.find(7)->description, "list `losses` (module __main__)");

  findings.add_answer(
      R"({"sites": [{"site_id": 7, "holder": {"type": "deque", "name": "recent",
          "bounded": true}}]})");
  EXPECT_EQ(findings.find(7)->description, "deque `recent`");
  EXPECT_EQ(findings.find(7)->kind, "unknown");
  EXPECT_TRUE(findings.find(7)->bounded);
}

// A walk that ran out of time names what it reached, which may lie below the
// real holder (a parameter's gradient reached, the optimizer state above it
// not): it never replaces a walk that finished, and one that finished
// replaces it.
TEST(HolderFindings, a_walk_that_finished_wins_over_one_that_ran_out_of_time) {
  const char* finished =
      R"({"sites": [{"site_id": 4, "kind": "tensor",
          "holder": {"type": "defaultdict", "name": "state", "owner": "attribute of Adam"}}]})";
  const char* cut_short =
      R"({"timed_out": true, "sites": [{"site_id": 4, "kind": "tensor",
          "holder": {"type": "Tensor", "name": "?", "owner": "attribute of Parameter"}}]})";
  HolderFindings first_finished;
  first_finished.add_answer(finished);
  first_finished.add_answer(cut_short);
  ASSERT_NE(first_finished.find(4), nullptr);
  EXPECT_EQ(first_finished.find(4)->description, "defaultdict `state` (attribute of Adam)");
  EXPECT_FALSE(first_finished.find(4)->answer.walk_timed_out);

  HolderFindings first_cut;
  first_cut.add_answer(cut_short);
  ASSERT_NE(first_cut.find(4), nullptr);
  EXPECT_TRUE(first_cut.find(4)->answer.walk_timed_out);
  first_cut.add_answer(R"({"sites": [{"site_id": 4, "kind": "unknown"}]})");
  EXPECT_EQ(first_cut.find(4)->description, "Tensor `?` (attribute of Parameter)")
      << "a finished walk that found nothing does not erase a named holder";
  first_cut.add_answer(finished);
  EXPECT_EQ(first_cut.find(4)->description, "defaultdict `state` (attribute of Adam)");
  EXPECT_FALSE(first_cut.find(4)->answer.walk_timed_out);
}

TEST(HolderFindings, skips_sites_a_crafted_answer_spells_wrongly) {
  HolderFindings findings;
  findings.add_answer("not json");
  findings.add_answer(R"({"sites": {"site_id": 1}})");
  findings.add_answer(
      R"({"sites": [3, {"site_id": -1}, {"site_id": 4294967296}, {"site_id": "2"},
          {"site_id": 5, "kind": 9, "holder": {"type": 1, "bounded": "yes"}}]})");
  EXPECT_EQ(findings.find(1), nullptr);
  EXPECT_EQ(findings.find(2), nullptr);
  const HolderFinding* five = findings.find(5);
  ASSERT_NE(five, nullptr);
  EXPECT_EQ(five->kind, "unknown");
  EXPECT_EQ(five->description, "");
  EXPECT_FALSE(five->bounded);

  // `timed_out` of another type than true reads as a walk that finished.
  for (const char* flag : {R"("yes")", "1", "null", "[true]", R"({"x": true})"}) {
    HolderFindings crafted;
    crafted.add_answer(std::string(R"({"timed_out": )") + flag +
                       R"(, "sites": [{"site_id": 6, "holder": {"type": "list"}}]})");
    ASSERT_NE(crafted.find(6), nullptr) << flag;
    EXPECT_FALSE(crafted.find(6)->answer.walk_timed_out) << flag;
  }
}

}  // namespace
}  // namespace gpuleak::analysis
