// The Python stack of a thread that waits on autograd's engine, lent to the
// threads that run the backward pass.
//
// PyTorch runs a CUDA graph's backward on its own engine thread, which runs
// no Python code: the gradients and temporaries allocated there would have
// stacks that end in PyTorch's C++ (and the report could only name an
// allocator frame). While a `backward()` / `torch.autograd.grad()` call is in
// progress, the Python package lends the calling thread's frames; a
// thread with no Python frames of its own borrows them, so an allocation
// made by the backward pass is blamed on the line that started it (its
// native frames still name the backward node, e.g. AddmmBackward0::apply).
//
// Thread safety: lend/end are called with the GIL held (from Python); only
// the outermost lend captures (a backward inside a backward does not
// re-lend). borrow() may run on any thread at any time; it never blocks and
// never takes a lock (a sequence counter; a torn read is retried once, then
// given up). With several Python threads running backward at once, the
// latest lender's stack is the one lent.
#pragma once

namespace gpuleak::collector {

struct PythonFrameReader;

// Captures the calling thread's frames with `reader` (outermost call only).
void lend_python_stack(const PythonFrameReader* reader);
// Ends the loan made by the matching lend_python_stack.
void end_python_stack_loan();
// Copies the lent frames into codes/positions (at most `max`); 0 when none is lent.
int borrow_python_stack(void** codes, int* positions, int max);

}  // namespace gpuleak::collector
