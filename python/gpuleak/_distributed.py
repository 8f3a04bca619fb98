"""Which rank of a distributed job this process is."""


def distributed_role(environ):
    """Rank, local rank and world size of a torchrun/torch.distributed process, or None.

    Read from the launcher's environment (RANK, LOCAL_RANK, WORLD_SIZE) so that
    reports can tell the ranks of one job apart without calling into
    torch.distributed, which may not be initialized yet.
    """
    role = {}
    for key, name in (("RANK", "rank"), ("LOCAL_RANK", "local_rank"), ("WORLD_SIZE", "world_size")):
        try:
            role[name] = int(environ[key])
        except (KeyError, ValueError):
            continue
    return role if "rank" in role else None
