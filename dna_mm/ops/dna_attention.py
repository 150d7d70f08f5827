"""``dna_attention``: the fused two-branch kernel behind one function (formula in
:mod:`.triton_dna`)."""

from __future__ import annotations

import os
from typing import Optional, Union

import torch
from torch import Tensor

BiasArg = Union[Tensor, tuple[Tensor, Tensor], None]
HEAD_DIMS = (16, 32, 64, 128)


def kernel_available(device: torch.device) -> bool:
    """Whether the Triton kernel can run on ``device``: CUDA, or any device under the
    interpreter (``TRITON_INTERPRET=1`` set when :mod:`.triton_dna` was first imported and
    still set: the interpreter reads it at launch too)."""
    try:
        from . import triton_dna
    except ImportError:  # no triton in this environment
        return False
    interpreting = triton_dna.INTERPRETED and os.environ.get('TRITON_INTERPRET') == '1'
    return interpreting or device.type == 'cuda'


def dna_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_neg: Tensor,
    v_neg: Tensor,
    alpha: Optional[Tensor] = None,
    bias: BiasArg = None,
    scale: Optional[float] = None,
) -> Tensor:
    """DnA attention on head-split tensors in one fused kernel:

        softmax(s Q+ K^T + b+) V+ + α softmin(s Q- K^T + b-) V-     → [B, H, M, d]

    Args:
        q, q_neg: ``Q+``, ``Q-`` ``[B, H, M, d]``.
        k, v, v_neg: ``K``, ``V+``, ``V-`` ``[B, H, N, d]``.
        alpha: ``α [H]`` (``None``: 1, the variants without α).
        bias: ``b`` for both branches, or ``(b_pos, b_neg)`` (the ``attn_bias`` rule of
            :mod:`dna_mm.models.attention.functional`), broadcastable to ``[B, H, M, N]``.
            An exclusion mask ``m`` (added after the softmin sign) is the pair
            ``(b_pos + m, b_neg - m)``.
        scale: ``s`` (default ``d ** -0.5``).

    Differentiable in every tensor argument (biases included). fp32 / fp16 / bf16 inputs,
    fp32 accumulation; head dims 16, 32, 64, 128.

    Raises:
        ValueError: shapes, dtypes or head dim do not fit; RuntimeError: no CUDA and no
            ``TRITON_INTERPRET=1``.
    """
    if q.dim() != 4 or q.shape != q_neg.shape:
        raise ValueError(
            f'dna_attention: q and q_neg must be [B, H, M, d] of one shape, got '
            f'{list(q.shape)} and {list(q_neg.shape)}'
        )
    bsz, h, _, d = q.shape
    for name, t in (('k', k), ('v', v), ('v_neg', v_neg)):
        if t.dim() != 4 or t.shape[:2] != (bsz, h) or t.shape[3] != d or t.shape[2] != k.shape[2]:
            raise ValueError(f'dna_attention: {name} must be [{bsz}, {h}, N, {d}], got {list(t.shape)}')
    if d not in HEAD_DIMS:
        raise ValueError(f'dna_attention: head dim {d} not supported (one of {HEAD_DIMS})')
    dtypes = {t.dtype for t in (q, k, v, q_neg, v_neg)}
    if len(dtypes) != 1 or q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(
            f'dna_attention: q, k, v, q_neg, v_neg must share one of fp32 / fp16 / '
            f'bf16, got {sorted(map(str, dtypes))}'
        )
    if not kernel_available(q.device):
        raise RuntimeError(
            'dna_attention: the Triton kernel needs CUDA tensors (or '
            'TRITON_INTERPRET=1 set before importing dna_mm.ops); use the '
            "attention modules' SDPA path on this device"
        )
    if alpha is None:
        alpha = torch.ones(h, device=q.device, dtype=torch.float32)
    if alpha.shape != (h,):
        raise ValueError(f'dna_attention: alpha must be [{h}], got {list(alpha.shape)}')
    if bias is None or isinstance(bias, Tensor):
        b_pos = b_neg = bias
    else:
        b_pos, b_neg = bias
    from .triton_dna import DnAAttentionFunction

    return DnAAttentionFunction.apply(
        q, k, v, q_neg, v_neg, alpha, b_pos, b_neg, d**-0.5 if scale is None else float(scale)
    )
