"""One CUDA graph captured, and kept, for every new input length.

Reported: https://github.com/pytorch/pytorch/issues/188150
(`torch.compile(mode="reduce-overhead")` "recompiles on every batch with
dynamic padding": one CUDA graph is recorded per distinct input size, and
every recorded graph keeps its own memory pool, as
https://github.com/pytorch/pytorch/pull/188913 describes). The shape here
is the same mechanism written by hand: a runner captures a graph the first
time it sees a sequence length and keeps the graph, its static input and its
static output in a dict keyed by length. Each batch is padded to its own
longest sequence, so almost every batch brings a new length, a new graph, a
new private pool and new static tensors. CUDA only.

Holder: the dict `graphs` (attribute of GraphRunner), keyed by length.
Fix: pad to a few fixed lengths (buckets) so that the graphs are reused, or
bound the dict and drop the least recently used graph.
"""
import torch
from torch import nn

from case_options import mark_step, parse_args

BATCH, WIDTH = 32, 512


class GraphRunner:
    def __init__(self, model):
        self.model = model
        self.graphs = {}

    def capture(self, length, device):
        static_input = torch.zeros(BATCH, length, WIDTH, device=device)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up outside the graph, as CUDA graph capture requires
                self.model(static_input)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_output = self.model(static_input)
        self.graphs[length] = (graph, static_input, static_output)  # KEPT: item-assignment

    def __call__(self, batch):
        length = batch.shape[1]
        if length not in self.graphs:
            self.capture(length, batch.device)
        graph, static_input, static_output = self.graphs[length]
        static_input.copy_(batch)
        graph.replay()
        return static_output


def run(steps, device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH)).to(device).eval()
    runner = GraphRunner(model)
    with torch.no_grad():
        for step in range(steps):
            length = 16 + step  # dynamic padding: each batch padded to its own longest sequence
            runner(torch.randn(BATCH, length, WIDTH, device=device)).sum().item()
            mark_step()
    return len(runner.graphs)


def main():
    args = parse_args(__doc__, cuda_only=True)
    print("batches=%d graphs=%d" % (args.steps, run(args.steps, args.device)))


if __name__ == "__main__":
    main()
