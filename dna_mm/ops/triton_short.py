"""DnA over short sequences in Triton: many sequences a program, the whole sequence in one tile.

The tiled kernels of :mod:`.triton_dna` give each ``(batch, head)`` its own programs and each
program a query tile of 64–128 rows. TimeSformer's temporal attention has ``B = clips ·
patches`` sequences of ``T = 8`` frames: every tile is 8 rows of data in 64–128, and one
``(sequence, head)`` pair a program means ``B · H`` (18 816 for 8 clips of ViT-B) tiny
programs, each paying a program's fixed cost, for each of the two SDPA calls and their
backward. Here one program packs ``G = ROWS / S`` pairs (``S``: ``max(M, N)`` to a power of
two) into one ``[ROWS, d]`` tile, row ``r`` holding token ``r mod S`` of pair ``r div S``,
and attends within each pair through a block-diagonal mask:

    Z± = ±s Q± K^T  (−inf where the row's and the column's pairs differ, or the key is padding)
    P± = softmax(Z±),  O = P+ V+ + α_h P- V-                      (every row's own α_h)

The backward is one kernel too (a program holds whole sequences, so ``dK`` needs no second
pass over queries): it recomputes ``P±`` and ``O±`` from the inputs (nothing but the inputs is
kept for it), then, with ``Δ+ = rowsum(dO ⊙ O+)``, ``Δ- = α rowsum(dO ⊙ O-)``:

    dV+ = P+^T dO,   dV- = α P-^T dO,   dS± = P± ⊙ (dO± V±^T − Δ±)   (dO+ = dO, dO- = α dO)
    dQ+ = s dS+ K,   dQ- = −s dS- K,    dK = s (dS+^T Q+ − dS-^T Q-)
    dα_h = Σ dO ⊙ O-   (each row's sum stored; the heads' sums taken by the caller)

The zero blocks cost FLOPs (``ROWS / S`` times the pairs' own), which a tile of tensor-core
products absorbs at these lengths; the bytes read and written are the inputs' and outputs'
only. No biases and no masks (a biased or masked call takes :mod:`.triton_dna`'s kernels);
precision and the ``[B, L, H, d]`` storage of every result as there. With ``NEG`` off the
negative branch is compiled out: softmax attention alone, in the same tiles (the baseline of
the two-branch form; :mod:`.short_attention` has the operators of both).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

from .kernel_config import short_launch_configs
from .triton_dna import Launch, capability_of, device_guard, dot_precision, heads_last, run, unit_last_stride


def sequence_tile(m: int, n: int) -> int:
    """``S``: the rows one sequence takes in a packed tile (``max(M, N)`` to a power of two; 1
    for a call with neither queries nor keys, whose launch then writes nothing)."""
    return triton.next_power_of_2(max(m, n, 1))


@triton.jit
def _rows(ROWS: tl.constexpr, SEQ: tl.constexpr, H, BH):
    """Per row of a program's tile: its pair (index in the tile), token, batch, head, and
    whether its pair exists."""
    r = tl.arange(0, ROWS)
    pair, t = r // SEQ, r % SEQ
    bh = tl.program_id(0).to(tl.int64) * (ROWS // SEQ) + pair
    return pair, t, bh // H, bh % H, bh < BH


@triton.jit
def _gather(P, b, h, t, s_b, s_h, s_l, rd, ok):
    """``P[b_r, h_r, t_r, :D]`` for every row ``r``, zeros outside ``ok``: ``[ROWS, D]``."""
    rows = b * s_b + h * s_h + t * s_l
    return tl.load(P + rows[:, None] + rd[None, :], mask=ok[:, None], other=0.0)


@triton.jit
def _probabilities(a, k, scale, same, PRECISION: tl.constexpr):
    """``softmax(scale · a k^T)`` over the keys of each row's own pair (``same``), fp32; a row
    without keys (padding) is all zeros."""
    z = tl.where(same, tl.dot(a, tl.trans(k), input_precision=PRECISION) * scale, float('-inf'))
    top = tl.max(z, 1)
    p = tl.exp(z - tl.where(top == float('-inf'), 0.0, top)[:, None])
    total = tl.sum(p, 1)
    return p / tl.where(total == 0.0, 1.0, total)[:, None]


@triton.jit
def _short_fwd_kernel(
    Q, QN, K, V, VN, ALPHA, OUT,
    s_qb, s_qh, s_qm,  # Q+
    s_xb, s_xh, s_xm,  # Q-
    s_kb, s_kh, s_kn,  # K
    s_vb, s_vh, s_vn,  # V+
    s_wb, s_wh, s_wn,  # V-
    s_ob, s_oh, s_om,  # O
    BH, H, M, N, scale,
    NEG: tl.constexpr, PRECISION: tl.constexpr, ROWS: tl.constexpr, SEQ: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    pair, t, b, h, real = _rows(ROWS, SEQ, H, BH)
    rd = tl.arange(0, D)
    q_ok, k_ok = real & (t < M), real & (t < N)
    same = (pair[:, None] == pair[None, :]) & k_ok[None, :]  # [ROWS, ROWS]
    k = _gather(K, b, h, t, s_kb, s_kh, s_kn, rd, k_ok)  # [ROWS, D]
    p1 = _probabilities(_gather(Q, b, h, t, s_qb, s_qh, s_qm, rd, q_ok), k, scale, same, PRECISION)
    if NEG:  # both maps first: K is then no longer needed
        p2 = _probabilities(_gather(QN, b, h, t, s_xb, s_xh, s_xm, rd, q_ok), k, -scale, same, PRECISION)
    v = _gather(V, b, h, t, s_vb, s_vh, s_vn, rd, k_ok)
    o = tl.dot(p1.to(v.dtype), v, input_precision=PRECISION)
    if NEG:
        vn = _gather(VN, b, h, t, s_wb, s_wh, s_wn, rd, k_ok)
        alpha = tl.load(ALPHA + h, mask=real, other=0.0).to(tl.float32)
        o += alpha[:, None] * tl.dot(p2.to(vn.dtype), vn, input_precision=PRECISION)
    rows = b * s_ob + h * s_oh + t * s_om
    tl.store(OUT + rows[:, None] + rd[None, :], o.to(OUT.dtype.element_ty), mask=q_ok[:, None])


@triton.jit
def _short_bwd_kernel(
    Q, QN, K, V, VN, DO, ALPHA, DQ, DQN, DK, DV, DVN, ON_DO,
    s_qb, s_qh, s_qm,  # Q+
    s_xb, s_xh, s_xm,  # Q-
    s_kb, s_kh, s_kn,  # K
    s_vb, s_vh, s_vn,  # V+
    s_wb, s_wh, s_wn,  # V-
    s_db, s_dh, s_dm,  # dO
    s_gb, s_gh, s_gm,  # dQ+, dQ-
    s_hb, s_hh, s_hn,  # dK, dV+, dV-
    BH, H, M, N, scale,
    NEG: tl.constexpr, PRECISION: tl.constexpr, ROWS: tl.constexpr, SEQ: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    pair, t, b, h, real = _rows(ROWS, SEQ, H, BH)
    rd = tl.arange(0, D)
    q_ok, k_ok = real & (t < M), real & (t < N)
    same = (pair[:, None] == pair[None, :]) & k_ok[None, :]  # [ROWS, ROWS]
    k = _gather(K, b, h, t, s_kb, s_kh, s_kn, rd, k_ok)  # [ROWS, D]
    do = _gather(DO, b, h, t, s_db, s_dh, s_dm, rd, q_ok)
    q_rows = b * s_gb + h * s_gh + t * s_gm
    k_rows = b * s_hb + h * s_hh + t * s_hn
    # positive branch
    q = _gather(Q, b, h, t, s_qb, s_qh, s_qm, rd, q_ok)
    v = _gather(V, b, h, t, s_vb, s_vh, s_vn, rd, k_ok)
    p = _probabilities(q, k, scale, same, PRECISION)  # [ROWS, ROWS]
    delta = tl.sum(do.to(tl.float32) * tl.dot(p.to(v.dtype), v, input_precision=PRECISION), 1)
    dv = tl.dot(tl.trans(p).to(do.dtype), do, input_precision=PRECISION)
    ds = p * (tl.dot(do, tl.trans(v), input_precision=PRECISION) - delta[:, None])
    dq = tl.dot(ds.to(k.dtype), k, input_precision=PRECISION) * scale
    dk = tl.dot(tl.trans(ds).to(q.dtype), q, input_precision=PRECISION)
    tl.store(DQ + q_rows[:, None] + rd[None, :], dq.to(DQ.dtype.element_ty), mask=q_ok[:, None])
    tl.store(DV + k_rows[:, None] + rd[None, :], dv.to(DV.dtype.element_ty), mask=k_ok[:, None])
    if NEG:  # negative branch (dO- = α dO)
        alpha = tl.load(ALPHA + h, mask=real, other=0.0).to(tl.float32)  # a row's α, as query or key
        qn = _gather(QN, b, h, t, s_xb, s_xh, s_xm, rd, q_ok)
        vn = _gather(VN, b, h, t, s_wb, s_wh, s_wn, rd, k_ok)
        p = _probabilities(qn, k, -scale, same, PRECISION)
        on_do = tl.sum(do.to(tl.float32) * tl.dot(p.to(vn.dtype), vn, input_precision=PRECISION), 1)
        tl.store(ON_DO + (b * H + h) * M + t, on_do, mask=q_ok)
        dvn = tl.dot(tl.trans(p).to(do.dtype), do, input_precision=PRECISION) * alpha[:, None]
        ds = p * alpha[:, None] * (tl.dot(do, tl.trans(vn), input_precision=PRECISION) - on_do[:, None])
        dqn = tl.dot(ds.to(k.dtype), k, input_precision=PRECISION) * -scale
        dk -= tl.dot(tl.trans(ds).to(qn.dtype), qn, input_precision=PRECISION)
        tl.store(DQN + q_rows[:, None] + rd[None, :], dqn.to(DQN.dtype.element_ty), mask=q_ok[:, None])
        tl.store(DVN + k_rows[:, None] + rd[None, :], dvn.to(DVN.dtype.element_ty), mask=k_ok[:, None])
    tl.store(DK + k_rows[:, None] + rd[None, :], (dk * scale).to(DK.dtype.element_ty), mask=k_ok[:, None])


def _strides(t: Tensor) -> tuple[int, int, int]:
    return t.stride(0), t.stride(1), t.stride(2)


def _options(q: Tensor, cfg, seq: int, neg: bool) -> dict:
    """The kernels' constants and launch options."""
    precision = dot_precision(q.dtype)
    return dict(
        NEG=neg, PRECISION=precision, ROWS=cfg.block_m, SEQ=seq, D=q.shape[-1], num_warps=cfg.num_warps
    )


def _launch(
    kernel, q: Tensor, k: Tensor, cfg, seq: int, args: tuple, scale: float, neg: bool, launch
) -> None:
    """One launch over every (sequence, head) pair of ``q [B, H, M, d]``, ``k [B, H, N, d]``."""
    bsz, h, m, _ = q.shape
    grid = (triton.cdiv(bsz * h, cfg.block_m // seq),)
    args = (*args, bsz * h, h, m, k.shape[2], scale)
    with device_guard(q.device):
        launch(Launch(kernel, grid, args, dict(_options(q, cfg, seq, neg), num_stages=1)))


def forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_neg: Optional[Tensor],
    v_neg: Optional[Tensor],
    alpha: Optional[Tensor],
    scale: float,
    capability: Optional[tuple[int, int]] = None,
    launch: Callable[[Launch], None] = run,
) -> Tensor:
    """``O [B, M, H, d]`` (the inputs' dtype): DnA, or softmax attention alone where ``q_neg``
    is ``None`` (``v_neg`` and ``alpha`` then unused). Nothing is kept for the backward but the
    inputs."""
    neg = q_neg is not None
    q_neg, v_neg = (q_neg, v_neg) if neg else (q, v)
    q, k, v, q_neg, v_neg = (unit_last_stride(t) for t in (q, k, v, q_neg, v_neg))
    bsz, h, m, d = q.shape
    seq = sequence_tile(m, k.shape[2])
    out = heads_last(bsz, h, m, d, q, q.dtype)
    cfg = short_launch_configs(capability or capability_of(q.device), q.dtype, d, seq)['short_forward']
    o = out.transpose(1, 2)
    alpha = alpha.to(torch.float32).contiguous() if neg else q
    args = (q, q_neg, k, v, v_neg, alpha, o)
    args += (*_strides(q), *_strides(q_neg), *_strides(k), *_strides(v), *_strides(v_neg), *_strides(o))
    _launch(_short_fwd_kernel, q, k, cfg, seq, args, scale, neg, launch)
    return out


def backward(
    grad_out: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_neg: Optional[Tensor],
    v_neg: Optional[Tensor],
    alpha: Optional[Tensor],
    scale: float,
    capability: Optional[tuple[int, int]] = None,
    launch: Callable[[Launch], None] = run,
) -> tuple[Tensor, ...]:
    """``dQ+, dK, dV+, dQ-, dV-`` (``[B, L, H, d]``, the inputs' dtype) and ``dα`` from
    ``grad_out [B, H, M, d]`` and the forward's inputs; for softmax attention (``q_neg`` is
    ``None``) ``dQ, dK, dV`` only."""
    neg = q_neg is not None
    q_neg, v_neg = (q_neg, v_neg) if neg else (q, v)
    grad_out, q, k, v, q_neg, v_neg = (unit_last_stride(t) for t in (grad_out, q, k, v, q_neg, v_neg))
    bsz, h, m, d = q.shape
    n, seq = k.shape[2], sequence_tile(m, k.shape[2])
    dk, dv = (heads_last(bsz, h, n, d, k, k.dtype) for _ in range(2))
    dq = heads_last(bsz, h, m, d, q, q.dtype)
    dq_neg, dv_neg = (
        (heads_last(bsz, h, m, d, q, q.dtype), heads_last(bsz, h, n, d, k, k.dtype)) if neg else (dq, dv)
    )
    on_do = torch.empty(bsz, h, m, device=q.device, dtype=torch.float32) if neg else q  # rowsum(dO ⊙ O-)
    cfg = short_launch_configs(capability or capability_of(q.device), q.dtype, d, seq)['short_backward']
    dq_, dqn_, dk_, dv_, dvn_ = (t.transpose(1, 2) for t in (dq, dq_neg, dk, dv, dv_neg))  # [B, H, L, d]
    a = alpha.to(torch.float32).contiguous() if neg else q
    args = (q, q_neg, k, v, v_neg, grad_out, a, dq_, dqn_, dk_, dv_, dvn_, on_do)
    args += (*_strides(q), *_strides(q_neg), *_strides(k), *_strides(v), *_strides(v_neg))
    args += (*_strides(grad_out), *_strides(dq_), *_strides(dk_))
    _launch(_short_bwd_kernel, q, k, cfg, seq, args, scale, neg, launch)
    if not neg:
        return dq, dk, dv
    return dq, dk, dv, dq_neg, dv_neg, on_do.sum((0, 2)).to(alpha.dtype)
