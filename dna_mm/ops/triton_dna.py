"""Fused two-branch DnA attention in Triton (FlashAttention-2 style).

Per head, with ``s`` the scale and ``b+ / b-`` optional additive biases:

    O+ = softmax(s Q+ K^T + b+) V+                      (online softmax, accumulator 1)
    O- = softmin(s Q- K^T + b-) V- = softmax(-s Q- K^T - b-) V-   (accumulator 2)
    O  = O+ + α O-

Forward: one program per ``(query tile, batch·head)`` walks the key / value tiles once,
loading each ``K`` tile once for both branches and keeping two running maxima, sums and
accumulators (fp32). It stores ``O+``, ``O-`` and the two log-sum-exps.

Backward (recompute, no ``M×N`` map stored): with ``dO+ = dO`` and ``dO- = α dO``,
``Δ± = rowsum(dO± ⊙ O±)``, ``P± = exp(z± - lse±)``:

    dV± = P±^T dO±,   dS± = P± ⊙ (dO± V±^T - Δ±),
    dQ+ = s dS+ K,    dQ- = -s dS- K,    dK = s dS+^T Q+ - s dS-^T Q-,
    db+ = dS+,        db- = -dS-,        dα = Σ dO ⊙ O-

one kernel over key tiles (``dK, dV+, dV-``), one over query tiles (``dQ+, dQ-`` and, when a
bias needs a gradient, ``dS±`` into an ``[B, H, M, N]`` buffer reduced to the bias's shape).

The kernels run on CUDA, and on the CPU under ``TRITON_INTERPRET=1`` (tests; the
interpreter's ``tl.dot`` mishandles bf16 in triton 3.9, so bf16 is a GPU-only case).
"""

from __future__ import annotations

import os
from typing import Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

#: the kernels below were built for the interpreter (``TRITON_INTERPRET=1`` at import):
#: they then run on CPU tensors
INTERPRETED = os.environ.get('TRITON_INTERPRET') == '1'


@triton.jit
def _fwd_kernel(
    Q,
    QN,
    K,
    V,
    VN,
    BP,
    BN_,
    OP,
    ON,
    LSE_P,
    LSE_N,
    s_qb,
    s_qh,
    s_qm,
    s_kb,
    s_kh,
    s_kn,
    s_pb,
    s_ph,
    s_pm,
    s_pn,
    s_nb,
    s_nh,
    s_nm,
    s_nn,
    H,
    M,
    N,
    scale,
    HAS_BP: tl.constexpr,
    HAS_BN: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D: tl.constexpr,
):
    pid_m, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = pid_bh // H, pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_off = b * s_qb + h * s_qh + offs_m[:, None] * s_qm + offs_d[None, :]
    m_ok = offs_m < M
    q = tl.load(Q + q_off, mask=m_ok[:, None], other=0.0)
    qn = tl.load(QN + q_off, mask=m_ok[:, None], other=0.0)
    m1 = tl.full([BLOCK_M], float('-inf'), tl.float32)
    m2 = tl.full([BLOCK_M], float('-inf'), tl.float32)
    l1 = tl.zeros([BLOCK_M], tl.float32)
    l2 = tl.zeros([BLOCK_M], tl.float32)
    acc1 = tl.zeros([BLOCK_M, D], tl.float32)
    acc2 = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        n_ok = offs_n < N
        kv_off = b * s_kb + h * s_kh + offs_n[:, None] * s_kn + offs_d[None, :]
        k = tl.load(K + kv_off, mask=n_ok[:, None], other=0.0)
        v = tl.load(V + kv_off, mask=n_ok[:, None], other=0.0)
        vn = tl.load(VN + kv_off, mask=n_ok[:, None], other=0.0)
        z1 = tl.dot(q, tl.trans(k), input_precision='ieee') * scale  # [BM, BN]
        z2 = -tl.dot(qn, tl.trans(k), input_precision='ieee') * scale
        bp_off = b * s_pb + h * s_ph + offs_m[:, None] * s_pm + offs_n[None, :] * s_pn
        bn_off = b * s_nb + h * s_nh + offs_m[:, None] * s_nm + offs_n[None, :] * s_nn
        both_ok = m_ok[:, None] & n_ok[None, :]
        if HAS_BP:
            z1 += tl.load(BP + bp_off, mask=both_ok, other=0.0).to(tl.float32)
        if HAS_BN:
            z2 -= tl.load(BN_ + bn_off, mask=both_ok, other=0.0).to(tl.float32)
        z1 = tl.where(n_ok[None, :], z1, float('-inf'))
        z2 = tl.where(n_ok[None, :], z2, float('-inf'))
        new1 = tl.maximum(m1, tl.max(z1, 1))
        new2 = tl.maximum(m2, tl.max(z2, 1))
        p1 = tl.exp(z1 - new1[:, None])
        p2 = tl.exp(z2 - new2[:, None])
        c1 = tl.exp(m1 - new1)
        c2 = tl.exp(m2 - new2)
        l1 = l1 * c1 + tl.sum(p1, 1)
        l2 = l2 * c2 + tl.sum(p2, 1)
        acc1 = acc1 * c1[:, None] + tl.dot(p1.to(v.dtype), v, input_precision='ieee')
        acc2 = acc2 * c2[:, None] + tl.dot(p2.to(vn.dtype), vn, input_precision='ieee')
        m1, m2 = new1, new2
    o_off = pid_bh * M * D + offs_m[:, None] * D + offs_d[None, :]
    tl.store(OP + o_off, acc1 / l1[:, None], mask=m_ok[:, None])
    tl.store(ON + o_off, acc2 / l2[:, None], mask=m_ok[:, None])
    tl.store(LSE_P + pid_bh * M + offs_m, m1 + tl.log(l1), mask=m_ok)
    tl.store(LSE_N + pid_bh * M + offs_m, m2 + tl.log(l2), mask=m_ok)


@triton.jit
def _probs(
    q, qn, k, lse1, lse2, BP, BN_, bp_off, bn_off, both_ok, scale, HAS_BP: tl.constexpr, HAS_BN: tl.constexpr
):
    """Recomputed ``P+`` and ``P-`` of one tile ``[BM, BN]``."""
    z1 = tl.dot(q, tl.trans(k), input_precision='ieee') * scale
    z2 = -tl.dot(qn, tl.trans(k), input_precision='ieee') * scale
    if HAS_BP:
        z1 += tl.load(BP + bp_off, mask=both_ok, other=0.0).to(tl.float32)
    if HAS_BN:
        z2 -= tl.load(BN_ + bn_off, mask=both_ok, other=0.0).to(tl.float32)
    p1 = tl.where(both_ok, tl.exp(z1 - lse1[:, None]), 0.0)
    p2 = tl.where(both_ok, tl.exp(z2 - lse2[:, None]), 0.0)
    return p1, p2


@triton.jit
def _bwd_kv_kernel(
    Q,
    QN,
    K,
    V,
    VN,
    BP,
    BN_,
    DO,
    LSE_P,
    LSE_N,
    DELTA_P,
    DELTA_N,
    ALPHA,
    DK,
    DV,
    DVN,
    s_qb,
    s_qh,
    s_qm,
    s_kb,
    s_kh,
    s_kn,
    s_pb,
    s_ph,
    s_pm,
    s_pn,
    s_nb,
    s_nh,
    s_nm,
    s_nn,
    H,
    M,
    N,
    scale,
    HAS_BP: tl.constexpr,
    HAS_BN: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D: tl.constexpr,
):
    pid_n, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = pid_bh // H, pid_bh % H
    alpha = tl.load(ALPHA + h).to(tl.float32)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    n_ok = offs_n < N
    kv_off = b * s_kb + h * s_kh + offs_n[:, None] * s_kn + offs_d[None, :]
    k = tl.load(K + kv_off, mask=n_ok[:, None], other=0.0)
    v = tl.load(V + kv_off, mask=n_ok[:, None], other=0.0)
    vn = tl.load(VN + kv_off, mask=n_ok[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    dvn = tl.zeros([BLOCK_N, D], tl.float32)
    for start in range(0, M, BLOCK_M):
        offs_m = start + tl.arange(0, BLOCK_M)
        m_ok = offs_m < M
        q_off = b * s_qb + h * s_qh + offs_m[:, None] * s_qm + offs_d[None, :]
        q = tl.load(Q + q_off, mask=m_ok[:, None], other=0.0)
        qn = tl.load(QN + q_off, mask=m_ok[:, None], other=0.0)
        do = tl.load(
            DO + pid_bh * M * D + offs_m[:, None] * D + offs_d[None, :], mask=m_ok[:, None], other=0.0
        )
        row = pid_bh * M + offs_m
        lse1 = tl.load(LSE_P + row, mask=m_ok, other=0.0)
        lse2 = tl.load(LSE_N + row, mask=m_ok, other=0.0)
        d1 = tl.load(DELTA_P + row, mask=m_ok, other=0.0)
        d2 = tl.load(DELTA_N + row, mask=m_ok, other=0.0)
        bp_off = b * s_pb + h * s_ph + offs_m[:, None] * s_pm + offs_n[None, :] * s_pn
        bn_off = b * s_nb + h * s_nh + offs_m[:, None] * s_nm + offs_n[None, :] * s_nn
        both_ok = m_ok[:, None] & n_ok[None, :]
        p1, p2 = _probs(q, qn, k, lse1, lse2, BP, BN_, bp_off, bn_off, both_ok, scale, HAS_BP, HAS_BN)
        do_f = do.to(tl.float32)
        dv += tl.dot(tl.trans(p1), do_f, input_precision='ieee')
        dvn += tl.dot(tl.trans(p2), do_f * alpha, input_precision='ieee')
        ds1 = p1 * (tl.dot(do_f, tl.trans(v.to(tl.float32)), input_precision='ieee') - d1[:, None])
        ds2 = p2 * (alpha * tl.dot(do_f, tl.trans(vn.to(tl.float32)), input_precision='ieee') - d2[:, None])
        dk += scale * (
            tl.dot(tl.trans(ds1), q.to(tl.float32), input_precision='ieee')
            - tl.dot(tl.trans(ds2), qn.to(tl.float32), input_precision='ieee')
        )
    out = pid_bh * N * D + offs_n[:, None] * D + offs_d[None, :]
    tl.store(DK + out, dk, mask=n_ok[:, None])
    tl.store(DV + out, dv, mask=n_ok[:, None])
    tl.store(DVN + out, dvn, mask=n_ok[:, None])


@triton.jit
def _bwd_q_kernel(
    Q,
    QN,
    K,
    V,
    VN,
    BP,
    BN_,
    DO,
    LSE_P,
    LSE_N,
    DELTA_P,
    DELTA_N,
    ALPHA,
    DQ,
    DQN,
    DS_P,
    DS_N,
    s_qb,
    s_qh,
    s_qm,
    s_kb,
    s_kh,
    s_kn,
    s_pb,
    s_ph,
    s_pm,
    s_pn,
    s_nb,
    s_nh,
    s_nm,
    s_nn,
    H,
    M,
    N,
    scale,
    HAS_BP: tl.constexpr,
    HAS_BN: tl.constexpr,
    STORE_DS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D: tl.constexpr,
):
    pid_m, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = pid_bh // H, pid_bh % H
    alpha = tl.load(ALPHA + h).to(tl.float32)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    m_ok = offs_m < M
    q_off = b * s_qb + h * s_qh + offs_m[:, None] * s_qm + offs_d[None, :]
    q = tl.load(Q + q_off, mask=m_ok[:, None], other=0.0)
    qn = tl.load(QN + q_off, mask=m_ok[:, None], other=0.0)
    do = tl.load(
        DO + pid_bh * M * D + offs_m[:, None] * D + offs_d[None, :], mask=m_ok[:, None], other=0.0
    ).to(tl.float32)
    row = pid_bh * M + offs_m
    lse1 = tl.load(LSE_P + row, mask=m_ok, other=0.0)
    lse2 = tl.load(LSE_N + row, mask=m_ok, other=0.0)
    d1 = tl.load(DELTA_P + row, mask=m_ok, other=0.0)
    d2 = tl.load(DELTA_N + row, mask=m_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, D], tl.float32)
    dqn = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        n_ok = offs_n < N
        kv_off = b * s_kb + h * s_kh + offs_n[:, None] * s_kn + offs_d[None, :]
        k = tl.load(K + kv_off, mask=n_ok[:, None], other=0.0)
        v = tl.load(V + kv_off, mask=n_ok[:, None], other=0.0).to(tl.float32)
        vn = tl.load(VN + kv_off, mask=n_ok[:, None], other=0.0).to(tl.float32)
        bp_off = b * s_pb + h * s_ph + offs_m[:, None] * s_pm + offs_n[None, :] * s_pn
        bn_off = b * s_nb + h * s_nh + offs_m[:, None] * s_nm + offs_n[None, :] * s_nn
        both_ok = m_ok[:, None] & n_ok[None, :]
        p1, p2 = _probs(q, qn, k, lse1, lse2, BP, BN_, bp_off, bn_off, both_ok, scale, HAS_BP, HAS_BN)
        ds1 = p1 * (tl.dot(do, tl.trans(v), input_precision='ieee') - d1[:, None])
        ds2 = p2 * (alpha * tl.dot(do, tl.trans(vn), input_precision='ieee') - d2[:, None])
        k_f = k.to(tl.float32)
        dq += scale * tl.dot(ds1, k_f, input_precision='ieee')
        dqn -= scale * tl.dot(ds2, k_f, input_precision='ieee')
        if STORE_DS:
            ds_off = pid_bh * M * N + offs_m[:, None] * N + offs_n[None, :]
            tl.store(DS_P + ds_off, ds1, mask=both_ok)
            tl.store(DS_N + ds_off, -ds2, mask=both_ok)
    out = pid_bh * M * D + offs_m[:, None] * D + offs_d[None, :]
    tl.store(DQ + out, dq, mask=m_ok[:, None])
    tl.store(DQN + out, dqn, mask=m_ok[:, None])


def _blocks(d: int) -> tuple[int, int]:
    return (64, 64) if d <= 64 else (32, 32)


def _bias_args(
    bias: Optional[Tensor], shape: tuple[int, int, int, int], like: Tensor
) -> tuple[Tensor, tuple[int, int, int, int]]:
    """A bias broadcast to ``[B, H, M, N]`` by strides (no copy), or a dummy."""
    if bias is None:
        return like, (0, 0, 0, 0)
    full = bias.expand(shape)
    return full, tuple(full.stride())  # type: ignore[return-value]


def _reduce_to(grad: Tensor, shape: torch.Size) -> Tensor:
    """Sum a ``[B, H, M, N]`` gradient over the dimensions a bias was broadcast along."""
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and grad.shape[i] != 1:
            grad = grad.sum(i, keepdim=True)
    return grad


class DnAAttentionFunction(torch.autograd.Function):
    """Autograd wrapper of the kernels; see :func:`dna_mm.ops.dna_attention`."""

    @staticmethod
    def forward(
        ctx,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        q_neg: Tensor,
        v_neg: Tensor,
        alpha: Tensor,
        b_pos: Optional[Tensor],
        b_neg: Optional[Tensor],
        scale: float,
    ) -> Tensor:
        bsz, h, m, d = q.shape
        n = k.shape[2]
        q, k, v, q_neg, v_neg = (t.contiguous() for t in (q, k, v, q_neg, v_neg))
        o_pos = torch.empty(bsz, h, m, d, device=q.device, dtype=torch.float32)
        o_neg = torch.empty_like(o_pos)
        lse_p = torch.empty(bsz, h, m, device=q.device, dtype=torch.float32)
        lse_n = torch.empty_like(lse_p)
        bp, sb_p = _bias_args(b_pos, (bsz, h, m, n), q)
        bn, sb_n = _bias_args(b_neg, (bsz, h, m, n), q)
        block_m, block_n = _blocks(d)
        grid = (triton.cdiv(m, block_m), bsz * h)
        _fwd_kernel[grid](
            q,
            q_neg,
            k,
            v,
            v_neg,
            bp,
            bn,
            o_pos,
            o_neg,
            lse_p,
            lse_n,
            *q.stride()[:3],
            *k.stride()[:3],
            *sb_p,
            *sb_n,
            h,
            m,
            n,
            scale,
            HAS_BP=b_pos is not None,
            HAS_BN=b_neg is not None,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            D=d,
        )
        ctx.save_for_backward(q, k, v, q_neg, v_neg, alpha, o_pos, o_neg, lse_p, lse_n, bp, bn)
        ctx.bias_shapes = (None if b_pos is None else b_pos.shape, None if b_neg is None else b_neg.shape)
        ctx.bias_strides = (*sb_p, *sb_n)
        ctx.scale = scale
        a = alpha.to(torch.float32).view(1, -1, 1, 1)
        return (o_pos + a * o_neg).to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        q, k, v, q_neg, v_neg, alpha, o_pos, o_neg, lse_p, lse_n, bp, bn = ctx.saved_tensors
        (shape_p, shape_n), sb, scale = ctx.bias_shapes, ctx.bias_strides, ctx.scale
        bsz, h, m, d = q.shape
        n = k.shape[2]
        do = grad_out.to(torch.float32).contiguous()
        a = alpha.to(torch.float32)
        delta_p = (do * o_pos).sum(-1)
        delta_n = (do * o_neg).sum(-1) * a.view(1, -1, 1)
        d_alpha = (do * o_neg).sum(dim=(0, 2, 3)).to(alpha.dtype)
        dk = torch.empty(bsz, h, n, d, device=q.device, dtype=torch.float32)
        dv, dvn = torch.empty_like(dk), torch.empty_like(dk)
        dq = torch.empty(bsz, h, m, d, device=q.device, dtype=torch.float32)
        dqn = torch.empty_like(dq)
        store_ds = ctx.needs_input_grad[6] or ctx.needs_input_grad[7]
        ds_p = torch.empty(bsz, h, m, n, device=q.device, dtype=torch.float32) if store_ds else dq
        ds_n = torch.empty_like(ds_p) if store_ds else dq
        alpha_c = a.contiguous()
        block_m, block_n = _blocks(d)
        common = dict(
            HAS_BP=shape_p is not None, HAS_BN=shape_n is not None, BLOCK_M=block_m, BLOCK_N=block_n, D=d
        )
        strides = (*q.stride()[:3], *k.stride()[:3], *sb, h, m, n, scale)
        _bwd_kv_kernel[(triton.cdiv(n, block_n), bsz * h)](
            q,
            q_neg,
            k,
            v,
            v_neg,
            bp,
            bn,
            do,
            lse_p,
            lse_n,
            delta_p,
            delta_n,
            alpha_c,
            dk,
            dv,
            dvn,
            *strides,
            **common,
        )
        _bwd_q_kernel[(triton.cdiv(m, block_m), bsz * h)](
            q,
            q_neg,
            k,
            v,
            v_neg,
            bp,
            bn,
            do,
            lse_p,
            lse_n,
            delta_p,
            delta_n,
            alpha_c,
            dq,
            dqn,
            ds_p,
            ds_n,
            *strides,
            STORE_DS=store_ds,
            **common,
        )
        g_bp = _reduce_to(ds_p, shape_p).to(bp.dtype) if ctx.needs_input_grad[6] else None
        g_bn = _reduce_to(ds_n, shape_n).to(bn.dtype) if ctx.needs_input_grad[7] else None
        return (
            dq.to(q.dtype),
            dk.to(k.dtype),
            dv.to(v.dtype),
            dqn.to(q_neg.dtype),
            dvn.to(v_neg.dtype),
            d_alpha,
            g_bp,
            g_bn,
            None,
        )
