"""DnA: Denoising Attention (softmax branch + α-weighted softmin branch sharing the keys).

Per head ``h``, with ``s = d ** -0.5`` on both branches (the paper, Sec. 3.2; as the authors' code):

=============  ====================================================================  ===========
variant        formula                                                               extra params
=============  ====================================================================  ===========
``apm``        ``[softmax(s Q K^T) + softmin(s Q K^T)] V``                      (A±)    0
``apm_alpha``  ``[softmax(s Q K^T) + α_h softmin(s Q K^T)] V``                  (Â±)    H
``qpm_v``      ``[softmax(s Q+ K^T) + α_h softmin(s Q- K^T)] V``                (Q±V)   C² + C + H
``q_vpm``      ``softmax(s Q K^T) V+ + α_h softmin(s Q K^T) V-``                (QV±)   C² + C + H
``qpm_vpm``    ``softmax(s Q+ K^T) V+ + α_h softmin(s Q- K^T) V-``             (Q±V±)  2C² + 2C + H
=============  ====================================================================  ===========

``α`` is one unconstrained learnable scalar per head, initialised to 0.5; the branches are
added. Masks and biases (:mod:`.functional`): an ``attn_bias`` ``b`` enters both branches'
logits, ``softmax(s Q+ K^T + b) V+ + α softmin(s Q- K^T + b) V-``, or a pair ``(b_pos, b_neg)``
gives each branch its own (ViTDet's relative positions from ``Q+`` and from ``Q-``); an
exclusion ``attn_mask`` is added unchanged to both branches' logits *after* the softmin sign,
so a masked key (``False``, ``-inf``, ``-1e4``, ``finfo.min``) leaves both branches.

Fast path: each branch is one ``scaled_dot_product_attention`` call, the softmin branch as
SDPA on ``-Q-`` and ``α V-`` with ``m - b_neg`` as its mask (see :mod:`.functional`); where
``Q-`` / ``V-`` have their own projection, the sign and ``α`` are folded into its weights
(``O(C²)`` work per call instead of ``O(B·N·C)`` on the activations). ``kernel='triton'``
runs both branches in one fused Triton kernel instead (:func:`dna_mm.ops.dna_attention`:
each ``K`` tile loaded once, two online-softmax accumulators; CUDA, or the CPU interpreter);
the default ``'sdpa'`` is the two SDPA calls. The choice is fixed at construction (no run-time
timing, so ``torch.compile`` / export / FX see one graph); the kernel is used only where it
applies (no attention dropout while training), else SDPA. Eager path
(``return_attn=True`` or ``fused_attn=False``): explicit maps, returned as
``{'pos': softmax map, 'neg': softmin map}`` (``[B, H, M, N]``, before dropout).

Parameter layout: ``qkv`` = ``Linear(C, 3C)`` with chunks ``[Q+, K, V+]`` (exactly timm's
``Attention.qkv``, so softmax checkpoints load unchanged), ``q_neg`` = ``Q-`` and ``v_neg`` =
``V-`` (``Linear(C, C)`` each, where the variant has them), ``alpha [H]``, ``proj``.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from mmengine.registry import MODELS
from torch import Tensor, nn

from . import functional as AF
from .base import AttentionBase, CrossAttentionMixin, is_plain_linear

#: canonical variant name → (separate Q-, separate V-, learnable α)
DNA_VARIANTS: dict[str, tuple[bool, bool, bool]] = {
    'apm': (False, False, False),
    'apm_alpha': (False, False, True),
    'qpm_v': (True, False, True),
    'q_vpm': (False, True, True),
    'qpm_vpm': (True, True, True),
}
#: the paper's names, accepted as aliases
DNA_VARIANT_ALIASES: dict[str, str] = {
    'A±': 'apm',
    'Â±': 'apm_alpha',
    'Q±V': 'qpm_v',
    'QV±': 'q_vpm',
    'Q±V±': 'qpm_vpm',
}


def canonical_variant(variant: str) -> str:
    """``'Q±V±'`` / ``'qpm_vpm'`` → ``'qpm_vpm'``; a clear error for anything else."""
    name = DNA_VARIANT_ALIASES.get(variant, variant)
    if name not in DNA_VARIANTS:
        raise ValueError(
            f'unknown DnA variant {variant!r}; expected one of '
            f'{sorted(DNA_VARIANTS)} or {sorted(DNA_VARIANT_ALIASES)}'
        )
    return name


@MODELS.register_module()
class DnAAttention(AttentionBase):
    """DnA self-attention (default variant ``qpm_vpm``, the paper's Q±V±).

    Args:
        embed_dims: Token width ``C``.
        num_heads: Number of heads ``H``.
        qkv_bias: Bias in ``qkv``, ``q_neg`` and ``v_neg``.
        variant: One of :data:`DNA_VARIANTS` (or the paper's name, e.g. ``'Q±V±'``).
        alpha_init: Initial value of every ``α_h``.
        kernel: Fast path: ``'sdpa'`` (two ``scaled_dot_product_attention`` calls) or
            ``'triton'`` (the fused two-branch kernel, :mod:`dna_mm.ops`: head dims 32 / 64 /
            128, CUDA of compute capability 8.0+ or the CPU interpreter; refused here, with
            the reason, where it cannot run).
        **kwargs: See :class:`~dna_mm.models.attention.base.AttentionBase`.
    """

    def __init__(
        self,
        embed_dims: int,
        num_heads: int = 8,
        qkv_bias: bool = True,
        variant: str = 'qpm_vpm',
        alpha_init: float = 0.5,
        kernel: str = 'sdpa',
        **kwargs,
    ) -> None:
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, **kwargs)
        if kernel not in ('sdpa', 'triton'):
            raise ValueError(f"DnAAttention: kernel must be 'sdpa' or 'triton', got {kernel!r}")
        if kernel == 'triton':
            from ...ops.dna_attention import kernel_unusable_reason

            reason = kernel_unusable_reason(self.head_dim)
            if reason is not None:
                raise ValueError(f"DnAAttention: kernel='triton' cannot run: {reason}; use kernel='sdpa'")
        self.kernel = kernel
        self.variant = canonical_variant(variant)
        sep_q, sep_v, learn_alpha = DNA_VARIANTS[self.variant]
        dd = self.factory_kwargs
        self.q_neg = nn.Linear(embed_dims, embed_dims, bias=qkv_bias, **dd) if sep_q else None
        self.v_neg = nn.Linear(embed_dims, embed_dims, bias=qkv_bias, **dd) if sep_v else None
        self.alpha = nn.Parameter(torch.full((num_heads,), float(alpha_init), **dd)) if learn_alpha else None

    def project(
        self, x: Tensor, context: Optional[Tensor] = None, value: Optional[Tensor] = None
    ) -> dict[str, Tensor]:
        """``Q+, K, V+`` and ``Q-`` (from ``x``), ``V-`` (from the values' input), or the shared
        ``Q`` / ``V`` where the variant has no separate projection."""
        q, k, v = self.project_qkv(x, context, value)  # [B, H, M, d], [B, H, N, d] × 2
        q_neg = q if self.q_neg is None else self.split_heads(self.q_neg(x))
        src = _value_source(x, context, value)
        v_neg = v if self.v_neg is None else self.split_heads(self.v_neg(src))
        return dict(q=q, k=k, v=v, q_neg=q_neg, v_neg=v_neg)

    def sdpa_heads(
        self, x: Tensor, context: Optional[Tensor], value: Optional[Tensor] = None
    ) -> dict[str, Tensor]:
        """The fast path's heads: ``Q+, K, V+``, ``q_min = -Q-`` and ``v_min = α V-``.

        A separate ``Q-`` is computed as ``x (-W)^T - b`` and a separate ``V-`` as
        ``src (α_c W)^T + α_c b`` (``α_c``: ``α`` repeated over each head's channels), so the
        sign and ``α`` cost ``O(C²)`` instead of a pass over ``[B, H, N, d]``. Shared ``Q`` / ``V``
        (variants without that projection), and projections that are not a plain hook-free
        ``nn.Linear`` (a LoRA wrapper, an analysis hook), get them on the activations instead.
        """
        q, k, v = self.project_qkv(x, context, value)  # [B, H, M, d], [B, H, N, d] × 2
        src = _value_source(x, context, value)
        if is_plain_linear(self.q_neg):
            b = self.q_neg.bias
            q_min = self.split_heads(F.linear(x, -self.q_neg.weight, None if b is None else -b))
        else:
            q_min = -(q if self.q_neg is None else self.split_heads(self.q_neg(x)))
        if self.alpha is not None and is_plain_linear(self.v_neg):
            a = self.alpha.repeat_interleave(self.head_dim)  # [C]
            w, b = self.v_neg.weight * a[:, None], self.v_neg.bias
            v_min = self.split_heads(F.linear(src, w, None if b is None else b * a))
        else:
            v_min = v if self.v_neg is None else self.split_heads(self.v_neg(src))
            if self.alpha is not None:
                v_min = v_min * self.alpha.to(v_min.dtype).view(1, -1, 1, 1)
        return dict(q=q, k=k, v=v, q_min=q_min, v_min=v_min)

    def attend(
        self,
        x: Tensor,
        context: Optional[Tensor],
        attn_mask: Optional[Tensor],
        return_attn: bool,
        attn_bias: AF.BiasArg = None,
        value: Optional[Tensor] = None,
    ) -> tuple[Tensor, dict[str, Tensor]]:
        if return_attn or not self.fused_attn or self._use_triton():  # via core()
            return super().attend(x, context, attn_mask, return_attn, attn_bias, value)
        out = AF.two_branch_sdpa(
            **self.sdpa_heads(x, context, value),
            attn_mask=attn_mask,
            scale=self.scale,
            dropout_p=self.dropout_p,
            attn_bias=attn_bias,
        )  # [B, H, M, d]
        return self.merge_heads(out), {}

    def core(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        attn_mask: Optional[Tensor] = None,
        return_attn: bool = False,
        attn_bias: AF.BiasArg = None,
        q_neg: Optional[Tensor] = None,
        v_neg: Optional[Tensor] = None,
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """DnA on the formula's heads ``Q+, K, V+, Q-, V-`` (``Q-`` / ``V-`` default to
        ``Q+`` / ``V+``); the fast path applies the sign and ``α`` to these activations.
        ``attn_bias``: one bias for both branches or ``(b_pos, b_neg)``."""
        q_neg = q if q_neg is None else q_neg
        v_neg = v if v_neg is None else v_neg
        alpha = None if self.alpha is None else self.alpha.to(v_neg.dtype).view(1, -1, 1, 1)
        if self.fused_attn and not return_attn and self._use_triton():
            return self._triton_core(q, k, v, q_neg, v_neg, attn_mask, attn_bias), {}
        if self.fused_attn and not return_attn:
            v_min = v_neg if alpha is None else v_neg * alpha
            return AF.two_branch_sdpa(
                q, k, v, -q_neg, v_min, attn_mask, self.scale, self.dropout_p, attn_bias=attn_bias
            ), {}
        b_pos, b_neg = AF.split_bias(attn_bias, type(self).__name__)
        pos, a_pos = AF.eager(q, k, v, attn_mask, self.scale, self.attn_drop, bias=b_pos)
        neg, a_neg = AF.eager(
            q_neg, k, v_neg, attn_mask, self.scale, self.attn_drop, negative=True, bias=b_neg
        )
        maps = {'pos': a_pos, 'neg': a_neg}
        return (pos + neg if alpha is None else torch.addcmul(pos, neg, alpha)), maps  # [B, H, M, d]

    def _use_triton(self) -> bool:
        return self.kernel == 'triton' and self.dropout_p == 0.0

    def _triton_core(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        q_neg: Tensor,
        v_neg: Tensor,
        attn_mask: Optional[Tensor],
        attn_bias: AF.BiasArg,
    ) -> Tensor:
        """The fused kernel; an exclusion mask ``m`` joins the biases as ``(b+ + m, b- - m)``
        (added after the softmin sign)."""
        from ...ops import dna_attention

        b_pos, b_neg = AF.split_bias(attn_bias, type(self).__name__)
        mask = AF.additive_mask(attn_mask, torch.float32)
        if mask is not None:
            b_pos = mask if b_pos is None else b_pos + mask
            b_neg = -mask if b_neg is None else b_neg - mask
        return dna_attention(
            q,
            k,
            v,
            q_neg,
            v_neg,
            self.alpha,
            (b_pos, b_neg) if b_pos is not None or b_neg is not None else None,
            self.scale,
        )

    def extra_repr(self) -> str:
        kernel = ", kernel='triton'" if self.kernel == 'triton' else ''
        return f'{super().extra_repr()}, variant={self.variant!r}{kernel}'


def _value_source(x: Tensor, context: Optional[Tensor], value: Optional[Tensor]) -> Tensor:
    """The tokens values are projected from: ``value``, else ``context``, else ``x``."""
    return value if value is not None else (x if context is None else context)


@MODELS.register_module()
class DnACrossAttention(CrossAttentionMixin, DnAAttention):
    """DnA cross-attention: ``Q±`` from ``query [B, M, C]``, ``K, V±`` from ``context [B, N, C]``
    (learnable probes as in VisCoP). Same parameters and arguments as :class:`DnAAttention`."""
