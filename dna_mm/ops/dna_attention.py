"""``dna_attention``: the fused two-branch kernel as a PyTorch operator (formula in
:mod:`.triton_dna`).

Two custom operators, ``torch.ops.dna_mm.dna_attention_fwd`` and ``dna_attention_bwd``, each
with a fake (meta) implementation, joined by a registered autograd formula: eager calls run the
Triton kernels, while ``torch.compile(fullgraph=True)``, ``torch.export`` and ``meta``-device
runs trace through them as single graph nodes. Triton is imported only when a kernel runs.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import torch
from torch import Tensor

from ..family import BiasArg, split_bias
from .kernel_config import HEAD_DIMS, takes_short_kernels

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _interpreting() -> bool:
    """Triton's interpreter is on: ``TRITON_INTERPRET=1`` when :mod:`.triton_dna` was first
    imported (its kernels were then built for the interpreter) and still set (it is read at
    launch too). Imports triton; ``False`` without it."""
    try:
        from . import triton_dna
    except ImportError:  # no triton in this environment
        return False
    return triton_dna.INTERPRETED and os.environ.get('TRITON_INTERPRET') == '1'


def kernel_available(device: torch.device) -> bool:
    """Whether the Triton kernel can run on ``device``: a CUDA device of compute capability
    8.0 or newer, any device under the interpreter, and ``meta`` (shapes only)."""
    device = torch.device(device)
    if device.type == 'meta':
        return True
    if _interpreting():
        return True
    if device.type != 'cuda' or not torch.cuda.is_available():
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.get_device_capability(device) >= (8, 0)


def kernel_unusable_reason(head_dim: int) -> Optional[str]:
    """Why the kernel cannot run in this environment for ``head_dim`` (``None``: it can), for
    the attention modules' ``kernel='triton'`` check at construction."""
    if head_dim not in HEAD_DIMS:
        return f'head dim {head_dim} is not one of the kernel\'s {HEAD_DIMS}'
    try:
        import triton  # noqa: F401
    except ImportError:
        return 'triton is not installed'
    if _interpreting():
        return None
    if not torch.cuda.is_available():
        return 'no CUDA device (the kernel runs on CPU tensors only under TRITON_INTERPRET=1, for tests)'
    if torch.cuda.get_device_capability() < (8, 0):
        return f'CUDA device of compute capability {torch.cuda.get_device_capability()} (needs 8.0 or newer)'
    return None


# -- operators ---------------------------------------------------------------------------------
#: the kernel's inputs, as the operators' schemas name them
_INPUTS = (
    'Tensor q, Tensor k, Tensor v, Tensor q_neg, Tensor v_neg, Tensor alpha, Tensor? b_pos, Tensor? b_neg'
)


@torch.library.custom_op(
    'dna_mm::dna_attention_fwd',
    mutates_args=(),
    schema=f'({_INPUTS}, float scale, bool for_backward) -> (Tensor, Tensor, Tensor, Tensor, Tensor)',
)
def _fwd_op(*inputs: Any) -> tuple[Tensor, ...]:
    """``O`` as ``[B, M, H, d]`` (inputs' dtype), and for the backward ``O+, O- [B, H, M, d]``,
    ``lse+, lse- [B, H, M]`` (fp32; empty when ``for_backward`` is false)."""
    device = inputs[0].device
    if not kernel_available(device):
        raise RuntimeError(
            f'dna_attention: the Triton kernel cannot run on {device} tensors (it needs CUDA '
            'of compute capability 8.0+, or TRITON_INTERPRET=1 set before importing dna_mm.ops); '
            "use the attention modules' kernel='sdpa' on this device"
        )
    from .triton_dna import forward

    return forward(*inputs)


@_fwd_op.register_fake
def _fwd_fake(q, k, v, q_neg, v_neg, alpha, b_pos, b_neg, scale, for_backward):
    b, h, m, d = q.shape
    f32 = dict(dtype=torch.float32)
    if for_backward:
        return (q.new_empty(b, m, h, d), q.new_empty(b, h, m, d, **f32), q.new_empty(b, h, m, d, **f32)) + (
            q.new_empty(b, h, m, **f32),
            q.new_empty(b, h, m, **f32),
        )
    return (q.new_empty(b, m, h, d),) + tuple(q.new_empty(0, **f32) for _ in range(4))


@torch.library.custom_op(
    'dna_mm::dna_attention_bwd',
    mutates_args=(),
    schema=f'(Tensor grad_out, {_INPUTS}, Tensor o_pos, Tensor o_neg, Tensor lse_p, Tensor lse_n, '
    'float scale, bool grad_b_pos, bool grad_b_neg) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, '
    'Tensor, Tensor)',
)
def _bwd_op(grad_out: Tensor, *inputs: Any) -> tuple[Tensor, ...]:
    """``dQ+, dQ- [B, M, H, d]``, ``dK, dV+, dV- [B, N, H, d]``, ``dα [H]`` and the bias
    gradients in the biases' shapes and dtypes (empty where not asked for); ``grad_out`` is
    ``[B, M, H, d]``."""
    from .triton_dna import backward

    *grads, g_bp, g_bn = backward(grad_out.transpose(1, 2), *inputs)
    return (*grads, *(inputs[0].new_empty(0) if g is None else g for g in (g_bp, g_bn)))


@_bwd_op.register_fake
def _bwd_fake(
    grad_out, q, k, v, q_neg, v_neg, alpha, b_pos, b_neg, o_pos, o_neg, lse_p, lse_n, scale, gbp, gbn
):
    def bl(t: Tensor) -> Tensor:  # [B, H, L, d] → an empty [B, L, H, d]
        return t.new_empty(t.shape[0], t.shape[2], t.shape[1], t.shape[3])

    return (bl(q), bl(k), bl(v), bl(q_neg), bl(v_neg), alpha.new_empty(alpha.shape)) + (
        b_pos.new_empty(b_pos.shape) if gbp else q.new_empty(0),
        b_neg.new_empty(b_neg.shape) if gbn else q.new_empty(0),
    )


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, q_neg, v_neg, alpha, b_pos, b_neg, scale, for_backward = inputs
    _, o_pos, o_neg, lse_p, lse_n = output
    ctx.save_for_backward(q, k, v, q_neg, v_neg, alpha, b_pos, b_neg, o_pos, o_neg, lse_p, lse_n)
    ctx.scale, ctx.for_backward = scale, for_backward


def _backward(ctx, grad_out: Tensor, *_unused: Tensor):
    if not ctx.for_backward:
        raise RuntimeError('dna_attention: backward through a forward run without gradients enabled')
    q, k, v, q_neg, v_neg, alpha, b_pos, b_neg, o_pos, o_neg, lse_p, lse_n = ctx.saved_tensors
    need = ctx.needs_input_grad
    dq, dk, dv, dq_neg, dv_neg, d_alpha, g_bp, g_bn = _bwd_op(
        grad_out, q, k, v, q_neg, v_neg, alpha, b_pos, b_neg, o_pos, o_neg, lse_p, lse_n, ctx.scale,
        b_pos is not None and need[6], b_neg is not None and need[7],
    )  # fmt: skip
    t = lambda g: g.transpose(1, 2)  # noqa: E731  [B, L, H, d] → [B, H, L, d]
    return (
        t(dq),
        t(dk),
        t(dv),
        t(dq_neg),
        t(dv_neg),
        d_alpha,
        g_bp if b_pos is not None and need[6] else None,
        g_bn if b_neg is not None and need[7] else None,
        None,
        None,
    )


_fwd_op.register_autograd(_backward, setup_context=_setup_context)


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
            ``(b_pos + m, b_neg - m)``; a query whose keys are all excluded gets 0 (output and
            gradients), as ``scaled_dot_product_attention`` gives.
        scale: ``s`` (default ``d ** -0.5``).

    Sequences of at most :data:`~.kernel_config.SHORT_TOKENS` queries and keys without a bias run
    the packed kernel of :mod:`.triton_short` (operator ``dna_mm::short_dna_fwd``), others the
    tiled one (``dna_mm::dna_attention_fwd``).

    Differentiable in every tensor argument (biases included). fp32 / fp16 / bf16 inputs read
    through their strides (any layout with unit last stride), fp32 accumulation; head dims 32,
    64, 128. The result is a ``[B, H, M, d]`` view of ``[B, M, H, d]`` storage (merging the
    heads is free).

    Raises:
        ValueError: shapes, dtypes or head dim do not fit; RuntimeError (when run): the
            tensors are on a device the kernel cannot run on.
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
    if len(dtypes) != 1 or q.dtype not in _DTYPES:
        raise ValueError(
            f'dna_attention: q, k, v, q_neg, v_neg must share one of fp32 / fp16 / '
            f'bf16, got {sorted(map(str, dtypes))}'
        )
    if alpha is None:
        alpha = torch.ones(h, device=q.device, dtype=torch.float32)
    if alpha.shape != (h,):
        raise ValueError(f'dna_attention: alpha must be [{h}], got {list(alpha.shape)}')
    b_pos, b_neg = split_bias(bias, 'dna_attention')
    inputs = (q, k, v, q_neg, v_neg, alpha, b_pos, b_neg)
    for_backward = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)
    scale = d**-0.5 if scale is None else float(scale)
    if takes_short_kernels(q.shape[2], k.shape[2], b_pos is not None or b_neg is not None):
        out = torch.ops.dna_mm.short_dna_fwd(q, k, v, q_neg, v_neg, alpha, scale)  # [B, M, H, d]
    else:
        out = torch.ops.dna_mm.dna_attention_fwd(*inputs, scale, for_backward)[0]
    return out.transpose(1, 2)
