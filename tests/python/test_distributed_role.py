"""The rank annotation that lets reports tell the processes of one job apart."""
from gpuleak._distributed import distributed_role


def test_torchrun_environment_gives_rank_local_rank_and_world_size():
    assert distributed_role({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}) == {
        "rank": 1, "local_rank": 1, "world_size": 2}


def test_no_rank_means_not_distributed():
    assert distributed_role({"WORLD_SIZE": "2"}) is None
    assert distributed_role({}) is None


def test_malformed_values_are_ignored():
    assert distributed_role({"RANK": "x", "LOCAL_RANK": "0"}) is None
    assert distributed_role({"RANK": "3", "WORLD_SIZE": "four"}) == {"rank": 3}
