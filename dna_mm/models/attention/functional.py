"""Attention kernels shared by the attention family (pure functions, no parameters).

Shapes: queries ``q [B, H, M, d]``, keys ``k [B, H, N, d]``, values ``v [B, H, N, dv]``;
masks and biases broadcastable to ``[B, H, M, N]``.

Two kinds of additive term, kept apart (one rule for the whole project):

* ``attn_mask`` — an **exclusion mask**: ``bool`` (``True`` = attend) or float, **added
  unchanged to every branch's logits after the softmin sign**. ``-inf``, ``-1e4``,
  ``finfo.min`` or Swin's ``-100`` exclude a key from both branches; for the softmax branch a
  float mask keeps exactly the additive meaning mmcv / ``nn.MultiheadAttention`` give it.
* ``attn_bias`` — an **additive logit bias inside the formula** (relative positions): the
  branch's logits are ``s q k^T + b`` and softmin acts on the whole sum.

Softmin branch: ``softmin(z) = softmax(-z)``, so with logits ``z = s q k^T + b`` and mask ``m``

    softmax(-(s q k^T + b) + m) v == SDPA(-q, k, v, attn_mask=m - b),

i.e. the bias is negated and the mask is not. The sign goes on ``q``, not on SDPA's
``scale``: fused kernels may take the row maximum before scaling, which a negative scale
turns into the minimum (overflow).

The functions that branch on a mask or bias (``None``, ``bool`` or float) are ``torch.fx`` leaves
(:func:`torch.fx.wrap`): a symbolically traced model (timm's feature extraction, torchvision's
``create_feature_extractor``) keeps each as one call that decides on the real tensors, e.g. a
mask that is a traced input, ``None`` at run time.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.fx
import torch.nn.functional as F
from torch import Tensor

from ...family import BiasArg, split_bias  # noqa: F401  (part of this module's rule)


def additive_mask(mask: Optional[Tensor], dtype: torch.dtype) -> Optional[Tensor]:
    """An exclusion mask as an additive float term (``bool`` → ``0 / -inf``)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float('-inf'))


@torch.fx.wrap
def branch_mask(
    attn_mask: Optional[Tensor], bias: Optional[Tensor], negative: bool, dtype: torch.dtype
) -> Optional[Tensor]:
    """The ``attn_mask`` argument of one branch's SDPA call (queries of ``dtype``): ``m + b``
    (positive branch) or ``m - b`` (softmin branch, whose queries are negated). A lone ``bool``
    mask is passed unchanged (SDPA keeps its fused kernels), a lone float mask cast to ``dtype``."""
    if bias is None:
        return attn_mask if attn_mask is None or attn_mask.dtype == torch.bool else attn_mask.to(dtype)
    return add_mask((-bias if negative else bias).to(dtype), attn_mask)


@torch.fx.wrap
def add_mask(z: Tensor, attn_mask: Optional[Tensor]) -> Tensor:
    """Logits ``z`` plus an exclusion mask (``bool`` → ``0 / -inf``), ``z`` if there is none."""
    mask = additive_mask(attn_mask, z.dtype)
    return z if mask is None else z + mask.to(z.dtype)


def single_bias(bias: BiasArg, name: str) -> Optional[Tensor]:
    """A one-map attention's bias; a pair is refused (it has no negative branch to give it to)."""
    if bias is None or isinstance(bias, Tensor):
        return bias
    raise TypeError(
        f'{name}: attn_bias must be one tensor (a (b_pos, b_neg) pair is for '
        f'two-branch DnA), got {type(bias).__name__}'
    )


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Normalisation precision of the eager path: at least fp32, fp64 kept as fp64."""
    return torch.promote_types(dtype, torch.float32)


def causal_mask(m: int, n: int, device: torch.device) -> Tensor:
    """``bool [M, N]`` mask, query ``i`` sees keys ``j <= i + (N - M)``."""
    return torch.ones(m, n, dtype=torch.bool, device=device).tril_(n - m)


def sdpa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Optional[Tensor],
    scale: float,
    dropout_p: float = 0.0,
    bias: Optional[Tensor] = None,
    negative: bool = False,
) -> Tensor:
    """Fused ``softmax(s q k^T + b + m) v`` → ``[B, H, M, dv]``; ``negative=True``: the softmin
    branch ``softmax(-(s q k^T + b) + m) v``, run as ``SDPA(-q, k, v, m - b)`` (:func:`branch_mask`).
    Goes through :func:`torch.nn.functional.scaled_dot_product_attention`, so no ``M×N`` map
    is materialised beyond the mask / bias itself when a fused kernel applies.
    """
    mask = branch_mask(attn_mask, bias, negative, q.dtype)
    q = -q if negative else q
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)


def eager(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Optional[Tensor],
    scale: float,
    dropout: torch.nn.Module,
    negative: bool = False,
    bias: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """Explicit ``A = softmax(s q k^T + b + m)`` (``negative``: ``softmax(-(s q k^T + b) + m)``)
    and ``A v``; returns ``(A v, A)``, the map *before* dropout (for analysis), normalised in at
    least fp32 (fp64 stays fp64) and cast back."""
    logits = (q * scale) @ k.transpose(-2, -1)  # [B, H, M, N]
    z = logits.to(compute_dtype(logits.dtype))
    if bias is not None:
        z = z + bias.to(z.dtype)
    if negative:
        z = -z
    attn = add_mask(z, attn_mask).softmax(dim=-1).to(logits.dtype)
    return dropout(attn) @ v, attn
