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

A query row with no key to attend (every key excluded, or no keys at all: an empty context)
gets weights 0 and output 0 on every route: what SDPA gives (the fused route), and what the
eager route's :func:`softmax` gives without making a NaN (softmax over no key: ``0/0``).

The functions that branch on a mask or bias (``None``, ``bool`` or float) are ``torch.fx`` leaves
(:func:`torch.fx.wrap`): a symbolically traced model (timm's feature extraction, torchvision's
``create_feature_extractor``) keeps each as one call that decides on the real tensors, e.g. a
mask that is a traced input, ``None`` at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def keyless_rows(attn_mask: Tensor) -> Tensor:
    """The query rows an exclusion mask leaves no key: ``bool [..., M, 1]``, True where every key
    of the row is excluded (``False`` in a ``bool`` mask, ``-inf`` in a float one; a row of no
    keys at all, ``N = 0``, included). Computed on the mask, not on the logits."""
    if attn_mask.dtype == torch.bool:
        return ~attn_mask.any(dim=-1, keepdim=True)
    return torch.isneginf(attn_mask).all(dim=-1, keepdim=True)


@torch.fx.wrap
def softmax(z: Tensor, attn_mask: Optional[Tensor]) -> Tensor:
    """``softmax(z + m)`` over the keys (the last dim) → ``[B, H, M, N]``; a query row whose every
    key ``m`` excludes gets weights 0, as SDPA gives it (not ``0 / 0``)::

        W_i = 0                     if m_ij = -inf for every j   (:func:`keyless_rows`)
        W_i = softmax(z_i + m_i)    otherwise

    No NaN is made and then hidden (its gradient would stay NaN): such a row's mask is lifted
    (``m_i = 0``, a finite softmax) and its weights set to 0, so it passes no gradient. Without a
    mask, one ``softmax``. An FX leaf (it branches on the mask) named ``softmax``: a traced graph
    has a node ``softmax`` per branch (``softmax``, ``softmax_1``), which timm's
    ``AttentionExtract`` reads as the maps, the keyless rows' 0 included."""
    if attn_mask is None:
        return z.softmax(dim=-1)
    keyless = keyless_rows(attn_mask)  # [..., M, 1]
    lifted = attn_mask | keyless if attn_mask.dtype == torch.bool else attn_mask.masked_fill(keyless, 0.0)
    return add_mask(z, lifted).softmax(dim=-1).masked_fill(keyless, 0.0)


def single_bias(bias: BiasArg, name: str) -> Optional[Tensor]:
    """A one-map attention's bias; a pair is refused (it has no negative branch to give it to)."""
    if bias is None or isinstance(bias, Tensor):
        return bias
    raise TypeError(
        f'{name}: attn_bias must be one tensor (a (b_pos, b_neg) pair is for '
        f'two-branch DnA), got {type(bias).__name__}'
    )


def scores(heads: dict[str, Tensor], scale: float, bias: BiasArg, name: str) -> Tensor:
    """A one-map member's logits ``s Q Kᵀ + b`` ``[B, H, M, N]`` (``b``: :func:`single_bias`, in
    the logits' dtype), before the member's own normalisation (Cog's signed softmax, sigmoid)."""
    s = (heads['q'] * scale) @ heads['k'].transpose(-2, -1)  # [B, H, M, N]
    b = single_bias(bias, name)
    return s if b is None else s + b.to(s.dtype)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Normalisation precision of the eager path: at least fp32, fp64 kept as fp64."""
    return torch.promote_types(dtype, torch.float32)


def causal_mask(m: int, n: int, device: torch.device) -> Tensor:
    """``bool [M, N]`` mask, query ``i`` sees keys ``j <= i + (N - M)``."""
    return torch.ones(m, n, dtype=torch.bool, device=device).tril_(n - m)


def linear_heads(
    x: Tensor, weights: Sequence[Tensor], biases: Optional[Sequence[Tensor]], heads: int, head_dim: int
) -> tuple[Tensor, ...]:
    """Several projections of one input in **one** GEMM, split into heads: ``x [B, N, C_in]``,
    ``weights`` ``[R_i, C_in]`` and ``biases`` ``[R_i]`` (or ``None``), each ``R_i`` a multiple of
    ``heads · head_dim`` → ``Σ R_i / (heads · head_dim)`` tensors ``[B, H, N, d]``, in row order::

        [Y_1, …, Y_n] = x [W_1; …; W_n]ᵀ + [b_1; …; b_n]

    Row by row the same dot products as ``F.linear(x, W_i, b_i)`` for each ``i``, so exact; the
    cost is a copy of the weights (``O(R · C_in)``, against the ``O(B · N · R · C_in)`` of the
    GEMM). The heads are views of the one output (one reshape, one permute), as timm splits its
    ``qkv``: their gradients meet in one stacked tensor, not one per head."""
    w = weights[0] if len(weights) == 1 else torch.cat(list(weights))  # [R, C_in]
    b = None if biases is None else biases[0] if len(biases) == 1 else torch.cat(list(biases))
    y = F.linear(x, w, b)  # [B, N, R]
    bsz, n, rows = y.shape  # no -1 in the reshape: N = 0 (or B = 0) leaves it undetermined
    y = y.reshape(bsz, n, rows // (heads * head_dim), heads, head_dim)  # [B, N, k, H, d]
    return y.permute(2, 0, 3, 1, 4).unbind(0)  # k × [B, H, N, d]


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


@torch.fx.wrap
def joined_mask(
    attn_mask: Optional[Tensor],
    b_pos: Optional[Tensor],
    b_neg: Optional[Tensor],
    dim: int,
    size: int,
    dtype: torch.dtype,
) -> Optional[Tensor]:
    """The ``attn_mask`` of one SDPA call over both branches joined along ``dim`` (``-3``: the
    heads, :func:`sdpa_pair`; ``-2``: the queries, :func:`sdpa_stacked`), ``size`` long per
    branch: ``[m + b+, m - b-]`` along it (:func:`branch_mask` of each branch). Without a bias the
    mask is the same for both halves: kept as it is where it broadcasts along ``dim`` (a ``bool``
    one keeps SDPA's fused kernels), else repeated."""
    if b_pos is None and b_neg is None:
        mask = branch_mask(attn_mask, None, False, dtype)
        if mask is None or mask.dim() < -dim or mask.shape[dim] == 1:
            return mask
        return torch.cat([mask, mask], dim=dim)
    zero = (b_pos if b_pos is not None else b_neg).new_zeros((), dtype=dtype)  # a branch without a bias
    pos, neg = (
        zero if t is None else additive_mask(t, dtype).to(dtype)
        for t in (branch_mask(attn_mask, b_pos, False, dtype), branch_mask(attn_mask, b_neg, True, dtype))
    )
    shape = torch.broadcast_shapes(pos.shape, neg.shape, (size,) + (1,) * (-dim - 1))
    return torch.cat([pos.expand(shape), neg.expand(shape)], dim=dim)  # [B, 2H, M, N] or [B, H, 2M, N]


def sdpa_pair(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_neg: Tensor,
    v_neg: Tensor,
    alpha: Optional[Tensor],
    attn_mask: Optional[Tensor],
    scale: float,
    dropout_p: float = 0.0,
    b_pos: Optional[Tensor] = None,
    b_neg: Optional[Tensor] = None,
) -> Tensor:
    """Both DnA branches in **one** SDPA call over ``2H`` heads → ``[B, H, M, dv]``.

    ``softmin(z) = softmax(-z)``, so with the heads concatenated (``[B, 2H, ·, d]``)::

        Q = [Q+, -Q-],   K = [K, K],   V = [V+, α V-],   mask = [m + b+, m - b-]
        O = SDPA(Q, K, V, mask),   out = O[:, :H] + O[:, H:]

    which is ``softmax(s Q+ K^T + b+ + m) V+ + α softmin(s Q- K^T + b-) V-`` exactly: ``α`` is
    folded into ``V-`` (the product is linear), and SDPA's dropout acts on each head's map, so
    on each branch's map as in two calls. ``alpha [H]`` or ``None`` (``α = 1``)."""
    h = q.shape[1]
    if alpha is not None:
        v_neg = v_neg * alpha.to(v_neg.dtype).view(1, -1, 1, 1)
    mask = joined_mask(attn_mask, b_pos, b_neg, -3, h, q.dtype)
    o = F.scaled_dot_product_attention(
        torch.cat([q, -q_neg], dim=1),  # [B, 2H, M, d]
        torch.cat([k, k], dim=1),  # [B, 2H, N, d]
        torch.cat([v, v_neg], dim=1),  # [B, 2H, N, dv]
        attn_mask=mask,
        dropout_p=dropout_p,
        scale=scale,
    )
    return o[:, :h] + o[:, h:]  # [B, H, M, dv]


def sdpa_stacked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_neg: Tensor,
    v_neg: Tensor,
    alpha: Optional[Tensor],
    attn_mask: Optional[Tensor],
    scale: float,
    dropout_p: float = 0.0,
    b_pos: Optional[Tensor] = None,
    b_neg: Optional[Tensor] = None,
) -> Tensor:
    """Both DnA branches in **one** SDPA call over ``2M`` queries → ``[B, H, M, dv]``.

    ``softmin(z) = softmax(-z)``, so with the queries stacked and the values side by side::

        Q = [Q+; -Q-],   V = [V+, V-],   mask = [m + b+; m - b-]
        O = SDPA(Q, K, V, mask) = [[A+ V+, A+ V-], [A- V+, A- V-]]
        out = O[:M, :dv] + α O[M:, dv:]

    which is ``softmax(s Q+ K^T + b+ + m) V+ + α softmin(s Q- K^T + b-) V-`` exactly: each row of
    ``O`` is one branch's map times both values, and its own block is kept. Twice the value work
    of two calls (the other two blocks are not used) for one pass over the keys, in one kernel
    launch whose tiles hold both branches' queries: what a short sequence, whose SDPA kernels run
    one mostly empty tile per sequence and head, may gain. The values are twice the queries' width,
    so SDPA takes its memory-efficient kernel on a GPU and its math kernel on the CPU (flash
    attention needs one width): a GPU route. SDPA's dropout acts on each row of the map, so on
    each branch's map as in two calls. ``alpha [H]`` or ``None`` (``α = 1``)."""
    m, dv = q.shape[-2], v.shape[-1]
    o = F.scaled_dot_product_attention(
        torch.cat([q, -q_neg], dim=-2),  # [B, H, 2M, d]
        k,
        torch.cat([v, v_neg], dim=-1),  # [B, H, N, 2dv]
        attn_mask=joined_mask(attn_mask, b_pos, b_neg, -2, m, q.dtype),
        dropout_p=dropout_p,
        scale=scale,
    )  # [B, H, 2M, 2dv]
    neg = o[..., m:, dv:]
    if alpha is not None:
        neg = neg * alpha.to(neg.dtype).view(1, -1, 1, 1)
    return o[..., :m, :dv] + neg  # [B, H, M, dv]


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
    least fp32 (fp64 stays fp64) and cast back. A query row with no key (every key excluded by
    ``m``, or ``N = 0``) gets weights 0 and output 0, as :func:`sdpa` (:func:`softmax`)."""
    logits = (q * scale) @ k.transpose(-2, -1)  # [B, H, M, N]
    z = logits.to(compute_dtype(logits.dtype))
    if bias is not None:
        z = z + bias.to(z.dtype)
    if negative:
        z = -z
    attn = softmax(z, attn_mask).to(logits.dtype)
    return dropout(attn) @ v, attn
