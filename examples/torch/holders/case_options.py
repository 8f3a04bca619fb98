"""Command-line options shared by the holder-kind cases (examples/torch/holders/).

Every case takes `--steps N` and `--device cuda|cpu` (default cuda), like the
scripts of examples/torch/. `mark_step()` marks one iteration under
`gpuleak run` for loops that step no optimizer, and does nothing otherwise.
"""
import argparse
import sys

try:  # under `gpuleak run` this marks a step; without gpuleak it does nothing
    from gpuleak import step as mark_step
except ImportError:
    def mark_step():
        pass


def parse_args(doc, default_steps=120, cuda_only=False):
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--steps", type=int, default=default_steps,
                        help="iterations (default %d)" % default_steps)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available here; run with --device cpu")
    if cuda_only and args.device != "cuda":
        sys.exit("this case needs CUDA (it has no CPU form)")
    args.device = torch.device(args.device)
    return args
