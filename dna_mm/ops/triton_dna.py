"""Fused two-branch DnA attention in Triton (FlashAttention-2 style).

Per head, with ``s`` the scale and ``b+ / b-`` optional additive biases:

    O+ = softmax(s Q+ K^T + b+) V+                      (online softmax, accumulator 1)
    O- = softmin(s Q- K^T + b-) V- = softmax(-s Q- K^T - b-) V-   (accumulator 2)
    O  = O+ + α O-

Forward: one program per ``(query tile, batch·head)`` walks the key / value tiles once,
loading each ``K`` tile once for both branches and keeping two running maxima, sums and
accumulators (fp32). It stores ``O`` (the inputs' dtype) and, for the backward, ``O+``, ``O-``
(fp32) and the two log-sum-exps.

Backward (recompute, no ``M×N`` map stored): with ``dO+ = dO`` and ``dO- = α dO``,
``Δ± = rowsum(dO± ⊙ O±)``, ``P± = exp(z± - lse±)``:

    dV+ = P+^T dO,  dV- = α P-^T dO,  dS± = P± ⊙ (dO± V±^T - Δ±),
    dQ+ = s dS+ K,  dQ- = -s dS- K,   dK = s dS+^T Q+ - s dS-^T Q-,
    db+ = dS+,      db- = -dS-,       dα = Σ dO ⊙ O-

one kernel over key tiles (``dK, dV+, dV-``), one over query tiles (``dQ+, dQ-`` and, for each
bias that needs a gradient, ``dS+`` / ``-dS-`` into an ``[B, H, M, N]`` map of the bias's dtype,
reduced to the bias's shape by the caller).

Precision: every ``tl.dot`` takes operands in the inputs' dtype with fp32 accumulation (fp16 /
bf16: tensor cores; ``P`` and ``dS`` are cast to that dtype before their products, as
FlashAttention-2 does); fp32 inputs use TF32 where ``torch.backends.cuda.matmul.allow_tf32``
allows it, IEEE fp32 otherwise.

Masked keys (``-inf`` logits): a tile whose keys are all masked adds nothing (the running
maximum stays ``-inf`` and is replaced by 0 before it is subtracted); a query row with every key
masked gets ``O = 0`` and zero gradients (``lse = +inf`` makes its recomputed ``P`` zero), which
is what ``scaled_dot_product_attention`` gives.

Addressing: the offset of each tile's first element is computed in int64 (batch, head and tile
starts times their strides can pass 2³¹ elements); offsets inside a tile stay int32 (a tile's
extent times a stride). Every input is read through its strides (last stride 1).

The kernels run on CUDA, and on the CPU under ``TRITON_INTERPRET=1`` (tests; the
interpreter's ``tl.dot`` mishandles bf16 in triton 3.9, so bf16 is a GPU-only case).
"""

from __future__ import annotations

import contextlib
import inspect
import os
from typing import Any, Callable, NamedTuple, Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

from .kernel_config import launch_configs

#: the kernels below were built for the interpreter (``TRITON_INTERPRET=1`` at import):
#: they then run on CPU tensors
INTERPRETED = os.environ.get('TRITON_INTERPRET') == '1'
#: capability whose configurations the interpreter uses (it has no shared-memory limit)
INTERPRETER_CAPABILITY = (8, 0)


def _index_scalars_under_numpy2() -> None:
    """Let the interpreter's scalars bound a ``range`` under NumPy >= 2.5.

    The interpreter holds a scalar kernel argument (``N`` in ``range(0, N, BLOCK_N)``) as a
    one-element array and patches ``tl.tensor.__index__`` per launch as ``int(array)``, which
    NumPy 2.5 refuses for arrays of one dimension (triton 3.6: "only 0-dimensional arrays can be
    converted to Python scalars"). The patch is followed by one that reads the element; the
    interpreter restores both after the launch. Compiled kernels are not affected.
    """
    from triton.runtime import interpreter

    patch_tensor = getattr(interpreter, '_patch_lang_tensor', None)
    if patch_tensor is None or getattr(patch_tensor, 'reads_the_element', False):
        return
    if list(inspect.signature(patch_tensor).parameters) != ['tensor', 'scope']:
        return  # another interpreter layout: left as it is

    def patched(tensor: Any, scope: Any) -> None:
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, '__index__', lambda self: int(self.handle.data.reshape(-1)[0]))

    patched.reads_the_element = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patched


if INTERPRETED:
    _index_scalars_under_numpy2()


@triton.jit
def _tile(P, rows, s_row, rd, ok):
    """``P[rows, :D]`` of a row-major tile (``s_row`` between rows, unit last stride), zeros in
    the rows outside ``ok``: ``[len(rows), D]``."""
    return tl.load(P + rows[:, None] * s_row + rd[None, :], mask=ok[:, None], other=0.0)


@triton.jit
def _logits(
    a1, a2, b1, b2, BP, BN_, bp_off, bn_off, both_ok, scale,
    HAS_BP: tl.constexpr, HAS_BN: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Logits of both branches for one tile (fp32), ``s a1 b1^T + b+`` and ``-(s a2 b2^T + b-)``
    with the biases read at ``bp_off`` / ``bn_off``, ``-inf`` outside ``both_ok``: ``[BM, BN]``
    for ``(Q+, Q-, K, K)``, the transposed ``[BN, BM]`` for ``(K, K, Q+, Q-)``."""
    z1 = tl.dot(a1, tl.trans(b1), input_precision=PRECISION) * scale
    z2 = tl.dot(a2, tl.trans(b2), input_precision=PRECISION) * -scale
    if HAS_BP:
        z1 += tl.load(BP + bp_off, mask=both_ok, other=0.0).to(tl.float32)
    if HAS_BN:
        z2 -= tl.load(BN_ + bn_off, mask=both_ok, other=0.0).to(tl.float32)
    z1 = tl.where(both_ok, z1, float('-inf'))
    z2 = tl.where(both_ok, z2, float('-inf'))
    return z1, z2


# Kernel arguments: the tensors, then their strides grouped per tensor ((batch, head, row) for
# [B, H, L, d] tensors; (batch, head, query, key) for the biases), sizes, then the constants.


@triton.jit
def _fwd_kernel(
    Q, QN, K, V, VN, BP, BN_, ALPHA, OUT, OP, ON, LSE_P, LSE_N,
    s_qb, s_qh, s_qm,  # Q+
    s_xb, s_xh, s_xm,  # Q-
    s_kb, s_kh, s_kn,  # K
    s_vb, s_vh, s_vn,  # V+
    s_wb, s_wh, s_wn,  # V-
    s_pb, s_ph, s_pm, s_pn,  # b+
    s_nb, s_nh, s_nm, s_nn,  # b-
    s_ob, s_oh, s_om,  # O
    H, M, N, scale,
    HAS_BP: tl.constexpr, HAS_BN: tl.constexpr, FOR_BACKWARD: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    pid_m, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = (pid_bh // H).to(tl.int64), (pid_bh % H).to(tl.int64)
    m0 = (pid_m * BLOCK_M).to(tl.int64)
    rm, rn, rd = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N), tl.arange(0, D)
    m_ok = m0 + rm < M
    q = _tile(Q + (b * s_qb + h * s_qh + m0 * s_qm), rm, s_qm, rd, m_ok)  # [BM, D]
    qn = _tile(QN + (b * s_xb + h * s_xh + m0 * s_xm), rm, s_xm, rd, m_ok)
    K += b * s_kb + h * s_kh
    V += b * s_vb + h * s_vh
    VN += b * s_wb + h * s_wh
    BP += b * s_pb + h * s_ph + m0 * s_pm
    BN_ += b * s_nb + h * s_nh + m0 * s_nm
    bp_off = rm[:, None] * s_pm + rn[None, :] * s_pn
    bn_off = rm[:, None] * s_nm + rn[None, :] * s_nn
    m1 = tl.full([BLOCK_M], float('-inf'), tl.float32)
    m2 = tl.full([BLOCK_M], float('-inf'), tl.float32)
    l1 = tl.zeros([BLOCK_M], tl.float32)
    l2 = tl.zeros([BLOCK_M], tl.float32)
    acc1 = tl.zeros([BLOCK_M, D], tl.float32)
    acc2 = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N, BLOCK_N):  # the pointers advance one key tile per step
        n_ok = start + rn < N
        k = _tile(K, rn, s_kn, rd, n_ok)  # [BN, D]
        v = _tile(V, rn, s_vn, rd, n_ok)
        vn = _tile(VN, rn, s_wn, rd, n_ok)
        both_ok = m_ok[:, None] & n_ok[None, :]
        z1, z2 = _logits(
            q, qn, k, k, BP, BN_, bp_off, bn_off, both_ok, scale, HAS_BP, HAS_BN, PRECISION
        )  # [BM, BN]
        new1 = tl.maximum(m1, tl.max(z1, 1))
        new2 = tl.maximum(m2, tl.max(z2, 1))
        # a row whose keys so far are all masked keeps max -inf: subtract 0 instead (no NaN)
        safe1 = tl.where(new1 == float('-inf'), 0.0, new1)
        safe2 = tl.where(new2 == float('-inf'), 0.0, new2)
        p1 = tl.exp(z1 - safe1[:, None])
        p2 = tl.exp(z2 - safe2[:, None])
        c1 = tl.exp(m1 - safe1)
        c2 = tl.exp(m2 - safe2)
        l1 = l1 * c1 + tl.sum(p1, 1)
        l2 = l2 * c2 + tl.sum(p2, 1)
        acc1 = tl.dot(p1.to(v.dtype), v, acc1 * c1[:, None], input_precision=PRECISION)
        acc2 = tl.dot(p2.to(vn.dtype), vn, acc2 * c2[:, None], input_precision=PRECISION)
        m1, m2 = new1, new2
        K += BLOCK_N * s_kn
        V += BLOCK_N * s_vn
        VN += BLOCK_N * s_wn
        BP += BLOCK_N * s_pn
        BN_ += BLOCK_N * s_nn
    # a fully masked row: l = 0 → O± = 0, lse = +inf (its recomputed P is 0 in the backward)
    l1s = tl.where(l1 == 0.0, 1.0, l1)
    l2s = tl.where(l2 == 0.0, 1.0, l2)
    o1 = acc1 / l1s[:, None]
    o2 = acc2 / l2s[:, None]
    alpha = tl.load(ALPHA + h).to(tl.float32)
    out = OUT + (b * s_ob + h * s_oh + m0 * s_om) + rm[:, None] * s_om + rd[None, :]
    tl.store(out, (o1 + alpha * o2).to(OUT.dtype.element_ty), mask=m_ok[:, None])
    if FOR_BACKWARD:
        row = pid_bh.to(tl.int64) * M + m0
        branch = row * D + rm[:, None] * D + rd[None, :]
        tl.store(OP + branch, o1, mask=m_ok[:, None])
        tl.store(ON + branch, o2, mask=m_ok[:, None])
        tl.store(LSE_P + row + rm, tl.where(l1 == 0.0, float('inf'), m1 + tl.log(l1s)), mask=m_ok)
        tl.store(LSE_N + row + rm, tl.where(l2 == 0.0, float('inf'), m2 + tl.log(l2s)), mask=m_ok)


@triton.jit
def _bwd_kv_kernel(
    Q, QN, K, V, VN, BP, BN_, DO, LSE_P, LSE_N, DELTA_P, DELTA_N, ALPHA, DK, DV, DVN,
    s_qb, s_qh, s_qm,  # Q+
    s_xb, s_xh, s_xm,  # Q-
    s_kb, s_kh, s_kn,  # K
    s_vb, s_vh, s_vn,  # V+
    s_wb, s_wh, s_wn,  # V-
    s_pb, s_ph, s_pm, s_pn,  # b+
    s_nb, s_nh, s_nm, s_nn,  # b-
    s_db, s_dh, s_dm,  # dO
    s_gb, s_gh, s_gn,  # dK, dV+, dV-
    H, M, N, scale,
    HAS_BP: tl.constexpr, HAS_BN: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    """``dK, dV+, dV-`` of one key tile (written with strides ``s_g*``, shared by the three)."""
    pid_n, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = (pid_bh // H).to(tl.int64), (pid_bh % H).to(tl.int64)
    n0 = (pid_n * BLOCK_N).to(tl.int64)
    rm, rn, rd = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N), tl.arange(0, D)
    n_ok = n0 + rn < N
    alpha = tl.load(ALPHA + h).to(tl.float32)
    k = _tile(K + (b * s_kb + h * s_kh + n0 * s_kn), rn, s_kn, rd, n_ok)  # [BN, D]
    v = _tile(V + (b * s_vb + h * s_vh + n0 * s_vn), rn, s_vn, rd, n_ok)
    vn = _tile(VN + (b * s_wb + h * s_wh + n0 * s_wn), rn, s_wn, rd, n_ok)
    Q += b * s_qb + h * s_qh
    QN += b * s_xb + h * s_xh
    DO += b * s_db + h * s_dh
    BP += b * s_pb + h * s_ph + n0 * s_pn
    BN_ += b * s_nb + h * s_nh + n0 * s_nn
    bp_off = rn[:, None] * s_pn + rm[None, :] * s_pm  # [BN, BM]
    bn_off = rn[:, None] * s_nn + rm[None, :] * s_nm
    row0 = pid_bh.to(tl.int64) * M
    LSE_P += row0
    LSE_N += row0
    DELTA_P += row0
    DELTA_N += row0
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    dvn = tl.zeros([BLOCK_N, D], tl.float32)
    for start in range(0, M, BLOCK_M):  # the pointers advance one query tile per step
        m_ok = start + rm < M
        q = _tile(Q, rm, s_qm, rd, m_ok)  # [BM, D]
        qn = _tile(QN, rm, s_xm, rd, m_ok)
        do = _tile(DO, rm, s_dm, rd, m_ok)
        lse1 = tl.load(LSE_P + start + rm, mask=m_ok, other=float('inf'))
        lse2 = tl.load(LSE_N + start + rm, mask=m_ok, other=float('inf'))
        d1 = tl.load(DELTA_P + start + rm, mask=m_ok, other=0.0)
        d2 = tl.load(DELTA_N + start + rm, mask=m_ok, other=0.0)
        # transposed tiles [BN, BM] (P^T, dS^T): no register transposes before the products
        both_ok = n_ok[:, None] & m_ok[None, :]
        z1, z2 = _logits(k, k, q, qn, BP, BN_, bp_off, bn_off, both_ok, scale, HAS_BP, HAS_BN, PRECISION)
        p1 = tl.exp(z1 - lse1[None, :])  # [BN, BM]
        p2 = tl.exp(z2 - lse2[None, :])
        dv = tl.dot(p1.to(do.dtype), do, dv, input_precision=PRECISION)
        dvn = tl.dot(p2.to(do.dtype), do, dvn, input_precision=PRECISION)
        ds1 = p1 * (tl.dot(v, tl.trans(do), input_precision=PRECISION) - d1[None, :])
        ds2 = p2 * (alpha * tl.dot(vn, tl.trans(do), input_precision=PRECISION) - d2[None, :])
        dk = tl.dot(ds1.to(q.dtype), q, dk, input_precision=PRECISION)
        dk = tl.dot((-ds2).to(qn.dtype), qn, dk, input_precision=PRECISION)
        Q += BLOCK_M * s_qm
        QN += BLOCK_M * s_xm
        DO += BLOCK_M * s_dm
        BP += BLOCK_M * s_pm
        BN_ += BLOCK_M * s_nm
    out = b * s_gb + h * s_gh + n0 * s_gn + rn[:, None] * s_gn + rd[None, :]
    tl.store(DK + out, (dk * scale).to(DK.dtype.element_ty), mask=n_ok[:, None])
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=n_ok[:, None])
    tl.store(DVN + out, (dvn * alpha).to(DVN.dtype.element_ty), mask=n_ok[:, None])


@triton.jit
def _bwd_q_kernel(
    Q, QN, K, V, VN, BP, BN_, DO, LSE_P, LSE_N, DELTA_P, DELTA_N, ALPHA, DQ, DQN, DS_P, DS_N,
    s_qb, s_qh, s_qm,  # Q+
    s_xb, s_xh, s_xm,  # Q-
    s_kb, s_kh, s_kn,  # K
    s_vb, s_vh, s_vn,  # V+
    s_wb, s_wh, s_wn,  # V-
    s_pb, s_ph, s_pm, s_pn,  # b+
    s_nb, s_nh, s_nm, s_nn,  # b-
    s_db, s_dh, s_dm,  # dO
    s_gb, s_gh, s_gm,  # dQ+, dQ-
    H, M, N, scale,
    HAS_BP: tl.constexpr, HAS_BN: tl.constexpr, STORE_DSP: tl.constexpr, STORE_DSN: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    """``dQ+, dQ-`` of one query tile (strides ``s_g*``), and the bias-gradient maps
    ``dS+``, ``-dS-`` (contiguous ``[B, H, M, N]``) that are asked for."""
    pid_m, pid_bh = tl.program_id(0), tl.program_id(1)
    b, h = (pid_bh // H).to(tl.int64), (pid_bh % H).to(tl.int64)
    m0 = (pid_m * BLOCK_M).to(tl.int64)
    rm, rn, rd = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N), tl.arange(0, D)
    m_ok = m0 + rm < M
    alpha = tl.load(ALPHA + h).to(tl.float32)
    q = _tile(Q + (b * s_qb + h * s_qh + m0 * s_qm), rm, s_qm, rd, m_ok)  # [BM, D]
    qn = _tile(QN + (b * s_xb + h * s_xh + m0 * s_xm), rm, s_xm, rd, m_ok)
    do = _tile(DO + (b * s_db + h * s_dh + m0 * s_dm), rm, s_dm, rd, m_ok)
    row = pid_bh.to(tl.int64) * M + m0
    lse1 = tl.load(LSE_P + row + rm, mask=m_ok, other=float('inf'))
    lse2 = tl.load(LSE_N + row + rm, mask=m_ok, other=float('inf'))
    d1 = tl.load(DELTA_P + row + rm, mask=m_ok, other=0.0)
    d2 = tl.load(DELTA_N + row + rm, mask=m_ok, other=0.0)
    K += b * s_kb + h * s_kh
    V += b * s_vb + h * s_vh
    VN += b * s_wb + h * s_wh
    BP += b * s_pb + h * s_ph + m0 * s_pm
    BN_ += b * s_nb + h * s_nh + m0 * s_nm
    bp_off = rm[:, None] * s_pm + rn[None, :] * s_pn
    bn_off = rm[:, None] * s_nm + rn[None, :] * s_nn
    DS_P += row * N  # int64: the maps hold B·H·M·N elements
    DS_N += row * N
    ds_off = rm[:, None] * N + rn[None, :]
    dq = tl.zeros([BLOCK_M, D], tl.float32)
    dqn = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N, BLOCK_N):  # the pointers advance one key tile per step
        n_ok = start + rn < N
        k = _tile(K, rn, s_kn, rd, n_ok)  # [BN, D]
        v = _tile(V, rn, s_vn, rd, n_ok)
        vn = _tile(VN, rn, s_wn, rd, n_ok)
        both_ok = m_ok[:, None] & n_ok[None, :]
        z1, z2 = _logits(q, qn, k, k, BP, BN_, bp_off, bn_off, both_ok, scale, HAS_BP, HAS_BN, PRECISION)
        p1 = tl.exp(z1 - lse1[:, None])  # [BM, BN]
        p2 = tl.exp(z2 - lse2[:, None])
        ds1 = p1 * (tl.dot(do, tl.trans(v), input_precision=PRECISION) - d1[:, None])
        ds2 = p2 * (alpha * tl.dot(do, tl.trans(vn), input_precision=PRECISION) - d2[:, None])
        dq = tl.dot(ds1.to(k.dtype), k, dq, input_precision=PRECISION)
        dqn = tl.dot(ds2.to(k.dtype), k, dqn, input_precision=PRECISION)
        if STORE_DSP:
            tl.store(DS_P + ds_off, ds1.to(DS_P.dtype.element_ty), mask=both_ok)
        if STORE_DSN:
            tl.store(DS_N + ds_off, (-ds2).to(DS_N.dtype.element_ty), mask=both_ok)
        K += BLOCK_N * s_kn
        V += BLOCK_N * s_vn
        VN += BLOCK_N * s_wn
        BP += BLOCK_N * s_pn
        BN_ += BLOCK_N * s_nn
        DS_P += BLOCK_N
        DS_N += BLOCK_N
    out = b * s_gb + h * s_gh + m0 * s_gm + rm[:, None] * s_gm + rd[None, :]
    tl.store(DQ + out, (dq * scale).to(DQ.dtype.element_ty), mask=m_ok[:, None])
    tl.store(DQN + out, (dqn * -scale).to(DQN.dtype.element_ty), mask=m_ok[:, None])


class Launch(NamedTuple):
    """One kernel launch: ``kernel[grid](*args, **kwargs)``. :func:`forward` and :func:`backward`
    hand theirs to ``launch``: :func:`run` on a device, the ahead-of-time compiler
    (:func:`dna_mm.ops.compile_kernels`) on ``meta`` tensors."""

    kernel: Any
    grid: tuple[int, int]
    args: tuple
    kwargs: dict


def run(launch: Launch) -> None:
    launch.kernel[launch.grid](*launch.args, **launch.kwargs)


def _strides(t: Tensor) -> tuple[int, int, int]:
    """``(batch, head, row)`` strides of a ``[B, H, L, d]`` tensor with unit last stride."""
    return t.stride(0), t.stride(1), t.stride(2)


def unit_last_stride(t: Tensor) -> Tensor:
    """``t`` itself when its last stride is 1 (the kernels read every other stride), else a
    contiguous copy."""
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.contiguous()


def heads_last(b: int, h: int, n: int, d: int, like: Tensor, dtype: torch.dtype) -> Tensor:
    """An empty ``[B, N, H, d]`` tensor, written through its ``[B, H, N, d]`` view: merging the
    heads back to ``[B, N, H·d]`` (what the attention modules do next) is then free."""
    return torch.empty(b, n, h, d, device=like.device, dtype=dtype)


def dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot``'s ``input_precision``: TF32 for fp32 only where PyTorch allows it for matmuls
    (fp16 / bf16 operands take their own tensor-core path whatever this says)."""
    if dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32:
        return 'ieee'
    return 'tf32'


def _bias_args(bias: Optional[Tensor], shape: tuple, like: Tensor) -> tuple[Tensor, tuple]:
    """A bias broadcast to ``[B, H, M, N]`` by strides (no copy), or a dummy."""
    if bias is None:
        return like, (0, 0, 0, 0)
    full = bias.expand(shape)
    return full, tuple(full.stride())


def _input_args(q, k, v, q_neg, v_neg, b_pos, b_neg) -> tuple[tuple, tuple, dict]:
    """The pointers of the inputs every kernel reads, their strides, and the bias switches."""
    bsz, h, m, _ = q.shape
    bp, sb_p = _bias_args(b_pos, (bsz, h, m, k.shape[2]), q)
    bn, sb_n = _bias_args(b_neg, (bsz, h, m, k.shape[2]), q)
    strides = (*_strides(q), *_strides(q_neg), *_strides(k), *_strides(v), *_strides(v_neg), *sb_p, *sb_n)
    switches = dict(HAS_BP=b_pos is not None, HAS_BN=b_neg is not None, PRECISION=dot_precision(q.dtype))
    return (q, q_neg, k, v, v_neg, bp, bn), strides, switches


def _tiles(cfg) -> dict:
    return dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def capability_of(device: torch.device) -> tuple[int, int]:
    """The compute capability whose launch configurations run on ``device``."""
    if device.type == 'cuda':
        return torch.cuda.get_device_capability(device)
    return INTERPRETER_CAPABILITY


def device_guard(device: torch.device):
    """Launches under the inputs' device (Triton launches on the current one)."""
    return torch.cuda.device(device) if device.type == 'cuda' else contextlib.nullcontext()


def reduce_to(grad: Tensor, shape: torch.Size) -> Tensor:
    """Sum a ``[B, H, M, N]`` gradient over the dimensions a bias was broadcast along."""
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    dims = [i for i, s in enumerate(shape) if s == 1 and grad.shape[i] != 1]
    return grad.sum(dims, keepdim=True) if dims else grad


def forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_neg: Tensor,
    v_neg: Tensor,
    alpha: Tensor,
    b_pos: Optional[Tensor],
    b_neg: Optional[Tensor],
    scale: float,
    for_backward: bool,
    capability: Optional[tuple[int, int]] = None,
    launch: Callable[[Launch], None] = run,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``O [B, M, H, d]`` (the inputs' dtype) and, when ``for_backward``, ``O+, O- [B, H, M, d]``
    and ``lse+, lse- [B, H, M]`` (fp32; else empty). ``capability``: the target whose launch
    configuration is used (default: the inputs' device's)."""
    q, k, v, q_neg, v_neg = (unit_last_stride(t) for t in (q, k, v, q_neg, v_neg))
    bsz, h, m, d = q.shape
    out = heads_last(bsz, h, m, d, q, q.dtype)
    f32 = dict(device=q.device, dtype=torch.float32)
    if for_backward:
        o_pos, o_neg = torch.empty(bsz, h, m, d, **f32), torch.empty(bsz, h, m, d, **f32)
        lse_p, lse_n = torch.empty(bsz, h, m, **f32), torch.empty(bsz, h, m, **f32)
    else:  # nothing kept for a backward
        o_pos, o_neg, lse_p, lse_n = (torch.empty(0, **f32) for _ in range(4))
    alpha = alpha.to(torch.float32).contiguous()
    ins, strides, switches = _input_args(q, k, v, q_neg, v_neg, b_pos, b_neg)
    cfg = launch_configs(capability or capability_of(q.device), q.dtype, d)['forward']
    o = out.transpose(1, 2)
    args = (*ins, alpha, o, o_pos, o_neg, lse_p, lse_n, *strides, *_strides(o), h, m, k.shape[2], scale)
    kwargs = dict(switches, FOR_BACKWARD=for_backward, D=d, **_tiles(cfg))
    with device_guard(q.device):
        launch(Launch(_fwd_kernel, (triton.cdiv(m, cfg.block_m), bsz * h), args, kwargs))
    return out, o_pos, o_neg, lse_p, lse_n


def backward(
    grad_out: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_neg: Tensor,
    v_neg: Tensor,
    alpha: Tensor,
    b_pos: Optional[Tensor],
    b_neg: Optional[Tensor],
    o_pos: Tensor,
    o_neg: Tensor,
    lse_p: Tensor,
    lse_n: Tensor,
    scale: float,
    grad_b_pos: bool,
    grad_b_neg: bool,
    capability: Optional[tuple[int, int]] = None,
    launch: Callable[[Launch], None] = run,
) -> tuple[Tensor, ...]:
    """``dQ+, dQ- [B, M, H, d]``, ``dK, dV+, dV- [B, N, H, d]`` (inputs' dtype), ``dα`` and the
    bias gradients reduced to the biases' shapes (``None`` where not asked for).

    Two kernels: one over key tiles (``dK, dV+, dV-``, written with shared strides), one over
    query tiles (``dQ+, dQ-`` and the bias-gradient maps ``dS+`` / ``-dS-``, contiguous
    ``[B, H, M, N]`` in the bias's dtype)."""
    grad_out, q, k, v, q_neg, v_neg = (unit_last_stride(t) for t in (grad_out, q, k, v, q_neg, v_neg))
    bsz, h, m, d = q.shape
    n = k.shape[2]
    a = alpha.to(torch.float32).contiguous()
    do32 = grad_out.to(torch.float32)
    delta_p = (do32 * o_pos).sum(-1)  # [B, H, M]
    on_do = (do32 * o_neg).sum(-1)
    delta_n = on_do * a.view(1, -1, 1)
    d_alpha = on_do.sum((0, 2)).to(alpha.dtype)
    del do32
    dk, dv, dv_neg = (heads_last(bsz, h, n, d, k, k.dtype) for _ in range(3))
    dq, dq_neg = (heads_last(bsz, h, m, d, q, q.dtype) for _ in range(2))
    ds_p = torch.empty(bsz, h, m, n, device=q.device, dtype=b_pos.dtype) if grad_b_pos else None
    ds_n = torch.empty(bsz, h, m, n, device=q.device, dtype=b_neg.dtype) if grad_b_neg else None
    ins, strides, switches = _input_args(q, k, v, q_neg, v_neg, b_pos, b_neg)
    ins += (grad_out, lse_p, lse_n, delta_p, delta_n, a)
    strides += _strides(grad_out)
    cfgs = launch_configs(capability or capability_of(q.device), q.dtype, d)
    kv, qc = cfgs['backward_kv'], cfgs['backward_q']
    dk_, dv_, dvn_, dq_, dqn_ = (t.transpose(1, 2) for t in (dk, dv, dv_neg, dq, dq_neg))  # [B, H, L, d]
    maps = (dq_ if ds_p is None else ds_p, dq_ if ds_n is None else ds_n)
    store = dict(STORE_DSP=ds_p is not None, STORE_DSN=ds_n is not None)
    with device_guard(q.device):
        launch(
            Launch(
                _bwd_kv_kernel,
                (triton.cdiv(n, kv.block_n), bsz * h),
                (*ins, dk_, dv_, dvn_, *strides, *_strides(dk_), h, m, n, scale),
                dict(switches, D=d, **_tiles(kv)),
            )
        )
        launch(
            Launch(
                _bwd_q_kernel,
                (triton.cdiv(m, qc.block_m), bsz * h),
                (*ins, dq_, dqn_, *maps, *strides, *_strides(dq_), h, m, n, scale),
                dict(switches, **store, D=d, **_tiles(qc)),
            )
        )
    g_bp = None if ds_p is None else reduce_to(ds_p, b_pos.shape).to(b_pos.dtype)
    del ds_p
    g_bn = None if ds_n is None else reduce_to(ds_n, b_neg.shape).to(b_neg.dtype)
    return dq, dk, dv, dq_neg, dv_neg, d_alpha, g_bp, g_bn
