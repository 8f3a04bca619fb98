"""Probe, to run under `gpuleak run`: the replaced-parameter holder case
(examples/torch/holders/holder_optimizer_state_replaced_param.py) with the
walk's choice of holder written down, for the in-process candidate walks that
gpuleak's own package starts (the GPU corpus names `Tensor ? (attribute of
Parameter)` there, while the same walk outside gpuleak run names Adam's state:
bench/baselines/gpu/replaced-param-grad-walk.json).

    dist/gpuleak run -o $OUT/trace -- python3 tests/gpu/probes/replaced_param_candidate_walk.py $OUT/climb.jsonl

Each walk's forked copy appends one JSON line per choice: the elements' types,
the climb's first 60 nodes (type, elements covered, depth, choosable) and the
chosen holder's type.
"""
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, "examples", "torch", "holders"))
import holder_optimizer_state_replaced_param as case  # noqa: E402
from gpuleak.holders import referrer_climb  # noqa: E402  (the package gpuleak run loaded)

OUT = sys.argv[1]
original = referrer_climb.ReferrerClimb.choose_holder


def choose_holder(self, climb, sample_mask, elements):
    chosen = original(self, climb, sample_mask, elements)
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
    line = json.dumps(
        {
            "pid": os.getpid(),
            "elements": [type(e).__name__ for e in elements[:4]],
            "element_count": len(elements),
            "chosen": type(self.keep.get(chosen)).__name__,
            "grad_owners": len(getattr(self, "grad_owners", None) or {}),
            "timed_out": self.timed_out,
            "candidates": rows,
        }
    )
    with open(OUT, "a") as f:
        f.write(line + "\n")
    return chosen


referrer_climb.ReferrerClimb.choose_holder = choose_holder
print("loss=%.4f" % case.train(60, "cuda"))
