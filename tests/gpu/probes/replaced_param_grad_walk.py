"""Probe: what the holder walk names for the gradients of replaced parameters
(examples/torch/holders/holder_optimizer_state_replaced_param.py) on this
torch, asked per kind of allocation (gradients, parameters, Adam moments),
with the climb's candidates for the gradients. Writes JSON to argv[1]."""
import gc
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "examples", "torch", "holders"))
import torch  # noqa: E402
import holder_optimizer_state_replaced_param as case  # noqa: E402
from gpuleak import holders  # noqa: E402
from gpuleak.holders import referrer_climb  # noqa: E402

out = {"torch": torch.__version__}
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
cloud = case.PointCloud(device)
target = torch.randn(case.POINTS, 3, device=device)
for step in range(12):
    loss = (cloud.xyz - target).pow(2).mean()
    cloud.optimizer.zero_grad()
    loss.backward()
    cloud.optimizer.step()
    cloud.replace_points(torch.rand(case.POINTS, device=device) > 0.01)
olds = [p for p in cloud.optimizer.state if p is not cloud.xyz]


def span(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return [s.data_ptr(), s.nbytes() if hasattr(s, "nbytes") else s.size() * t.element_size()]


kinds = {
    "grad": [span(p.grad) for p in olds if p.grad is not None],
    "param": [span(p) for p in olds],
    "exp_avg": [span(cloud.optimizer.state[p]["exp_avg"]) for p in olds],
}
out["olds"] = len(olds)
out["grad_referrer_types"] = sorted({type(r).__name__ for r in gc.get_referrers(olds[0].grad)})
out["param_referent_types"] = sorted({type(r).__name__ for r in gc.get_referents(olds[0])})
out["param_referrer_types"] = sorted({type(r).__name__ for r in gc.get_referrers(olds[0])})
seen = []
original = referrer_climb.ReferrerClimb.choose_holder


def choose_holder(self, climb, sample_mask, elements):
    rows = []
    for key in climb.order[:60]:
        obj = self.keep.get(key)
        rows.append(
            [
                type(obj).__name__,
                bin(climb.cover.get(key, 0) & sample_mask).count("1"),
                climb.depth.get(key),
                bool(self.choosable(climb, key)),
            ]
        )
    chosen = original(self, climb, sample_mask, elements)
    seen.append(
        {
            "candidates": rows,
            "chosen": type(self.keep.get(chosen)).__name__,
            "elements": [type(e).__name__ for e in elements[:3]],
        }
    )
    return chosen


referrer_climb.ReferrerClimb.choose_holder = choose_holder
for kind, spans in kinds.items():
    del seen[:]
    started = time.monotonic()
    answer = holders.answer_request({"request_id": kind, "sites": [{"site_id": 1, "addresses": spans[-8:]}]}, 10.0)
    site = answer["sites"][0] if answer.get("sites") else {}
    out[kind] = {
        "holder": site.get("holder"),
        "matched": site.get("matched_addresses"),
        "kind": site.get("kind"),
        "seconds": answer.get("seconds"),
        "timed_out": answer.get("timed_out"),
        "error": answer.get("error"),
        "climb": list(seen),
        "wall": round(time.monotonic() - started, 3),
    }
json.dump(out, open(sys.argv[1], "w"), indent=1, default=str)
print(json.dumps({k: (v.get("holder") if isinstance(v, dict) else v) for k, v in out.items()}, default=str)[:3000])
