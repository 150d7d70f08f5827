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

``α`` is one unconstrained learnable scalar per head, initialised to
:data:`~dna_mm.family.NEGATIVE_INIT`'s ``alpha`` (the authors' value); the branches are
added. An ``attn_bias`` ``b`` enters both branches' logits,
``softmax(s Q+ K^T + b) V+ + α softmin(s Q- K^T + b) V-``, or a pair ``(b_pos, b_neg)`` gives
each its own (ViTDet's relative positions of ``Q+`` and ``Q-``); an exclusion ``attn_mask`` is
added to both after the softmin sign, so a masked key leaves both branches (:mod:`.functional`).

Fused route, ``kernel`` fixed at construction: ``'sdpa'``, one ``scaled_dot_product_attention``
call per branch (softmin as SDPA on ``-Q-`` with ``m - b_neg``), ``α`` applied to its output;
``'sdpa_2h'``, both branches in one SDPA call over ``2H`` heads (``Q = [Q+, -Q-]``, ``K = [K, K]``,
``V = [V+, α V-]``, the two halves of the output added: :func:`.functional.sdpa_pair`);
``'sdpa_stacked'``, both in one SDPA call over ``2M`` queries (``Q = [Q+; -Q-]``,
``V = [V+, V-]``, the two diagonal blocks of the output kept: :func:`.functional.sdpa_stacked`;
for short sequences); ``'triton'``, both branches in one Triton kernel
(:func:`dna_mm.ops.dna_attention`: each ``K`` tile loaded once, two online-softmax accumulators)
where no attention dropout applies and there are queries and keys (no queries or no keys: SDPA,
the same function). Eager route (``return_attn=True`` or ``fused_attn=False``):
maps ``{'pos': softmax map, 'neg': softmin map}`` (``[B, H, M, N]``, before dropout).

Parameter layout: ``qkv`` = ``Linear(C, 3C)`` with chunks ``[Q+, K, V+]`` (exactly timm's
``Attention.qkv``, so softmax checkpoints load unchanged), ``q_neg`` = ``Q-`` and ``v_neg`` =
``V-`` (``Linear(C, C)`` each, where the variant has them), ``alpha [H]``, ``proj``.

Projections, every route (the **lean projection**, :meth:`DnAAttention.lean_project`): the heads
of one input come out of one GEMM, ``[Q-, Q+, K, V+, V-] = x [W_q-; W_qkv; W_v-]ᵀ + b`` split by
one reshape (:func:`.functional.linear_heads`; a cross-attention: one GEMM for the queries' input
over the rows of ``Q-, Q+``, one for the context over ``K, V+, V-``). Row by row these are the
three projections' own dot products, so the heads are the formula's: every host form, attend
hook and the eager route see ``Q-`` and ``V-`` as they are. The weights are read, not called, so
this runs only where each projection is a plain ``nn.Linear`` that no hook would see called
(:meth:`DnAAttention.projects_lean`); otherwise each projection is called as a module, as a LoRA
layer or a hook needs (:meth:`DnAAttention.module_project`). One attention's forward + backward
(``[4, 197, 192]``, 3 heads, Q±V±) runs 69 top-level operators this way against 101 with the
projections called (softmax: 51), and 26 computing ones against 33
(``tools/benchmarks/benchmark_operators.py``).

The softmin sign and ``α`` stay on the activations (``SDPA(-Q-, …)``, ``pos + α · neg``): folded
into the weights instead (``-W_q-``, ``α W_v-``, which a GEMM over the rows gives for free) they
cost more operators than they save, 78 top-level and 34 computing: each is applied to a weight
*and* a bias, ``α``'s gradient needs a product and a reduction for each, and ``α`` must be
repeated over its head's rows; on the activations the sign is one negation and ``α`` one product
beside the add the branches need anyway.
"""

from __future__ import annotations

from typing import Optional

import torch
from mmengine.registry import MODELS
from torch import Tensor, nn

from ...family import DNA_DEFAULT_VARIANT, DNA_VARIANTS, NEGATIVE_INIT, canonical_variant
from . import functional as AF
from .base import AttentionBase, BranchHeads, CrossAttentionMixin, MixingWeight, checked_kernel, has_tokens

#: the heads :meth:`DnAAttention.project` gives, in the formula's order
HEADS = ('q', 'k', 'v', 'q_neg', 'v_neg')
#: the fused routes of :class:`DnAAttention` (``kernel``)
KERNELS = ('sdpa', 'sdpa_2h', 'sdpa_stacked', 'triton')


#: PyTorch's global module hooks (``torch.nn.modules.module.register_module_*_hook``): the dicts
#: ``Module.__call__`` reads, read here the same way
_GLOBAL_HOOKS = tuple(
    getattr(torch.nn.modules.module, name, {})
    for name in (
        '_global_forward_hooks',
        '_global_forward_pre_hooks',
        '_global_backward_hooks',
        '_global_backward_pre_hooks',
    )
)


def called_by_hooks(layer: nn.Module) -> bool:
    """Calling ``layer`` would run more than its class's ``forward``: a hook of its own (forward,
    forward pre-, backward), a global module hook, or a ``forward`` set on the instance."""
    own = (layer._forward_hooks, layer._forward_pre_hooks, layer._backward_hooks, layer._backward_pre_hooks)
    return any(own) or 'forward' in vars(layer) or any(_GLOBAL_HOOKS)


@MODELS.register_module()
class DnAAttention(AttentionBase):
    """DnA self-attention (default variant ``qpm_vpm``, the paper's Q±V±).

    Args:
        embed_dims: Token width ``C``.
        num_heads: Number of heads ``H``.
        qkv_bias: Bias in ``qkv``, ``q_neg`` and ``v_neg``.
        variant: One of :data:`~dna_mm.family.DNA_VARIANTS` (or the paper's name, e.g. ``'Q±V±'``).
        alpha_init: Initial value of every ``α_h`` (default: :data:`~dna_mm.family.NEGATIVE_INIT`).
        kernel: Fused route: ``'sdpa'`` (two ``scaled_dot_product_attention`` calls),
            ``'sdpa_2h'`` (one call over ``2H`` heads, both branches; the same function),
            ``'sdpa_stacked'`` (one call over the queries of both branches stacked; the same
            function) or
            ``'triton'`` (the fused two-branch kernel, :mod:`dna_mm.ops`: head dims 32 / 64 /
            128, CUDA of compute capability 8.0+ or the CPU interpreter; refused here, with
            the reason, where it cannot run).
        **kwargs: See :class:`~dna_mm.models.attention.base.AttentionBase`.
    """

    has_negative_branch = True
    short_name = 'dna'
    label = 'DnA (Q±V±)'  # its default variant
    map_names = ('pos', 'neg')

    @classmethod
    def branch_heads(cls) -> dict[str, BranchHeads]:
        """``pos`` reads ``Q+, K, V+`` (``q, k, v``), ``neg`` reads ``Q-, K, V-`` (``q_neg, k,
        v_neg``; the tensors ``q`` / ``v`` themselves where the variant has no ``Q-`` / ``V-``)."""
        return {'pos': BranchHeads(), 'neg': BranchHeads(q='q_neg', v='v_neg')}

    def __init__(
        self,
        embed_dims: int,
        num_heads: int = 8,
        qkv_bias: bool = True,
        variant: str = DNA_DEFAULT_VARIANT,
        alpha_init: float = NEGATIVE_INIT.alpha,
        kernel: str = 'sdpa',
        **kwargs,
    ) -> None:
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, **kwargs)
        self.kernel = checked_kernel('DnAAttention', kernel, KERNELS, self.head_dim)
        self.variant = canonical_variant(variant)
        sep_q, sep_v, learn_alpha = DNA_VARIANTS[self.variant]
        dd = self.factory_kwargs
        self.q_neg = nn.Linear(embed_dims, embed_dims, bias=qkv_bias, **dd) if sep_q else None
        # V- reads the values (vdim wide)
        self.v_neg = nn.Linear(self.vdim, embed_dims, bias=qkv_bias, **dd) if sep_v else None
        self.alpha = nn.Parameter(torch.full((num_heads,), float(alpha_init), **dd)) if learn_alpha else None

    def project(
        self, x: Tensor, context: Optional[Tensor] = None, value: Optional[Tensor] = None
    ) -> dict[str, Tensor]:
        """The formula's heads ``q, k, v, q_neg, v_neg`` (``Q-`` from ``x``, ``V-`` from the values'
        input; the shared ``Q`` / ``V`` where the variant has no separate projection): one GEMM
        per distinct input (:meth:`lean_project`) where the projections are plain, else each
        projection called as a module (:meth:`module_project`). The same heads either way."""
        if self.projects_lean():
            return self.lean_project(x, context, value)
        return self.module_project(x, context, value)

    def projections(self) -> list[tuple[tuple[str, ...], nn.Linear]]:
        """Each projection with the heads of its output rows (``C`` rows a head), in the rows'
        order of :meth:`lean_project`: ``Q-``, then ``qkv`` (or ``q_proj``, ``k_proj``,
        ``v_proj``), then ``V-``. Each input's heads are neighbours in it (the queries' ``Q-, Q+``,
        the keys' ``K``, the values' ``V+, V-``), so each input takes one GEMM."""
        if self.packed_projections:
            shared = [(('q', 'k', 'v'), self.qkv)]
        else:
            shared = [(('q',), self.q_proj), (('k',), self.k_proj), (('v',), self.v_proj)]
        q_neg = [] if self.q_neg is None else [(('q_neg',), self.q_neg)]
        v_neg = [] if self.v_neg is None else [(('v_neg',), self.v_neg)]
        return q_neg + shared + v_neg

    def projects_lean(self) -> bool:
        """:meth:`lean_project` computes what the projections' calls would: each is a plain
        ``nn.Linear`` (no subclass, e.g. a LoRA layer) that nothing would see called (no hook of
        its own or global, no ``forward`` set on it), and all have a bias or none has."""
        layers = [layer for _, layer in self.projections()]
        if any(type(layer) is not nn.Linear or called_by_hooks(layer) for layer in layers):
            return False
        return all((layer.bias is None) == (layers[0].bias is None) for layer in layers)

    def lean_project(
        self, x: Tensor, context: Optional[Tensor] = None, value: Optional[Tensor] = None
    ) -> dict[str, Tensor]:
        """The heads by one GEMM per distinct input (:func:`.functional.linear_heads`) over the rows
        of the heads it gives: self-attention all five, ``x [W_q-; W_qkv; W_v-]ᵀ``; a cross-attention
        ``Q-, Q+`` from ``x`` and ``K, V+, V-`` from ``context`` (with ``value``: ``K`` from
        ``context``, ``V+, V-`` from ``value``), in the order of :meth:`projections`. The weights
        are read, not called: only where :meth:`projects_lean`."""
        keys = x if context is None else context
        values = keys if value is None else value
        reads = dict(q_neg=x, q=x, k=keys, v=values, v_neg=values)
        heads: dict[str, Tensor] = {}
        for pieces in self.rows_by_input(context is not None, value is not None):
            weights, biases, names = [], [], []
            for layer, first, stop, piece_names in pieces:  # rows first·C … stop·C of layer
                rows = slice(first * self.embed_dims, stop * self.embed_dims)
                whole = rows.start == 0 and rows.stop == layer.out_features
                weights.append(layer.weight if whole else layer.weight[rows])
                biases.append(layer.bias if whole or layer.bias is None else layer.bias[rows])
                names += piece_names
            has_bias = biases[0] is not None  # all or none (projects_lean)
            outs = AF.linear_heads(
                reads[names[0]], weights, biases if has_bias else None, self.num_heads, self.head_dim
            )
            heads.update((name, outs[i]) for i, name in enumerate(names))  # each [B, H, M or N, d]
        heads.setdefault('q_neg', heads['q'])  # a variant without its own Q- / V- shares Q / V
        heads.setdefault('v_neg', heads['v'])
        return {name: heads[name] for name in HEADS}

    def rows_by_input(
        self, own_keys: bool, own_values: bool
    ) -> list[list[tuple[nn.Linear, int, int, list[str]]]]:
        """The projection rows each distinct input goes through, in :meth:`projections`' order: per input
        a list of ``(layer, first, stop, heads)``, rows ``first·C … stop·C`` of ``layer`` giving
        ``heads``. A new input starts at ``K`` when the keys have their own (``own_keys``: a
        context) and at ``V+`` when the values have (``own_values``)."""
        starts = dict(k=own_keys, v=own_values)
        inputs: list[list[tuple[nn.Linear, int, int, list[str]]]] = []
        for names, layer in self.projections():
            for i, name in enumerate(names):
                if not inputs or starts.get(name, False):
                    inputs.append([])
                pieces = inputs[-1]
                if pieces and pieces[-1][0] is layer:  # the next C rows of the same layer
                    held, first, _, held_names = pieces[-1]
                    pieces[-1] = (held, first, i + 1, held_names + [name])
                else:
                    pieces.append((layer, i, i + 1, [name]))
        return inputs

    def module_project(
        self, x: Tensor, context: Optional[Tensor] = None, value: Optional[Tensor] = None
    ) -> dict[str, Tensor]:
        """The heads with every projection called as a module (a LoRA wrapper or a hook on one
        sees each of its inputs): ``Q+, K, V+`` (:meth:`AttentionBase.project`), ``Q-`` and ``V-``."""
        heads = super().project(x, context, value)  # [B, H, M, d], [B, H, N, d] × 2
        src = value if value is not None else (x if context is None else context)
        heads['q_neg'] = heads['q'] if self.q_neg is None else self.split_heads(self.q_neg(x))
        heads['v_neg'] = heads['v'] if self.v_neg is None else self.split_heads(self.v_neg(src))
        return heads

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: AF.BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """DnA on the formula's heads ``q, k, v, q_neg, v_neg``; ``attn_bias``: one bias for
        both branches or ``(b_pos, b_neg)``."""
        if not eager and self.kernel == 'triton' and self.dropout_p == 0.0 and has_tokens(heads):
            return self.fused_kernel(heads, attn_mask, attn_bias), {}
        b_pos, b_neg = AF.split_bias(attn_bias, type(self).__name__)
        q, k, v, q_neg, v_neg = (heads[name] for name in HEADS)
        if not eager and self.kernel in ('sdpa_2h', 'sdpa_stacked'):
            one_call = AF.sdpa_pair if self.kernel == 'sdpa_2h' else AF.sdpa_stacked
            out = one_call(
                q, k, v, q_neg, v_neg, self.alpha, attn_mask, self.scale, self.dropout_p, b_pos, b_neg
            )
            return out, {}  # [B, H, M, d]
        pos, a_pos = self.softmax_branch(q, k, v, attn_mask, b_pos, eager)
        neg, a_neg = self.softmax_branch(q_neg, k, v_neg, attn_mask, b_neg, eager, negative=True)
        maps = {'pos': a_pos, 'neg': a_neg} if eager else {}
        if self.alpha is None:
            return pos + neg, maps
        # α on the branch sum: a product and the add (not addcmul, whose backward multiplies the
        # whole negative branch by its scalar ``value`` once more)
        return pos + neg * self.alpha.to(neg).view(1, -1, 1, 1), maps  # [B, H, M, d]

    def neg_coefficient(self) -> Tensor:
        """``α_h`` ``[1, H, 1, 1]`` (1 for the variant without α)."""
        if self.alpha is None:
            return super().neg_coefficient()
        return self.alpha.reshape(1, -1, 1, 1)

    def own_heads(self) -> tuple[str, ...]:
        """``q_neg`` / ``v_neg`` where the variant has its own ``Q-`` / ``V-`` projection."""
        projections = (('q_neg', self.q_neg), ('v_neg', self.v_neg))
        return tuple(name for name, layer in projections if layer is not None)

    def mixing_weights(self) -> dict[str, MixingWeight]:
        """``{'alpha': α [H]}`` where the variant learns ``α`` (its start: the authors',
        :data:`~dna_mm.family.NEGATIVE_INIT`); ``{}`` for ``apm``."""
        return {} if self.alpha is None else {'alpha': MixingWeight(self.alpha, NEGATIVE_INIT.alpha)}

    def negative_variant(self) -> str:
        """Its :attr:`variant`: the negative-branch keys it has."""
        return self.variant

    def fused_kernel(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: AF.BiasArg
    ) -> Tensor:
        """Both branches in the fused Triton kernel; an exclusion mask ``m`` joins the biases as
        ``(b+ + m, b- - m)`` (added after the softmin sign)."""
        from ...ops import dna_attention

        b_pos, b_neg = AF.split_bias(attn_bias, type(self).__name__)
        mask = AF.additive_mask(attn_mask, torch.float32)
        if mask is not None:
            b_pos = mask if b_pos is None else b_pos + mask
            b_neg = -mask if b_neg is None else b_neg - mask
        bias = (b_pos, b_neg) if b_pos is not None or b_neg is not None else None
        return dna_attention(*(heads[name] for name in HEADS), self.alpha, bias, self.scale)

    def extra_repr(self) -> str:
        kernel = f', kernel={self.kernel!r}' if self.kernel != 'sdpa' else ''
        return f'{super().extra_repr()}, variant={self.variant!r}{kernel}'


@MODELS.register_module()
class DnACrossAttention(CrossAttentionMixin, DnAAttention):
    """DnA cross-attention: ``Q±`` from ``query [B, M, C]``, ``K, V±`` from ``context [B, N, C]``
    (learnable probes as in VisCoP). Same parameters and arguments as :class:`DnAAttention`."""
