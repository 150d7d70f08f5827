"""``short_softmax_attention``: softmax attention over short sequences in the packed kernel of
:mod:`.triton_short` (its one-branch form), the baseline that DnA's packed kernel is measured
against:

    O = softmax(s Q K^T) V      per (sequence, head), ``max(M, N) <= SHORT_TOKENS``, no bias or mask

Registered as ``torch.ops.dna_mm.short_softmax_fwd`` / ``short_softmax_bwd`` with fake
implementations and an autograd formula (one graph node under ``torch.compile``,
``torch.export`` and on ``meta``), as :mod:`.dna_attention` is. The backward recomputes the map
from the inputs (nothing else is kept).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .dna_attention import kernel_available
from .kernel_config import HEAD_DIMS, SHORT_TOKENS

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@torch.library.custom_op('dna_mm::short_softmax_fwd', mutates_args=())
def _fwd_op(q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
    """``O`` as ``[B, M, H, d]`` (the inputs' dtype)."""
    if not kernel_available(q.device):
        raise RuntimeError(
            f'short_softmax_attention: the Triton kernel cannot run on {q.device} tensors (it needs '
            'CUDA of compute capability 8.0+, or TRITON_INTERPRET=1 set before importing dna_mm.ops)'
        )
    from .triton_short import forward

    return forward(q, k, v, None, None, None, scale)


@_fwd_op.register_fake
def _fwd_fake(q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
    b, h, m, d = q.shape
    return q.new_empty(b, m, h, d)


@torch.library.custom_op('dna_mm::short_softmax_bwd', mutates_args=())
def _bwd_op(grad_out: Tensor, q: Tensor, k: Tensor, v: Tensor, scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """``dQ [B, M, H, d]``, ``dK, dV [B, N, H, d]``; ``grad_out`` is ``[B, M, H, d]``."""
    from .triton_short import backward

    return backward(grad_out.transpose(1, 2), q, k, v, None, None, None, scale)


@_bwd_op.register_fake
def _bwd_fake(
    grad_out: Tensor, q: Tensor, k: Tensor, v: Tensor, scale: float
) -> tuple[Tensor, Tensor, Tensor]:
    def bl(t: Tensor) -> Tensor:  # [B, H, L, d] → an empty [B, L, H, d]
        return t.new_empty(t.shape[0], t.shape[2], t.shape[1], t.shape[3])

    return bl(q), bl(k), bl(v)


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, scale = inputs
    ctx.save_for_backward(q, k, v)
    ctx.scale = scale


def _backward(ctx, grad_out: Tensor):
    q, k, v = ctx.saved_tensors
    dq, dk, dv = _bwd_op(grad_out, q, k, v, ctx.scale)
    return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2), None


_fwd_op.register_autograd(_backward, setup_context=_setup_context)


def short_softmax_attention(q: Tensor, k: Tensor, v: Tensor, scale: Optional[float] = None) -> Tensor:
    """Softmax attention on head-split tensors of short sequences, many sequences a tile:

        softmax(s Q K^T) V      → [B, H, M, d]

    Args:
        q: ``[B, H, M, d]``; k, v: ``[B, H, N, d]``, with ``M, N <= SHORT_TOKENS`` (32).
        scale: ``s`` (default ``d ** -0.5``).

    Differentiable in ``q``, ``k``, ``v``; fp32 / fp16 / bf16 read through their strides (unit
    last stride), head dims 32 / 64 / 128. The result is a ``[B, H, M, d]`` view of
    ``[B, M, H, d]`` storage.

    Raises:
        ValueError: shapes, lengths, dtypes or head dim do not fit; RuntimeError (when run): a
            device the kernel cannot run on.
    """
    if q.dim() != 4:
        raise ValueError(f'short_softmax_attention: q must be [B, H, M, d], got {list(q.shape)}')
    bsz, h, m, d = q.shape
    for name, t in (('k', k), ('v', v)):
        if t.dim() != 4 or t.shape[:2] != (bsz, h) or t.shape[3] != d or t.shape[2] != k.shape[2]:
            raise ValueError(
                f'short_softmax_attention: {name} must be [{bsz}, {h}, N, {d}], got {list(t.shape)}'
            )
    if max(m, k.shape[2]) > SHORT_TOKENS:
        raise ValueError(
            f'short_softmax_attention: sequences of at most {SHORT_TOKENS} tokens, got {m} queries and '
            f'{k.shape[2]} keys'
        )
    if d not in HEAD_DIMS:
        raise ValueError(f'short_softmax_attention: head dim {d} not supported (one of {HEAD_DIMS})')
    if len({q.dtype, k.dtype, v.dtype}) != 1 or q.dtype not in _DTYPES:
        raise ValueError(
            f'short_softmax_attention: q, k, v must share one of fp32 / fp16 / bf16, got '
            f'{sorted({str(q.dtype), str(k.dtype), str(v.dtype)})}'
        )
    scale = d**-0.5 if scale is None else float(scale)
    return torch.ops.dna_mm.short_softmax_fwd(q, k, v, scale).transpose(1, 2)
