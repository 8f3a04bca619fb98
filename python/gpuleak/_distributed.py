"""Which rank of a distributed job this process is."""

# Each launcher's names for rank, local rank and world size, in the order
# they are trusted: torchrun (and torch.distributed's env:// init) first,
# then Slurm's srun, then Open MPI's mpirun. A process started by torchrun
# inside a Slurm allocation has both; torchrun's RANK is the one its
# process group uses.
_LAUNCHERS = (
    ("torchrun", ("RANK", "LOCAL_RANK", "WORLD_SIZE")),
    ("slurm", ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS")),
    ("open-mpi", ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE")),
)


def distributed_role(environ):
    """Rank, local rank, world size and launcher of a distributed process, or None.

    Read from the launcher's environment so that reports can tell the ranks of
    one job apart (on one host or many) without calling into
    torch.distributed, which may not be initialized yet.
    """
    for launcher, keys in _LAUNCHERS:
        role = {}
        for key, name in zip(keys, ("rank", "local_rank", "world_size")):
            try:
                role[name] = int(environ[key])
            except (KeyError, ValueError):
                continue
        if "rank" in role:
            role["launcher"] = launcher
            return role
    return None
