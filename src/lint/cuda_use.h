// Code that initializes or uses CUDA in the process that runs it: `.cuda()`,
// `.to("cuda")` / `.to(device)`, tensors created with `device="cuda"`, and
// torch.cuda calls other than the side-effect-free queries (is_available,
// device_count, is_initialized).
#pragma once

#include "file_analysis.h"

namespace gpuleak::lint {

// True when `call` moves to or allocates on a CUDA device (or on a device
// held in a variable named like one: `device`, `self.device`, `local_rank`).
bool call_uses_cuda(const FileAnalysis& file, NodeId call);
// True when the call's device argument names CUDA or a device variable.
bool call_targets_cuda_device(const FileAnalysis& file, NodeId call);
// The first call in `root`'s subtree, in scope `scope`, that uses CUDA.
NodeId first_cuda_use(const FileAnalysis& file, NodeId root, std::size_t scope);

}  // namespace gpuleak::lint
