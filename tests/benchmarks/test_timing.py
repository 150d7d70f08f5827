"""dna_mm.benchmarks.timing: the calls take turns, warm-up rounds are run and not kept; a fresh
process sends its result back, its failure whole, a user's mistake there as it is."""

from __future__ import annotations

import math

import pytest

from dna_mm.benchmarks.timing import Sample, in_fresh_process, in_order, median_ms, rotated, time_in_turns
from dna_mm.errors import ConfigError, UserError, error_line
from dna_mm.models.attention.base import checked_kernel


def test_calls_take_turns_and_the_warmup_is_not_kept() -> None:
    calls, rounds = [], []

    def order(r: int, keys):
        rounds.append(r)
        return rotated(r, keys)

    made = {k: (lambda k=k: calls.append(k) or k) for k in 'abc'}
    samples = time_in_turns(made, rounds=3, warmup=2, order=order)
    assert rounds == [-2, -1, 0, 1, 2]
    assert ''.join(calls[6:]) == 'abc' + 'bca' + 'cab'  # the kept rounds, each rotated by one
    assert {k: [s.value for s in v] for k, v in samples.items()} == {k: [k] * 3 for k in 'abc'}
    assert all(s.wall >= 0 and s.cpu >= 0 and s.peak_bytes is None for v in samples.values() for s in v)


def test_in_order_and_the_median() -> None:
    assert in_order(5, ['x', 'y']) == ['x', 'y'] and rotated(-1, [1, 2, 3]) == [3, 1, 2]
    samples = [Sample(wall=w, cpu=2 * w) for w in (0.003, 0.001, 0.002)]
    assert median_ms(samples) == pytest.approx(2.0) and median_ms(samples, 'cpu') == pytest.approx(4.0)


def test_a_fresh_process_sends_its_result_back_and_its_failure_whole() -> None:
    assert in_fresh_process(math.sqrt, 4.0) == 2.0
    with pytest.raises(RuntimeError, match=r'(?s)sqrt\(-1.0,\) failed:.*ValueError: math domain error'):
        in_fresh_process(math.sqrt, -1.0)


def test_a_users_mistake_in_a_fresh_process_is_raised_as_it_is() -> None:
    """A :class:`UserError` there (a member's wrong output shape, in a benchmark's CPU process)
    is the same one here, one line for the tools, not a ``RuntimeError`` with a traceback."""
    with pytest.raises(ConfigError) as err:
        in_fresh_process(checked_kernel, 'Mine', 'fused', ('sdpa',), 32)
    assert error_line(err.value) == "Mine: kernel must be one of ['sdpa'], got 'fused'"
    assert isinstance(err.value, UserError)
