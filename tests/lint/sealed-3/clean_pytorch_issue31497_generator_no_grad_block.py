# Source: https://github.com/pytorch/pytorch/issues/31497 ("torch.no_grad() context manager seems to
#   leak memory"), the first version in the report, the one it says does not use memory (wrapped
#   in a module with the `args` it reads)
# Reported: "I have a lazy loop that is used to evaluate the model. This version doesn't use any
#   noticeable memory (memory_allocated < 1Gb)" -- the OOM came from a second version decorated
#   with @torch.no_grad(), which then did not apply inside a generator's body (fixed by
#   https://github.com/pytorch/pytorch/pull/31792).
# Pattern: look-alike, no leak: a generator over the data loader moves each batch to the GPU and
#   runs the model inside `with torch.no_grad():` in the loop body, so the yielded log_probs carry
#   no graph; the generator keeps no list, and each batch's tensors are rebound on the next
#   iteration.
# Label: control: nothing here keeps GPU memory across iterations
import torch


def apply_model(data_loader, model, args):
    for dataset_name_, audio_path_, reference_, x, xlen, y, ylen in data_loader:
        x, xlen, y, ylen = x.to(args.device), xlen.to(args.device), y.to(args.device), ylen.to(args.device)
        with torch.no_grad():
            log_probs, output_lengths, loss = map(model(x, xlen, y=y, ylen=ylen).get,
                                                  ['log_probs', 'output_lengths', 'loss'])
        yield log_probs
