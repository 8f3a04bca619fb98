"""A training loop without torch and without a GPU, for `gpuleak run` tests.

    gpuleak run ... -- /usr/bin/python3 fake_train.py leak|clean|leak-asked [RELEASE_FILE]

It talks to the collector the way the gpuleak Python package does (ctypes,
GIL held), reports 80 explicit steps, and per step allocates a 1 MiB
temporary "torch block" that it frees plus a 64 KiB one that it keeps
("leak") or frees at the end of the step ("clean"). With RELEASE_FILE it
waits, after its last step, until that file exists (at most 60 s): the
test creates it when it has seen gpuleak's live LEAK line, which proves the
line came while the program was still running. "leak-asked" leaks the same
way but says it tracks torch tensors, so gpuleak asks it for the holder,
and never answers (as a program that ends first would not). "leak-cut-walk"
answers like a walk that ran out of time (`timed_out`, a holder below the
real one), then answers the request that follows in full, and prints the
time budget that request asked for.
"""
import ctypes
import json
import os
import sys
import time

lib = ctypes.PyDLL(os.environ["GPULEAK_COLLECTOR"])
u64 = ctypes.c_uint64
mode = sys.argv[1]
release_file = sys.argv[2] if len(sys.argv) > 2 else None
kept = []


def forward(step):
    address = 0x10000000 + step * 0x10000
    lib.gpuleak_record_torch_alloc(u64(address), u64(65536), 0, u64(0))  # MARK: leaking line
    temporary = 0x90000000 + step * 0x100000
    lib.gpuleak_record_torch_alloc(u64(temporary), u64(1 << 20), 0, u64(0))
    lib.gpuleak_record_torch_free(u64(temporary), 0)
    return address


def answer_requests(cut_then_full):
    """Answers the holder requests gpuleak run writes: the first as a walk cut short, the
    second in full. Returns the second request, or None when none came within 60 s."""
    path = os.path.join(os.environ["GPULEAK_TRACE_DIR"], "gpuleak-%d.holder-request.json" % os.getpid())
    deadline = time.monotonic() + 60
    for answer in cut_then_full:
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)
        with open(path) as handle:
            request = json.load(handle)
        os.unlink(path)
        holder = dict(
            answer,
            sites=[dict(answer["sites"][0], site_id=request["sites"][0]["site_id"])],
            request_id=request["request_id"],
        )
        lib.gpuleak_annotate(b"holder", json.dumps(holder).encode())
    return request


CUT_WALK = {
    "timed_out": True,
    "sites": [
        {
            "kind": "tensor",
            "matched_addresses": 9,
            "holder": {
                "type": "Tensor",
                "name": "?",
                "owner": "attribute of Parameter",
                "path": "Parameter.?",
                "bounded": False,
            },
        }
    ],
}
FULL_WALK = {
    "sites": [
        {
            "kind": "tensor",
            "matched_addresses": 9,
            "holder": {
                "type": "defaultdict",
                "name": "state",
                "owner": "attribute of Adam",
                "path": "Adam.state",
                "bounded": False,
            },
        }
    ]
}


def main():
    if lib.gpuleak_start_recording() != 1:
        sys.exit("fake_train: the collector is not recording")
    if mode in ("leak-asked", "leak-cut-walk"):
        lib.gpuleak_annotate(b"torch_tracking", b'{"mode": "allocator-hook"}')
    for step in range(80):
        address = forward(step)
        if mode.startswith("leak"):
            kept.append(address)
        else:
            lib.gpuleak_record_torch_free(u64(address), 0)
        lib.gpuleak_mark_step(u64(step), 2)
        time.sleep(0.005)
    if mode == "leak-cut-walk":
        second = answer_requests([CUT_WALK, FULL_WALK])
        print("fake_train: the second request asked for %s seconds" % (second or {}).get("seconds"))
    if release_file:
        deadline = time.monotonic() + 60
        while not os.path.exists(release_file) and time.monotonic() < deadline:
            time.sleep(0.01)
    print("fake_train: done")


main()
