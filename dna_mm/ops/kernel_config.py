"""Launch configurations of the fused DnA kernels, per GPU, dtype and head dim.

One table, read by the launcher (:mod:`.triton_dna`) and by the ahead-of-time compiler
(:func:`dna_mm.ops.compile_kernels`), so what CI compiles is what a GPU runs. A configuration
is chosen by the device's shared memory per block (the opt-in maximum, from its compute
capability), the input dtype (fp16 / bf16 share one; fp32 tiles take twice the bytes) and the
head dim. Every entry was compiled for sm80, sm86, sm89 and sm90 and fits that target's shared
memory (``tests/ops/test_triton_dna.py``; figures in ``docs/triton_kernel.md``).
"""

from __future__ import annotations

import contextlib
from typing import Iterator, NamedTuple

import torch

#: head dims the kernels are compiled and tested for
HEAD_DIMS = (32, 64, 128)
#: kernels of one forward + backward, in launch order
KERNELS = ('forward', 'backward_kv', 'backward_q')
#: the same for sequences of at most :data:`SHORT_TOKENS` queries and keys, without biases, then
#: those of softmax attention alone in the same kernels (their one-branch form)
SHORT_KERNELS = ('short_forward', 'short_backward', 'short_softmax_forward', 'short_softmax_backward')
#: the longest sequence the packed short-sequence kernels take (:mod:`.triton_short`)
SHORT_TOKENS = 32

#: opt-in shared memory per block (bytes) by compute capability; others get the smallest
#: tier at or below their own (unknown capabilities: the 99 KB tier, sm86 / sm89's)
SHARED_MEMORY = {
    (8, 0): 166_912,  # A100
    (8, 6): 101_376,  # A10, A40, RTX 30
    (8, 7): 166_912,  # Jetson Orin
    (8, 9): 101_376,  # L4, L40, RTX 40
    (9, 0): 232_448,  # H100, H200
}
#: the capabilities the configurations are verified on (``compile_kernels``' test matrix)
TESTED_CAPABILITIES = ((8, 0), (8, 6), (8, 9), (9, 0))


class LaunchConfig(NamedTuple):
    """Tile sizes and Triton launch options of one kernel."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


# (tier, dtype class, head dim) → {kernel: config}; tiers by shared memory, largest first
_TIERS = (('sm90', 232_448), ('sm80', 166_912), ('sm86', 101_376))
_C = LaunchConfig
_TABLE: dict[tuple[str, str, int], dict[str, LaunchConfig]] = {}
# fp16 / bf16: tensor cores; 8 warps where a tile keeps three fp32 accumulators
for _tier, _fwd128 in (('sm90', _C(128, 32, 8, 2)), ('sm80', _C(64, 32, 8, 2)), ('sm86', _C(64, 32, 8, 2))):
    for _d in (32, 64):
        _fwd = _C(64, 32, 4, 2) if _tier == 'sm86' else _C(128, 32, 8, 2)
        _TABLE[_tier, 'half', _d] = dict(
            forward=_fwd, backward_kv=_C(32, 64, 8, 2), backward_q=_C(64, 32, 8, 2)
        )
    _TABLE[_tier, 'half', 128] = dict(
        forward=_fwd128, backward_kv=_C(16, 32, 4, 2), backward_q=_C(32, 32, 8, 2)
    )
# fp32 (IEEE or TF32): small tiles; no pipelining in the backward (its FMA products need the registers)
for _tier in ('sm90', 'sm80', 'sm86'):
    for _d in (32, 64):
        _TABLE[_tier, 'fp32', _d] = dict(
            forward=_C(64, 32, 8, 2), backward_kv=_C(16, 32, 4, 1), backward_q=_C(16, 32, 4, 1)
        )
    _TABLE[_tier, 'fp32', 128] = dict(
        forward=_C(32, 32, 8, 2), backward_kv=_C(16, 32, 8, 1), backward_q=_C(16, 16, 4, 2)
    )


def shared_memory_limit(capability: tuple[int, int]) -> int:
    """Opt-in shared memory per block of a compute capability (bytes)."""
    return SHARED_MEMORY.get(tuple(capability), 101_376)


def tier(capability: tuple[int, int]) -> str:
    """The configuration tier of a capability: the largest whose shared memory it has."""
    limit = shared_memory_limit(capability)
    return next(name for name, need in _TIERS if limit >= need or name == 'sm86')


def launch_configs(capability: tuple[int, int], dtype: torch.dtype, head_dim: int) -> dict[str, LaunchConfig]:
    """``{kernel: LaunchConfig}`` for one forward + backward on this device, dtype and head dim."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f'dna_attention: head dim {head_dim} not supported (one of {HEAD_DIMS})')
    if dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f'dna_attention: dtype {dtype} not supported (fp16, bf16 or fp32)')
    kind = 'fp32' if dtype == torch.float32 else 'half'
    return _TABLE[tier(capability), kind, head_dim]


# short sequences: ``block_m`` is the packed tile's rows (``block_n`` the same: keys share the
# rows); a tile holds ``block_m / S`` sequences, at least one. Chosen from the ahead-of-time
# compilation (no spills on sm80 / sm86 / sm90 in fp16 / bf16; fp32's backward spills at head
# dims 64 and 128), not timed on hardware (tools/benchmarks/tune_short_kernel.py times them)
_SHORT = {
    ('half', 32): dict(short_forward=_C(64, 64, 4, 1), short_backward=_C(32, 32, 4, 1)),
    ('half', 64): dict(short_forward=_C(64, 64, 4, 1), short_backward=_C(32, 32, 4, 1)),
    ('half', 128): dict(short_forward=_C(64, 64, 8, 1), short_backward=_C(32, 32, 8, 1)),
    ('fp32', 32): dict(short_forward=_C(32, 32, 4, 1), short_backward=_C(16, 16, 4, 1)),
    ('fp32', 64): dict(short_forward=_C(32, 32, 4, 1), short_backward=_C(16, 16, 4, 1)),
    ('fp32', 128): dict(short_forward=_C(16, 16, 4, 1), short_backward=_C(16, 16, 4, 1)),
}


def short_launch_configs(
    capability: tuple[int, int], dtype: torch.dtype, head_dim: int, seq: int
) -> dict[str, LaunchConfig]:
    """``{kernel: LaunchConfig}`` of the short-sequence kernels (:data:`SHORT_KERNELS`; the
    one-branch form takes the two-branch form's) for sequences packed ``seq`` rows apart (a
    tile has at least ``seq`` rows). One table for every GPU: a tile of at most 64 rows fits
    the smallest tier's shared memory."""
    launch_configs(capability, dtype, head_dim)  # the same checks
    kind = 'fp32' if dtype == torch.float32 else 'half'
    two = {
        name: cfg._replace(block_m=max(cfg.block_m, seq), block_n=max(cfg.block_n, seq))
        for name, cfg in _SHORT[kind, head_dim].items()
    }
    return two | dict(
        short_softmax_forward=two['short_forward'], short_softmax_backward=two['short_backward']
    )


def takes_short_kernels(m: int, n: int, has_bias: bool) -> bool:
    """Whether a call of ``m`` queries and ``n`` keys runs the packed short-sequence kernels."""
    return max(m, n) <= SHORT_TOKENS and not has_bias


@contextlib.contextmanager
def short_configs_as(
    dtype: torch.dtype, head_dim: int, forward: LaunchConfig, backward: LaunchConfig
) -> Iterator[None]:
    """Inside the block, the short-sequence kernels for ``dtype`` (fp16 / bf16 alike) and
    ``head_dim`` launch with ``forward`` / ``backward`` (``block_m``: a tile's rows, at least 16
    and a power of two) instead of the table's: what tuning them on a GPU compares
    (``tools/benchmarks/tune_short_kernel.py``)."""
    for cfg in (forward, backward):
        rows = cfg.block_m
        if rows < 16 or rows & (rows - 1):
            raise ValueError(f'short kernels: a tile of {rows} rows (a power of two, 16 or more)')
    key = ('fp32' if dtype == torch.float32 else 'half', head_dim)
    table = _SHORT[key]
    _SHORT[key] = dict(short_forward=forward, short_backward=backward)
    try:
        yield
    finally:
        _SHORT[key] = table
