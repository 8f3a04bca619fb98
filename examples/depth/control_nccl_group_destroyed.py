"""NOT A LEAK: a new NCCL process group for every call, destroyed with destroy_process_group when done.

Sources:
  https://github.com/pytorch/pytorch/issues/40400  ("New ProcessGroups created with dist.new_group may leak
      memory": "if we repeatedly create a group with dist.new_group() and then run del and gc.collect() in a
      loop, the memory usage of the process slowly increases which can eventually cause an OOM")
  https://github.com/NVIDIA/Megatron-LM/issues/6897  ("parallel_state.destroy_model_parallel leaks NCCL
      process groups": "Every NCCL group is set to None without torch.distributed.destroy_process_group(),
      so the communicator stays alive in c10d's global _world.pg_map -- dropping Megatron's reference does
      not free it.")

What was reported: a process group made with dist.new_group() is registered in
c10d's global map; dropping the Python reference (del, None, gc.collect())
does not destroy it, so its NCCL communicator and the communicator's device
buffers stay allocated. Only dist.destroy_process_group(group) frees them.

This program: the same "sync" helper as leak_nccl_group_per_call.py, with the
fix the reports give: after the all-reduce, dist.destroy_process_group(group)
removes the group from c10d's map and destroys its NCCL communicator
(ncclCommDestroy), so each step's communicator is freed before the next.

Step: one call of sync_metrics().
Verdict: NO LEAK.
"""
import argparse
import gc
import os
import socket
import sys

import torch
import torch.distributed as dist


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=24, help="calls (default 24)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("CUDA is not available here")
    return args


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sync_metrics(values):
    group = dist.new_group(ranks=[0])
    dist.all_reduce(values, group=group)
    dist.destroy_process_group(group)
    del group
    gc.collect()
    return values


def main():
    args = parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    values = torch.ones(1024, device="cuda")
    for step in range(args.steps):
        values = sync_metrics(values) / 1.0
    torch.cuda.synchronize()
    print("steps=%d groups=%d" % (args.steps, len(dist.distributed_c10d._world.pg_map)))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
