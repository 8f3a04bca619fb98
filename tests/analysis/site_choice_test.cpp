// Which frame of a stack a report blames (analysis/model/stack_catalog.h).
#include <gtest/gtest.h>

#include <vector>

#include "analysis/model/stack_catalog.h"

namespace gpuleak::analysis {
namespace {

Frame python(const char* function, const char* file, std::uint32_t line, const char* text,
             bool internal = false) {
  Frame f;
  f.language = Frame::Language::kPython;
  f.function = function;
  f.file = file;
  f.line = line;
  f.source_line = text;
  f.internal = internal;
  return f;
}

TEST(SiteChoice, a_compiled_function_at_its_def_line_gives_way_to_its_caller) {
  // torch.compile: the logits are made by code TorchDynamo put under the
  // original forward's frame, which stands at `def forward`.
  std::vector<Frame> frames = {
      python("TinyLM.forward", "/work/lm.py", 30, "    def forward(self, tokens):"),
      python("Module._call_impl", "/usr/lib/python3/torch/nn/modules/module.py", 1750,
             "        return forward_call(*args, **kwargs)", true),
      python("main", "/work/lm.py", 61, "        logits = model(tokens)"),
  };
  frames[0].at_definition = true;
  Site site = choose_site(frames);
  EXPECT_EQ(site.function, "main");
  EXPECT_EQ(site.line, 61u);
}

TEST(SiteChoice, a_frame_running_a_statement_of_its_function_is_blamed) {
  std::vector<Frame> frames = {
      python("TinyLM.forward", "/work/lm.py", 33, "        return self.head(hidden)"),
      python("main", "/work/lm.py", 61, "        logits = model(tokens)"),
  };
  EXPECT_EQ(choose_site(frames).line, 33u);
}

TEST(SiteChoice, when_every_program_frame_is_at_its_def_line_the_innermost_is_still_named) {
  std::vector<Frame> frames = {python("f", "/work/a.py", 3, "def f(x):")};
  frames[0].at_definition = true;
  EXPECT_EQ(choose_site(frames).function, "f");
}

TEST(SiteChoice, def_lines_are_told_from_other_statements) {
  EXPECT_TRUE(is_def_line("    def forward(self, tokens):"));
  EXPECT_TRUE(is_def_line("async def serve(request):"));
  EXPECT_FALSE(is_def_line("    default = torch.zeros(3)"));
  EXPECT_FALSE(is_def_line("    x = lambda t: t * 2"));
  EXPECT_FALSE(is_def_line(""));
}

TEST(SiteChoice, the_cuda_runtime_templates_inlined_into_a_program_are_the_toolkit_s) {
  // On the H200 the client matrix's C++ leak was blamed on cudaMalloc<float>
  // at cuda_runtime.h:879, inlined into process_batch.
  EXPECT_TRUE(
      is_toolkit_header("/usr/local/cuda/bin/../targets/x86_64-linux/include/cuda_runtime.h"));
  EXPECT_TRUE(is_toolkit_header("/usr/local/cuda-13.0/include/cuda_runtime.h"));
  EXPECT_TRUE(is_toolkit_header("/opt/cuda/include/cuda_runtime_api.h"));
  EXPECT_FALSE(is_toolkit_header("/work/examples/clients/cuda/leak_scratch_per_batch.cu"));
  EXPECT_FALSE(is_toolkit_header("/home/me/include/runtime.h"));
}

TEST(SiteChoice, gpuleak_s_own_python_is_internal_wherever_it_is_installed) {
  for (const char* own :
       {"/work/main/python/gpuleak/_backward_lines.py",
        "/usr/local/share/gpuleak/python/gpuleak/_boot.py",
        "/opt/torch/.venv/lib/python3.12/site-packages/gpuleak/_backward_lines.py",
        "/usr/lib/python3/dist-packages/gpuleak/tracking.py"}) {
    EXPECT_TRUE(is_gpuleak_python(own)) << own;
    EXPECT_TRUE(is_internal_python(own)) << own;
  }
  for (const char* program : {"/home/me/gpuleak/train.py", "/job/python/train_gpuleak.py"}) {
    EXPECT_FALSE(is_gpuleak_python(program)) << program;
  }
}

TEST(SiteChoice, an_ipython_cell_is_the_user_s_code_and_ipython_s_own_frames_are_not) {
  // On the H100, %%gpuleak in IPython's shell blamed
  // IPython/core/interactiveshell.py:3378 (run_code) for a tensor the cell
  // kept: the cell's frame, `<ipython-input-N-...>`, was taken for one of
  // Python's own (<string>, <frozen ...>).
  EXPECT_FALSE(is_internal_python("<ipython-input-3-5f0c8a1e2b7d>"));
  EXPECT_TRUE(is_internal_python("<string>"));
  EXPECT_TRUE(is_internal_python("<frozen importlib._bootstrap>"));
  for (const char* ipython :
       {"/usr/lib/python3/dist-packages/IPython/core/interactiveshell.py",
        "/opt/venv/lib/python3.12/site-packages/IPython/core/interactiveshell.py",
        "/work/main/dist/ipython/IPython/core/interactiveshell.py",
        "/usr/lib/python3/dist-packages/ipykernel/ipkernel.py"}) {
    EXPECT_TRUE(is_internal_python(ipython)) << ipython;
  }
  // A kernel's cell file is the user's (ipykernel writes cells under /tmp).
  EXPECT_FALSE(is_internal_python("/tmp/ipykernel_4242/3127384913.py"));
}

}  // namespace
}  // namespace gpuleak::analysis
