"""Launch configurations of the packed short-sequence kernels, timed on the device: the work of
``tools/benchmarks/tune_short_kernel.py``.

At TimeSformer-B's temporal shape (``clips · 196`` sequences of 8 frames, 12 heads of 64, the
heads laid out as the attention modules lay them: views of one projection's output), one
forward + backward of

- DnA in the packed kernel (:func:`dna_mm.ops.dna_attention`) and softmax in its one-branch form
  (:func:`dna_mm.ops.short_softmax_attention`), for each candidate ``(forward rows, warps,
  backward rows, warps)`` (:func:`~dna_mm.ops.kernel_config.short_configs_as`);
- the references: softmax as one ``scaled_dot_product_attention`` call, DnA as two (the
  modules' default route),

in turns (:func:`~.timing.time_in_turns`), each a median, as ratios to softmax's SDPA call. Each
candidate's output and gradients are compared with the table's configuration's first (a launch
configuration changes the order of sums, not the result): a candidate that computes something
else is an error, not a row.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ..ops import dna_attention, short_softmax_attention
from ..ops.kernel_config import LaunchConfig, short_configs_as, short_launch_configs
from .timing import median_ms, time_in_turns

#: (forward rows, warps, backward rows, warps): the table's bf16 choice first, then around it
CANDIDATES = ((64, 4, 32, 4), (32, 4, 32, 4), (64, 8, 32, 8), (128, 8, 32, 4), (64, 4, 64, 8), (64, 4, 16, 4))
TOKENS, HEADS, HEAD_DIM, PATCHES = 8, 12, 64, 196
#: ``--tiny``: 2 heads of 32 over 8 tokens, 3 sequences a clip (checks the paths; no benchmark)
TINY_HEADS, TINY_HEAD_DIM, TINY_PATCHES = 2, 32, 3


def parse_candidate(text: str) -> tuple[int, int, int, int]:
    """``'64x4/32x4'`` → ``(64, 4, 32, 4)``: forward rows × warps / backward rows × warps."""
    try:
        fwd, bwd = text.split('/')
        (a, b), (c, d) = (map(int, part.split('x')) for part in (fwd, bwd))
    except ValueError:
        raise ValueError(
            f"a candidate is 'ROWSxWARPS/ROWSxWARPS' (forward / backward), got {text!r}"
        ) from None
    return a, b, c, d


def label(candidate: Sequence[int]) -> str:
    a, b, c, d = candidate
    return f'{a}x{b}/{c}x{d}'


def _heads(clips: int, dtype: torch.dtype, device: str, tiny: bool) -> tuple[list[Tensor], Tensor]:
    """``Q+, K, V+, Q-, V-`` ``[B, H, 8, d]`` as strided views of one ``[B, 8, 5, H, d]`` leaf
    tensor (what the modules pass), and ``α [H]``."""
    h, d, patches = (TINY_HEADS, TINY_HEAD_DIM, TINY_PATCHES) if tiny else (HEADS, HEAD_DIM, PATCHES)
    g = torch.Generator().manual_seed(0)
    leaf = torch.randn(clips * patches, TOKENS, 5, h, d, generator=g).to(device, dtype).requires_grad_()
    alpha = (torch.rand(h, generator=g) * 2 - 1).to(device).requires_grad_()
    return [leaf[:, :, i].transpose(1, 2) for i in range(5)], alpha


def tune(
    device: str = 'cuda',
    dtype: torch.dtype = torch.bfloat16,
    clips: int = 8,
    reps: int = 20,
    candidates: Sequence[Sequence[int]] = CANDIDATES,
    tiny: bool = False,
) -> list[dict]:
    """One row per step timed: ``{'step', 'config', 'ms', 'ratio'}`` (``ratio``: to softmax's SDPA
    call; ``config``: the candidate, ``''`` for the references), the table's configuration
    marked ``(table)``."""
    (q, k, v, q_neg, v_neg), alpha = _heads(clips, dtype, device, tiny)
    leaves = [q._base, alpha]
    d = q.shape[-1]
    table = short_launch_configs((8, 0), dtype, d, TOKENS)  # the capability does not choose them
    cuda = device == 'cuda'

    def step(fn: Callable[[], Tensor], candidate: Sequence[int] = ()) -> Callable[[], list[Tensor]]:
        """Forward + backward of ``fn`` (under ``candidate``'s launch configurations, both ways)."""

        def run() -> list[Tensor]:
            with contextlib.ExitStack() as stack:
                if candidate:
                    a, b, c, w = candidate
                    stack.enter_context(
                        short_configs_as(dtype, d, LaunchConfig(a, a, b, 1), LaunchConfig(c, c, w, 1))
                    )
                out = fn()
                grads = torch.autograd.grad(out.float().square().sum(), leaves, allow_unused=True)
            return [out.detach(), *(g for g in grads if g is not None)]

        return run

    calls = {
        ('softmax, one SDPA call', ''): step(lambda: F.scaled_dot_product_attention(q, k, v)),
        ('DnA, two SDPA calls', ''): step(
            lambda: (
                F.scaled_dot_product_attention(q, k, v)
                + alpha.to(dtype).view(1, -1, 1, 1) * F.scaled_dot_product_attention(-q_neg, k, v_neg)
            )
        ),
    }
    for candidate in candidates:
        name = label(candidate)
        calls['DnA, packed kernel', name] = step(
            lambda: dna_attention(q, k, v, q_neg, v_neg, alpha), candidate
        )
        calls['softmax, packed kernel', name] = step(lambda: short_softmax_attention(q, k, v), candidate)
    _check_candidates(calls, dtype)
    samples = time_in_turns(calls, rounds=reps, warmup=2, cuda=cuda)
    base = median_ms(samples['softmax, one SDPA call', ''])
    chosen = label(
        (table['short_forward'].block_m, table['short_forward'].num_warps)
        + (table['short_backward'].block_m, table['short_backward'].num_warps)
    )
    rows = []
    for (name, config), s in samples.items():
        ms = median_ms(s)
        rows.append(
            dict(step=name, config=config + (' (table)' if config == chosen else ''), ms=ms, ratio=ms / base)
        )
    return rows


def _check_candidates(calls: dict, dtype: torch.dtype) -> None:
    """Every candidate's output and gradients as the first candidate's, per form, within 8 units
    of the dtype's epsilon relative to the largest value: another tile changes only the order of
    a few short sums (measured in Triton's interpreter: at most 2.4 in fp32, 0 in fp16), while a
    candidate that computes something else (a lost α, a mask off) moves values by a fraction of
    their magnitude."""
    tol = 8 * torch.finfo(dtype).eps
    first: dict[str, list[Tensor]] = {}
    for (name, config), call in calls.items():
        if not config:
            continue
        got = call()
        if name not in first:
            first[name] = got
            continue
        for g, w in zip(got, first[name], strict=True):
            err = ((g.float() - w.float()).abs().max() / w.float().abs().max().clamp_min(1e-12)).item()
            if err > tol:
                raise RuntimeError(
                    f'{name} under {config}: {err:.2e} from the first candidate (limit {tol:.1e})'
                )


def markdown(rows: list[dict], device: str, dtype: str, clips: int, tiny: bool = False) -> str:
    h, d, patches = (TINY_HEADS, TINY_HEAD_DIM, TINY_PATCHES) if tiny else (HEADS, HEAD_DIM, PATCHES)
    head = [
        f'**{device}, {dtype}**: one forward + backward at the temporal shape '
        f'[{clips * patches}, {TOKENS}, {h * d}], {h} heads; ratios to softmax\'s SDPA call',
        '',
        '| step | config (fwd rows×warps / bwd rows×warps) | ms | ratio |',
        '|---|---|---|---|',
    ]
    return '\n'.join(
        head + [f"| {r['step']} | {r['config']} | {r['ms']:.3f} | {r['ratio']:.2f}× |" for r in rows]
    )
