"""The packed short-sequence kernel of :mod:`.triton_short` as PyTorch operators, in its two
forms: DnA (what :func:`~.dna_attention.dna_attention` runs for sequences of at most
``SHORT_TOKENS`` tokens without a bias) and softmax alone, the baseline DnA's is measured
against (:func:`short_softmax_attention`):

    O = softmax(s Q+ K^T) V+ + α softmin(s Q- K^T) V-     dna_mm::short_dna_fwd / _bwd
    O = softmax(s Q K^T) V                                dna_mm::short_softmax_fwd / _bwd

per (sequence, head), ``max(M, N) <= SHORT_TOKENS``, no bias or mask. Each pair has fake
implementations and an autograd formula (one graph node under ``torch.compile``,
``torch.export`` and on ``meta``), as :mod:`.dna_attention`'s tiled operators have; the backward
recomputes the maps from the inputs, so nothing else is kept. Operators of their own, not a
switch inside the tiled ones: what a call returns and keeps is then fixed by its name.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .dna_attention import kernel_available
from .kernel_config import HEAD_DIMS, SHORT_TOKENS

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check_device(t: Tensor, what: str) -> None:
    if not kernel_available(t.device):
        raise RuntimeError(
            f'{what}: the Triton kernel cannot run on {t.device} tensors (it needs CUDA of compute '
            'capability 8.0+, or TRITON_INTERPRET=1 set before importing dna_mm.ops)'
        )


def _heads_last(t: Tensor) -> Tensor:
    """An empty ``[B, L, H, d]`` for a ``[B, H, L, d]`` tensor (fake results)."""
    return t.new_empty(t.shape[0], t.shape[2], t.shape[1], t.shape[3])


# -- DnA ---------------------------------------------------------------------------------------
@torch.library.custom_op('dna_mm::short_dna_fwd', mutates_args=())
def _dna_fwd(
    q: Tensor, k: Tensor, v: Tensor, q_neg: Tensor, v_neg: Tensor, alpha: Tensor, scale: float
) -> Tensor:
    """``O`` as ``[B, M, H, d]`` (the inputs' dtype)."""
    _check_device(q, 'dna_attention')
    from .triton_short import forward

    return forward(q, k, v, q_neg, v_neg, alpha, scale)


@_dna_fwd.register_fake
def _dna_fwd_fake(q, k, v, q_neg, v_neg, alpha, scale):
    return _heads_last(q)


@torch.library.custom_op('dna_mm::short_dna_bwd', mutates_args=())
def _dna_bwd(
    grad_out: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_neg: Tensor,
    v_neg: Tensor,
    alpha: Tensor,
    scale: float,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``dQ+, dK, dV+, dQ-, dV-`` (``[B, L, H, d]``) and ``dα``; ``grad_out`` is ``[B, M, H, d]``."""
    from .triton_short import backward

    return backward(grad_out.transpose(1, 2), q, k, v, q_neg, v_neg, alpha, scale)


@_dna_bwd.register_fake
def _dna_bwd_fake(grad_out, q, k, v, q_neg, v_neg, alpha, scale):
    return (*(_heads_last(t) for t in (q, k, v, q_neg, v_neg)), alpha.new_empty(alpha.shape))


def _dna_setup_context(ctx, inputs, output) -> None:
    *tensors, scale = inputs
    ctx.save_for_backward(*tensors)
    ctx.scale = scale


def _dna_backward(ctx, grad_out: Tensor):
    dq, dk, dv, dq_neg, dv_neg, d_alpha = _dna_bwd(grad_out, *ctx.saved_tensors, ctx.scale)
    return (*(g.transpose(1, 2) for g in (dq, dk, dv, dq_neg, dv_neg)), d_alpha, None)


_dna_fwd.register_autograd(_dna_backward, setup_context=_dna_setup_context)


# -- softmax -----------------------------------------------------------------------------------
@torch.library.custom_op('dna_mm::short_softmax_fwd', mutates_args=())
def _softmax_fwd(q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
    """``O`` as ``[B, M, H, d]`` (the inputs' dtype)."""
    _check_device(q, 'short_softmax_attention')
    from .triton_short import forward

    return forward(q, k, v, None, None, None, scale)


@_softmax_fwd.register_fake
def _softmax_fwd_fake(q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
    return _heads_last(q)


@torch.library.custom_op('dna_mm::short_softmax_bwd', mutates_args=())
def _softmax_bwd(
    grad_out: Tensor, q: Tensor, k: Tensor, v: Tensor, scale: float
) -> tuple[Tensor, Tensor, Tensor]:
    """``dQ [B, M, H, d]``, ``dK, dV [B, N, H, d]``; ``grad_out`` is ``[B, M, H, d]``."""
    from .triton_short import backward

    return backward(grad_out.transpose(1, 2), q, k, v, None, None, None, scale)


@_softmax_bwd.register_fake
def _softmax_bwd_fake(
    grad_out: Tensor, q: Tensor, k: Tensor, v: Tensor, scale: float
) -> tuple[Tensor, Tensor, Tensor]:
    return _heads_last(q), _heads_last(k), _heads_last(v)


def _softmax_setup_context(ctx, inputs, output) -> None:
    q, k, v, scale = inputs
    ctx.save_for_backward(q, k, v)
    ctx.scale = scale


def _softmax_backward(ctx, grad_out: Tensor):
    q, k, v = ctx.saved_tensors
    dq, dk, dv = _softmax_bwd(grad_out, q, k, v, ctx.scale)
    return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2), None


_softmax_fwd.register_autograd(_softmax_backward, setup_context=_softmax_setup_context)


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
