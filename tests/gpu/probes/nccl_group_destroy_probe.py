"""Does a destroyed NCCL subgroup give its device memory back? A plain run (no gpuleak) of the
depth corpus's control_nccl_group_destroyed shape: a world of one rank makes a new NCCL group per
step, all-reduces on it and destroys it (dist.destroy_process_group(group)). Prints one JSON line
per step with the device's used memory (cudaMemGetInfo, whole device) and PyTorch's own live and
reserved bytes, so growth that is NCCL's own (outside PyTorch's allocator) shows as used memory
rising while the allocator's figures stay flat.

    python3 tests/gpu/probes/nccl_group_destroy_probe.py --steps 40 [--keep]
"""

import argparse
import gc
import json
import os
import socket

import torch
import torch.distributed as dist


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--keep", action="store_true", help="never destroy the groups (the leak)")
    args = parser.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    values = torch.ones(1024, device="cuda")
    kept = []
    for step in range(args.steps):
        group = dist.new_group(ranks=[0])
        dist.all_reduce(values, group=group)
        if args.keep:
            kept.append(group)
        else:
            dist.destroy_process_group(group)
        del group
        gc.collect()
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        print(
            json.dumps(
                {
                    "step": step,
                    "device_used_mib": round((total - free) / 2**20, 1),
                    "torch_allocated_mib": round(torch.cuda.memory_allocated() / 2**20, 2),
                    "torch_reserved_mib": round(torch.cuda.memory_reserved() / 2**20, 1),
                    "groups": len(dist.distributed_c10d._world.pg_map),
                }
            ),
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
