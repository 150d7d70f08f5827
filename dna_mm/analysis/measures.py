"""The paper's attention analyses as pure functions on tensors (Sec. 4.4 and Appendix C).

Shapes: attention maps ``attn [B, H, M, N]`` (rows = queries, each row a distribution over
the ``N`` keys), head-split values / branch outputs ``[B, H, N, d]``, layer tokens
``[B, N, C]``. Every function returns a tensor (``float(...)`` for a plain number) and keeps
no state; :class:`~dna_mm.analysis.collector.AttentionCollector` feeds them the maps of a
real forward pass and averages over a dataset.

=====================  ===========================================================  ==========
function               formula (per sample ``b``, head ``h``)                       returns
=====================  ===========================================================  ==========
attention_entropy      ``H(a_i) = -Σ_j a_ij log a_ij`` per row, mean over rows      ``[H]``
head_redundancy        ``Δ_ij = 1 - cos(vec A_i, vec A_j)``, mean over ``i < j``   0-dim
frobenius_cosine       ``<X, Y>_F / (‖X‖_F ‖Y‖_F) = tr(Xᵀ Y) / (‖X‖_F ‖Y‖_F)``    ``[B, H]``
value_alignment        ``C(V+, V-)`` = frobenius_cosine of the value matrices       ``[B, H]``
branch_cosine          frobenius_cosine of the two branches' outputs                ``[B, H]``
intruder_dimensions    ``#{i ≤ k : max_j |u_i^a · u_j^b| < ε}`` (top-k left SVs)   ``[B, H]``
token_distance         mean over ``i ≠ j`` of ``1 - cos(p_i, p_j)``, centred tokens ``[B]``
alpha_stats            mean / max / min / std of ``α`` over heads                   dict
=====================  ===========================================================  ==========
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from ..models.sites import alpha_stats  # noqa: F401  (one of the measures, kept where the α lives)

_EPS = 1e-12


def _check(t: Tensor, dims: int, name: str, shape: str, like: Optional[Tensor] = None) -> None:
    """``t`` has ``dims`` dimensions (and the shape of ``like``, if given)."""
    if t.dim() != dims:
        raise ValueError(f'{name}: expected a {dims}-d tensor {shape}, got shape {list(t.shape)}')
    if like is not None and like.shape != t.shape:
        raise ValueError(f'{name}: shapes differ, {list(t.shape)} vs {list(like.shape)}')


def row_entropy(attn: Tensor) -> Tensor:
    """Shannon entropy (nats) of every row: ``-Σ_j a_ij log a_ij`` with ``0 log 0 = 0``.

    ``attn [..., M, N]`` → ``[..., M]`` (computed in float32 or wider).
    """
    a = attn.float() if attn.dtype not in (torch.float32, torch.float64) else attn
    return -torch.special.xlogy(a, a).sum(dim=-1)


def attention_entropy(attn: Tensor, top_k_percent: Optional[float] = None) -> Tensor:
    """Mean row entropy per head, in nats.

    ``E_h = mean_{b, i} H(A[b, h, i, :])``, ``H(p) = -Σ_j p_j log p_j`` (uniform rows give
    ``log N``, one-hot rows 0). With ``top_k_percent = k`` it is instead, per map ``(b, h)``,
    the mean of its ``max(1, ceil(k/100 · M))`` highest-entropy rows, then the mean over ``b``
    (the paper's "top-k % entropy"; the paper gives no k, 10 is this project's default).

    Args:
        attn: ``[B, H, M, N]`` attention maps, rows summing to 1 (for signed maps such as Cog's
            pass ``attn.abs()``).
        top_k_percent: ``None`` (all rows) or a percentage in ``(0, 100]``.

    Returns:
        ``[H]`` float tensor.
    """
    _check(attn, 4, 'attention_entropy', '[B, H, M, N]')
    ent = row_entropy(attn)  # [B, H, M]
    if top_k_percent is None:
        return ent.mean(dim=(0, 2))
    if not 0 < top_k_percent <= 100:
        raise ValueError(f'attention_entropy: top_k_percent must be in (0, 100], got {top_k_percent}')
    n_top = max(1, math.ceil(top_k_percent / 100 * ent.shape[-1]))
    return ent.topk(n_top, dim=-1).values.mean(dim=(0, 2))  # [H]


def head_redundancy(attn: Tensor) -> Tensor:
    """Mean pairwise cosine distance between the heads' flattened maps.

    Per sample ``b``: ``mean_{i<j} (1 - cos(vec A[b, i], vec A[b, j]))``, then the mean over
    ``b``. 0 when all heads attend alike; higher = less redundant (more diverse) heads.
    ``attn [B, H, M, N]`` (``H ≥ 2``) → 0-dim float tensor.
    """
    _check(attn, 4, 'head_redundancy', '[B, H, M, N]')
    b, h = attn.shape[:2]
    if h < 2:
        raise ValueError(f'head_redundancy: needs at least 2 heads, got {h}')
    flat = torch.nn.functional.normalize(attn.reshape(b, h, -1).float(), dim=-1, eps=_EPS)
    cos = flat @ flat.transpose(1, 2)  # [B, H, H]
    i, j = torch.triu_indices(h, h, offset=1)
    return (1 - cos[:, i, j]).mean()


def frobenius_cosine(x: Tensor, y: Tensor) -> Tensor:
    """Normalised Frobenius inner product of two matrices per ``(b, h)``.

    ``tr(Xᵀ Y) / (‖X‖_F ‖Y‖_F) = <vec X, vec Y> / (‖vec X‖ ‖vec Y‖)``, in ``[-1, 1]`` (1 =
    aligned, 0 = orthogonal). A zero matrix gives 0. ``x, y [B, H, N, d]`` → ``[B, H]`` float.
    """
    _check(x, 4, 'frobenius_cosine', '[B, H, N, d]', y)
    xf, yf = x.flatten(2).float(), y.flatten(2).float()  # [B, H, N·d]
    return (xf * yf).sum(-1) / (xf.norm(dim=-1) * yf.norm(dim=-1)).clamp_min(_EPS)


def value_alignment(v_pos: Tensor, v_neg: Tensor) -> Tensor:
    """``C(V+, V-) = tr(V+ᵀ V-) / (‖V+‖_F ‖V-‖_F)`` per sample and head (paper, ImageNet val:
    mean 0.22, median 0.18 for ViT-B DnA): the two branches' head-split values
    ``[B, H, N, d]`` → ``[B, H]``."""
    return frobenius_cosine(v_pos, v_neg)


def branch_cosine(out_pos: Tensor, out_neg: Tensor) -> Tensor:
    """Cosine similarity of the two branches' outputs per sample and head, as
    :func:`frobenius_cosine` of the ``[N, d]`` outputs (DnA: ``softmax(sQ+Kᵀ)V+`` and
    ``softmin(sQ-Kᵀ)V-``; Diff: ``A1 V`` and ``A2 V``; paper: DnA 0.32, Diff 0.96). The mixing
    coefficient (``α``, ``-λ``) is the caller's choice: a positive scale leaves it unchanged,
    a negative one flips its sign. ``out_pos, out_neg [B, H, N, d]`` → ``[B, H]``.
    """
    return frobenius_cosine(out_pos, out_neg)


def intruder_dimensions(out_a: Tensor, out_b: Tensor, k: int = 10, eps: float = 0.5) -> Tensor:
    """Number of intruder dimensions of branch ``a`` with respect to branch ``b``.

    Per ``(b, h)``: ``U^a, U^b`` = the top-``k`` left singular vectors of the ``[N, d]``
    outputs (``X = U S Vᵀ``, columns ordered by singular value); a vector ``u_i^a`` is an
    intruder when ``|u_i^a · u_j^b| < ε`` for every ``j`` (its largest absolute cosine with the
    other branch's top-``k`` is below ε; paper: ``ε = cos(π/3) = 0.5``, ``k = 10``). ``k`` is
    clipped to ``min(N, d)``, the number of singular vectors there are. Branch outputs
    ``out_a, out_b [B, H, N, d]`` → ``[B, H]`` int64 counts in ``[0, min(k, N, d)]``.
    """
    _check(out_a, 4, 'intruder_dimensions', '[B, H, N, d]', out_b)
    if k < 1 or not 0 < eps <= 1:
        raise ValueError(f'intruder_dimensions: need k >= 1 and 0 < eps <= 1, got k={k}, eps={eps}')
    kk = min(k, *out_a.shape[-2:])
    u_a = torch.linalg.svd(out_a.double(), full_matrices=False).U[..., :kk]  # [B, H, N, k]
    u_b = torch.linalg.svd(out_b.double(), full_matrices=False).U[..., :kk]
    cos = (u_a.transpose(-2, -1) @ u_b).abs()  # [B, H, k (a), k (b)]
    return (cos.amax(dim=-1) < eps).sum(dim=-1)


def token_distance(tokens: Tensor, center: Optional[str] = 'feature') -> Tensor:
    """Mean pairwise cosine distance between tokens (representational robustness).

    ``D = mean_{i ≠ j} (1 - cos(p_i, p_j))`` over the ``N`` tokens of each sample, after
    centring: ``'feature'`` (default; the paper's "mean-centred across feature space") subtracts
    each token's mean over its ``C`` channels; ``'token'`` subtracts the mean token of the sample
    (then ``D`` stays near ``1 + 1/(N-1)`` whenever the token norms are alike, which is why it is
    not the default); ``None`` none. Pass patch tokens only (no CLS): ``tokens [B, N, C]``
    (``N ≥ 2``) → ``[B]``.
    """
    _check(tokens, 3, 'token_distance', '[B, N, C]')
    n = tokens.shape[1]
    if n < 2:
        raise ValueError(f'token_distance: needs at least 2 tokens, got {n}')
    x = tokens.float()
    if center == 'feature':
        x = x - x.mean(dim=-1, keepdim=True)
    elif center == 'token':
        x = x - x.mean(dim=1, keepdim=True)
    elif center is not None:
        raise ValueError(f"token_distance: center must be 'feature', 'token' or None, got {center!r}")
    x = torch.nn.functional.normalize(x, dim=-1, eps=_EPS)
    # Σ_{i≠j} cos(p_i, p_j) = ‖Σ_i x_i‖² - Σ_i ‖x_i‖²  (unit x_i; O(N·C), no N×N matrix)
    cos_sum = x.sum(dim=1).pow(2).sum(dim=-1) - x.pow(2).sum(dim=(1, 2))
    return 1 - cos_sum / (n * (n - 1))
