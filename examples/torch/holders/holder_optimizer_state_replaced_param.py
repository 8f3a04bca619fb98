"""Parameters replaced during training while the optimizer keeps the old ones' state.

Reported: https://github.com/graphdeco-inria/gaussian-splatting/issues/897
(`_prune_optimizer` replaces `group["params"][0]` with a new `nn.Parameter`
and moves the Adam state over to it; see also
https://github.com/DrChainsaw/NaiveNASflux.jl/issues/18, "Memory leak with
stateful optimizers": "since parameter arrays are replaced with new
instances ... the dict just keeps getting new entries"). The shape here: a
point cloud is re-created as a new parameter every step (a densify/prune
pass that keeps its size) and its Adam moments are moved to the new
parameter, but the old key is never deleted from `optimizer.state`: the old
parameter, its gradient and both moments stay (4 x 65536 x 3 float32 =
3 MiB per step).

Holder: the dict `state` (attribute of Adam), keyed by the old parameters.
Fix: `del optimizer.state[old]` before storing the state under the new
parameter.
"""
import torch
from torch import nn

from case_options import parse_args

POINTS = 65536


class PointCloud:
    def __init__(self, device):
        self.xyz = nn.Parameter(torch.randn(POINTS, 3, device=device))
        self.optimizer = torch.optim.Adam([self.xyz], lr=1e-3)

    def replace_points(self, keep):
        group = self.optimizer.param_groups[0]
        old = group["params"][0]
        stored_state = self.optimizer.state.get(old, None)
        new_param = nn.Parameter(torch.where(keep[:, None], old.detach(), torch.randn_like(old)))
        if stored_state is not None:
            stored_state = {"step": stored_state["step"],
                            "exp_avg": stored_state["exp_avg"].clone(),
                            "exp_avg_sq": stored_state["exp_avg_sq"].clone()}
        group["params"][0] = new_param
        self.optimizer.state[new_param] = stored_state  # KEPT: item-assignment
        self.xyz = new_param


def train(steps, device):
    torch.manual_seed(0)
    cloud = PointCloud(device)
    target = torch.randn(POINTS, 3, device=device)
    for _ in range(steps):
        loss = (cloud.xyz - target).pow(2).mean()
        cloud.optimizer.zero_grad()
        loss.backward()
        cloud.optimizer.step()
        cloud.replace_points(torch.rand(POINTS, device=device) > 0.01)
    return loss.item()


def main():
    args = parse_args(__doc__)
    print("steps=%d loss=%.4f" % (args.steps, train(args.steps, args.device)))


if __name__ == "__main__":
    main()
