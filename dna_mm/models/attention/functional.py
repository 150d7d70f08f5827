"""Attention kernels shared by the attention family (pure functions, no parameters).

Shapes: queries ``q [B, H, M, d]``, keys ``k [B, H, N, d]``, values ``v [B, H, N, dv]``;
``bias`` broadcastable to ``[B, H, M, N]``.

Mask convention (PyTorch SDPA): a ``bool`` mask is ``True`` where a query may attend; a
floating mask is an additive logit bias, ``-inf`` excluding a key.

Softmin branch: ``softmin(z) = softmax(-z)``, so with logits ``z = s q k^T + b``

    softmin(s q k^T + b) v == softmax(s (-q) k^T + (-b)) v == SDPA(-q, k, v, attn_mask=-b),

where a ``-inf`` entry of ``b`` (an excluded key) stays ``-inf``: a masked key is excluded
from both branches, and every finite bias (relative position, ...) is negated. The sign goes
on ``q``, not on SDPA's ``scale``: fused kernels may take the row maximum before scaling,
which a negative scale turns into the minimum (overflow).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor


def additive_bias(mask: Optional[Tensor], dtype: torch.dtype) -> Optional[Tensor]:
    """Turn an SDPA-style mask into an additive bias (``bool`` → ``0 / -inf``)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float('-inf'))


def negate_bias(mask: Optional[Tensor]) -> Optional[Tensor]:
    """The mask of the softmin branch: ``bool`` masks unchanged, finite biases negated,
    ``-inf`` (excluded keys) kept."""
    if mask is None or mask.dtype == torch.bool:
        return mask
    return torch.where(torch.isneginf(mask), mask, -mask)


def causal_mask(m: int, n: int, device: torch.device) -> Tensor:
    """``bool [M, N]`` mask, query ``i`` sees keys ``j <= i + (N - M)``."""
    return torch.ones(m, n, dtype=torch.bool, device=device).tril_(n - m)


def attention_probs(logits: Tensor, bias: Optional[Tensor], negative: bool = False) -> Tensor:
    """Row-normalised attention map from raw logits ``s q k^T [B, H, M, N]``.

    ``negative=False``: ``softmax(logits + bias)``; ``negative=True``: ``softmin(logits + bias)``
    with the bias convention of :func:`negate_bias`. Computed in fp32 and cast back.
    """
    z = -logits if negative else logits
    bias = negate_bias(bias) if negative else bias
    if bias is not None:
        z = z + additive_bias(bias, z.dtype)
    return z.float().softmax(dim=-1).to(logits.dtype)


def sdpa(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor], scale: float,
         dropout_p: float = 0.0) -> Tensor:
    """Fused ``softmax(s q k^T + b) v`` → ``[B, H, M, dv]`` (softmin: pass ``-q`` and
    :func:`negate_bias` of ``b``, as :func:`two_branch_sdpa` does).

    Goes through :func:`torch.nn.functional.scaled_dot_product_attention`, so no ``M×N``
    map is materialised when a flash / memory-efficient / fused CPU kernel applies.
    """
    if bias is not None and bias.dtype != torch.bool:
        bias = bias.to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p, scale=scale)


def two_branch_sdpa(q: Tensor, k: Tensor, v: Tensor, q_min: Tensor, v_min: Tensor,
                    bias: Optional[Tensor], scale: float, dropout_p: float = 0.0) -> Tensor:
    """DnA's fused core on SDPA-ready heads (the softmin sign and α already applied):

        SDPA(q, k, v, b) + SDPA(q_min, k, v_min, -b)
          = softmax(s Q+ K^T + b) V+ + α softmin(s Q- K^T + b) V-

    with ``q_min = -Q-``, ``v_min = α V-`` and ``-b`` as in :func:`negate_bias` → ``[B, H, M, dv]``.
    """
    pos = sdpa(q, k, v, bias, scale, dropout_p)
    return pos + sdpa(q_min, k, v_min, negate_bias(bias), scale, dropout_p)


def eager(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor], scale: float,
          dropout: torch.nn.Module, negative: bool = False) -> tuple[Tensor, Tensor]:
    """Explicit ``A = softmax(s q k^T + b)`` (or softmin) and ``A v``; returns ``(A v, A)``.

    The returned map is the one *before* dropout (for analysis).
    """
    attn = attention_probs((q * scale) @ k.transpose(-2, -1), bias, negative)  # [B, H, M, N]
    return dropout(attn) @ v, attn
