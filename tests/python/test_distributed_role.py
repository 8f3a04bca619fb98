"""The rank annotation that lets reports tell the processes of one job apart."""
from gpuleak._distributed import distributed_role


def test_torchrun_environment_gives_rank_local_rank_and_world_size():
    assert distributed_role({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}) == {
        "rank": 1,
        "local_rank": 1,
        "world_size": 2,
        "launcher": "torchrun",
    }


def test_slurm_and_open_mpi_ranks_are_read_when_torchrun_set_none():
    assert distributed_role({"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8"}) == {
        "rank": 5,
        "local_rank": 1,
        "world_size": 8,
        "launcher": "slurm",
    }
    assert distributed_role(
        {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}
    ) == {"rank": 3, "local_rank": 3, "world_size": 4, "launcher": "open-mpi"}


def test_torchrun_inside_a_slurm_allocation_uses_torchruns_rank():
    # srun starts one torchrun per node (SLURM_PROCID is the node's task);
    # the process group's rank is torchrun's RANK.
    env = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "RANK": "6", "LOCAL_RANK": "2", "WORLD_SIZE": "8"}
    assert distributed_role(env) == {"rank": 6, "local_rank": 2, "world_size": 8, "launcher": "torchrun"}


def test_no_rank_means_not_distributed():
    assert distributed_role({"WORLD_SIZE": "2"}) is None
    assert distributed_role({"SLURM_NTASKS": "2"}) is None
    assert distributed_role({}) is None


def test_malformed_values_are_ignored():
    assert distributed_role({"RANK": "x", "LOCAL_RANK": "0"}) is None
    assert distributed_role({"RANK": "3", "WORLD_SIZE": "four"}) == {"rank": 3, "launcher": "torchrun"}
