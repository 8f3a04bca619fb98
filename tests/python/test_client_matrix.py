"""The client matrix's judgement of a loop's own output (tests/gpu/client_matrix.py): gpuleak must
not change a client's losses, but a loop that is not bit-reproducible by itself (torch.compile's
kernels that accumulate with atomics) differs between two plain runs too."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "gpu"))
import client_matrix  # noqa: E402

PLAIN = {(0, step): 2.0 - step / 100 for step in range(40)}


def shifted(losses, relative, every=1):
    return {key: value * (1 + relative) if key[1] % every == 0 else value for key, value in losses.items()}


def judge(traced, plain_again=None):
    traced_vs_plain = client_matrix.compare_losses(PLAIN, traced)
    plain_vs_plain = client_matrix.compare_losses(PLAIN, plain_again) if plain_again is not None else None
    return client_matrix.output_unchanged(traced_vs_plain, plain_vs_plain)


def test_identical_losses_are_unchanged_without_a_second_plain_run():
    assert judge(dict(PLAIN)) is True


def test_any_difference_is_a_change_when_two_plain_runs_agree_bit_for_bit():
    assert judge(shifted(PLAIN, 1e-7, every=7), plain_again=dict(PLAIN)) is False
    assert judge(shifted(PLAIN, 1e-7, every=7)) is False  # no second plain run: not excused


def test_a_difference_the_size_of_the_loops_own_run_to_run_variation_is_no_change():
    assert judge(shifted(PLAIN, 5e-7, every=3), plain_again=shifted(PLAIN, 2e-7, every=5)) is True


def test_a_difference_far_beyond_the_loops_own_variation_is_a_change():
    assert judge(shifted(PLAIN, 1e-3), plain_again=shifted(PLAIN, 2e-7, every=5)) is False


def test_no_steps_compared_cannot_be_told():
    assert client_matrix.output_unchanged(client_matrix.compare_losses(PLAIN, {}), None) is None
