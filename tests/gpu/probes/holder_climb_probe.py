"""Probe: what the holder walk sees when it answers a request inside a real run.

    gpuleak run -- python3 tests/gpu/probes/holder_climb_probe.py OUT.jsonl CASE.py [ARGS...]

Runs CASE.py as __main__ with the walk's climb and holder choice wrapped, so
that every request answered in the process appends one JSON line to OUT.jsonl:
the starting elements (type, shape, leaf, whether some leaf holds it as .grad),
each object the climb found (type, depth, cover, root, choosable), the holder
chosen and its chain. For cases whose holder differs between the GPU and the
CPU tests (the optimizer state of replaced parameters named "Tensor ?
(attribute of Parameter)" on the H200).
"""
import json
import runpy
import sys

from gpuleak.holders import walk as walk_module

OUT = sys.argv[1]
CASE = sys.argv[2]


def describe(obj):
    text = type(obj).__name__
    shape = getattr(obj, "shape", None)
    if shape is not None:
        text += " %s" % (tuple(shape),)
    if hasattr(obj, "is_leaf"):
        try:
            text += " leaf" if obj.is_leaf else " non-leaf"
        except Exception:
            pass
    return text


original_climb_and_name = walk_module.Walk.climb_and_name
original_choose_holder = walk_module.Walk.choose_holder


def climb_and_name(self, sites):
    record = {"sites": len(sites), "choices": []}
    self._probe_record = record
    original_climb = self.climb

    def climb(starts):
        result = original_climb(starts)
        grad_owners = self.grad_owners or {}
        record.setdefault("climbs", []).append(
            {
                "starts": [describe(obj) + (" grad-of-leaf" if id(obj) in grad_owners else "") for obj in starts[:16]],
                "grad_owners": len(grad_owners),
                "found": [
                    {
                        "type": describe(self.keep[key]),
                        "depth": result.depth.get(key),
                        "cover": bin(result.cover.get(key, 0)).count("1"),
                        "root": bool(self.is_root(self.keep[key])),
                        "choosable": bool(self.choosable(result, key)),
                        "parents": [describe(self.keep[p]) for p in result.parents.get(key, ())[:4]],
                    }
                    for key in result.order[:80]
                ],
            }
        )
        return result

    self.climb = climb
    try:
        return original_climb_and_name(self, sites)
    finally:
        del self.climb
        record["answers"] = [site.answer for site in sites]
        record["timed_out"] = self.timed_out
        with open(OUT, "a") as out:
            out.write(json.dumps(record, default=str) + "\n")


def choose_holder(self, climb, sample_mask, elements):
    key = original_choose_holder(self, climb, sample_mask, elements)
    record = getattr(self, "_probe_record", None)
    if record is not None:
        record["choices"].append(describe(self.keep[key]))
    return key


walk_module.Walk.climb_and_name = climb_and_name
walk_module.Walk.choose_holder = choose_holder
sys.argv = [CASE] + sys.argv[3:]
sys.path.insert(0, __import__("os").path.dirname(CASE))
runpy.run_path(CASE, run_name="__main__")
