"""Decisions every rank of a distributed run takes together.

A rank that stops, saves or skips a step alone leaves the others waiting in their next
collective (DDP's gradient all-reduce) until the process group times out. So each such
decision is the maximum over the ranks of what each rank saw:
``decision = max_r(value_r)`` -- one all-reduce of a few integers, at the point where every rank
asks. In a run of one process it is the value itself, with no communication.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from mmengine.dist import all_reduce, get_world_size


def max_over_ranks(values: Sequence[float]) -> list[float]:
    """``values`` (the same length on every rank), each replaced by its maximum over the ranks
    (mmengine's ``all_reduce``: the process group's device, gloo or NCCL)."""
    if get_world_size() == 1:
        return list(values)
    reduced = torch.tensor(list(values), dtype=torch.float64)
    all_reduce(reduced, op='max')
    return reduced.tolist()


def any_rank(flag: bool) -> bool:
    """Whether ``flag`` is true on at least one rank."""
    return max_over_ranks([float(flag)])[0] > 0
