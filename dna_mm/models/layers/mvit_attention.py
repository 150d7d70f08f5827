"""MMAction2 MViTv2's pooling attention (``MultiScaleAttention``) for any member that takes a
position bias (:class:`PoolingForm`): softmax, DnA, or your own.

The host, per head (``P_*`` = ``attention_pool``: a depthwise ``Conv3d`` over the token grid,
then a norm; the CLS token skips the convolution, not the norm)::

    Q, K, V = P_q(x W_q), P_k(x W_k), P_v(x W_v)
    out     = softmax(s Q Kᵀ + R(Q)) V  (+ Q with residual_pooling; not on the CLS row)

``R(Q)``: MViTv2's decomposed relative positions (``t``, ``h``, ``w`` tables; zero on the CLS
row and column), computed from the pooled, unscaled queries (:func:`mvit_rel_pos`). Every
head a member reads beyond ``q, k, v``
(:meth:`~dna_mm.models.attention.AttentionBase.extra_heads`, each taking the place of one of
them) is pooled like the head whose place it takes, by **its own pooling** ``pool_<head>`` /
``norm_<head>`` where the member computes it by a projection of its own
(:meth:`~dna_mm.models.attention.AttentionBase.own_heads`), else it is that head's pooled
tensor. DnA's form shares the pooled keys and gives the negative branch its own projections
and pooling (``pool_q_neg`` / ``norm_q_neg``, ``pool_v_neg`` / ``norm_v_neg``, where the
variant has ``Q-`` / ``V-``)::

    Q- = P_q-(x W_q-),   V- = P_v-(x W_v-)
    out = softmax(s Q+ Kᵀ + R(Q+)) V+ + α softmin(s Q- Kᵀ + R(Q-)) V-   (+ Q+, the host's residual)

The rel-pos term is a bias inside the formula (dna_mm's rule,
:mod:`dna_mm.models.attention.functional`): each branch's from its own queries
(:meth:`~dna_mm.models.attention.AttentionBase.position_bias`), tables shared, entering before
the softmin sign, as ViTDet's (:mod:`.vitdet_attention`). The residual ``+ Q`` is the host's
term and stays the first branch's queries ``q``. The output leaves through the member's
``project_out``: a gated member's gate reads the input at the pooled queries' tokens
(:meth:`PoolingForm.pooled_input`).

Initialising DnA from the host's softmax weights: the norm after pooling removes any scale of the
projection, so the paper's ``Q- = 1e-4·Q``, ``V- = -1e-4·V`` is applied to the pooled,
normalised ``Q-`` / ``V-`` that enter the attention: ``W_q- = W_q``, ``P_q-`` = ``P_q`` with its
norm's affine (weight and bias) times ``q_neg_scale`` (``V-``: ``v_neg_scale``), so
``Q- = 1e-4·Q`` and ``V- = -1e-4·V`` exactly (:func:`~dna_mm.models.fitting.adapt_pooled_attention`).

Keys: the host's (``qkv``, ``proj``, ``pool_{q,k,v}``, ``norm_{q,k,v}``, ``rel_pos_{h,w,t}``),
plus the member's own (DnA: ``q_neg``, ``v_neg``, ``alpha``) and the pooling of its own extra
heads (DnA: ``pool_{q,v}_neg`` / ``norm_{q,v}_neg``). :func:`from_host` builds the form of a
host module. With relative positions the form declares its bias (:meth:`PoolingForm.position_bias`):
a member that takes no position bias (Diff, Cog, or your own) is refused there, and runs in an
MViTv2 built with ``rel_pos_embed=False``.
"""

from __future__ import annotations

import functools
import math
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from mmaction.models.backbones.mvit import attention_pool
from mmcv.cnn import build_norm_layer
from torch import Tensor, nn

from ..attention import AttentionBase, build_attention
from ..attention.builder import AttnCfg
from ..attention.functional import BiasArg
from .forms import HostForm, PositionBias, host_name, refuse
from .positions import get_rel_pos


def mvit_rel_pos(
    q: Tensor,
    q_shape: Sequence[int],
    k_shape: Sequence[int],
    rel_pos_t: Tensor,
    rel_pos_h: Tensor,
    rel_pos_w: Tensor,
    with_cls_token: bool,
) -> Tensor:
    """MViTv2's decomposed spatio-temporal relative positions as a logit bias (the term
    MMAction2's ``add_decomposed_rel_pos`` adds to the logits, computed on the queries' device).

    ``b[(t, h, w), (t', h', w')] = q · Rt[t, t'] + q · Rh[h, h'] + q · Rw[w, w']`` with the
    **unscaled** pooled queries; the tables are resized and, when the query and key grids
    differ, indexed as :func:`~dna_mm.models.layers.positions.get_rel_pos` does.

    Args:
        q: ``[B, heads, (1 +) qt·qh·qw, d]`` (a CLS token first when ``with_cls_token``).
        q_shape, k_shape: Query and key grids ``(t, h, w)``.
        rel_pos_t, rel_pos_h, rel_pos_w: ``[L, d]`` tables.

    Returns:
        ``[B, heads, Nq, Nk]`` (``Nq``, ``Nk`` with the CLS token), zero on the CLS row and column.
    """
    (qt, qh, qw), (kt, kh, kw) = q_shape, k_shape
    rt, rh, rw = (
        get_rel_pos(a, b, table).to(q.dtype)  # [q_len, k_len, d]
        for a, b, table in ((qt, kt, rel_pos_t), (qh, kh, rel_pos_h), (qw, kw, rel_pos_w))
    )
    b, heads, _, d = q.shape
    grid = q[:, :, int(with_cls_token) :].reshape(b, heads, qt, qh, qw, d)
    rel_t = torch.einsum('bythwc,tkc->bythwk', grid, rt)  # [B, heads, qt, qh, qw, kt]
    rel_h = torch.einsum('bythwc,hkc->bythwk', grid, rh)  # [..., kh]
    rel_w = torch.einsum('bythwc,wkc->bythwk', grid, rw)  # [..., kw]
    bias = rel_t[..., :, None, None] + rel_h[..., None, :, None] + rel_w[..., None, None, :]
    bias = bias.reshape(b, heads, qt * qh * qw, kt * kh * kw)
    return F.pad(bias, (1, 0, 1, 0)) if with_cls_token else bias


def _pooling(
    dims: int, kernel: Sequence[int], stride: Sequence[int], norm_cfg: dict, **dd
) -> tuple[nn.Module, nn.Module]:
    """The host's pooling of one head: depthwise ``Conv3d`` (no bias, padding ``k // 2``) and its
    norm over ``dims`` channels."""
    conv = nn.Conv3d(
        dims,
        dims,
        tuple(kernel),
        stride=tuple(stride),
        padding=[k // 2 for k in kernel],
        groups=dims,
        bias=False,
    )
    return conv.to(**dd), build_norm_layer(norm_cfg, dims)[1].to(**dd)


class PoolingForm(HostForm):
    """MViTv2's pooling attention on a member: ``(x [B, (1 +) T·H·W, in_dims], in_size) →
    ([B, (1 +) T'·H'·W', embed_dims], (T', H', W'))``, the grid of the pooled queries.

    Args (the host's; the member's ``embed_dims`` is the host's ``out_dims``):
        in_dims: Input token width (MViTv2's stage-changing blocks project ``in_dims →
            3·embed_dims``): the member's input projections are rebuilt to read it.
        pool_kernel, stride_q, stride_kv, norm_cfg: The pooling (``norm_cfg`` builds the norm
            after each convolution).
        rel_pos_lengths: Lengths ``(t, h, w)`` of the relative position tables, or None.
        residual_pooling: Add the pooled queries to the output (CLS row excluded).
        with_cls_token: The first token is a CLS token (kept out of the convolutions).
        host: The host, named in refusals (:func:`from_host`: its class).
    """

    host = 'MViTv2'

    def __init__(
        self,
        in_dims: int,
        pool_kernel: Sequence[int],
        stride_q: Sequence[int],
        stride_kv: Sequence[int],
        norm_cfg: dict,
        rel_pos_lengths: Optional[Sequence[int]],
        residual_pooling: bool,
        with_cls_token: bool,
        host: str = 'MViTv2',
    ) -> None:
        self.host = host
        self.in_dims, self.norm_cfg = in_dims, norm_cfg
        self.pool_kernel = tuple(pool_kernel)
        self.stride_q, self.stride_kv = tuple(stride_q), tuple(stride_kv)
        self.rel_pos_lengths = rel_pos_lengths
        self.residual_pooling, self.with_cls_token = residual_pooling, with_cls_token

    def position_bias(self) -> Optional[PositionBias]:
        """With relative position tables: the decomposed relative positions, inside the logits."""
        if self.rel_pos_lengths is None:
            return None
        return PositionBias('decomposed relative positions (rel_pos_embed=True)', 'rel_pos_embed=False')

    def attach(self, member: nn.Module) -> AttentionBase:
        """``member`` reading ``in_dims``-wide tokens, with the pooling of each head (an extra
        head's own, ``pool_<head>`` / ``norm_<head>``, where the member has its own projection
        for it; ``None`` else) and the relative position tables."""
        member = super().attach(member)
        dd = member.factory_kwargs
        if self.in_dims != member.embed_dims:  # the input projections: every Linear but proj
            for name, old in list(member.named_children()):
                if isinstance(old, nn.Linear) and name != 'proj' and old.in_features == member.embed_dims:
                    new = nn.Linear(self.in_dims, old.out_features, bias=old.bias is not None, **dd)
                    setattr(member, name, new)
        pooling = functools.partial(_pooling, member.head_dim, self.pool_kernel, norm_cfg=self.norm_cfg, **dd)
        member.pool_q, member.norm_q = pooling(self.stride_q)
        member.pool_k, member.norm_k = pooling(self.stride_kv)
        member.pool_v, member.norm_v = pooling(self.stride_kv)
        own = member.own_heads()
        for head, base in member.extra_heads().items():  # pooled as its base head, by its own pooling
            stride = self.stride_q if base == 'q' else self.stride_kv
            conv, norm = pooling(stride) if head in own else (None, None)
            setattr(member, f'pool_{head}', conv)
            setattr(member, f'norm_{head}', norm)
        if self.rel_pos_lengths is not None:
            t, h, w = self.rel_pos_lengths
            member.rel_pos_h = nn.Parameter(torch.zeros(h, member.head_dim, **dd))
            member.rel_pos_w = nn.Parameter(torch.zeros(w, member.head_dim, **dd))
            member.rel_pos_t = nn.Parameter(torch.zeros(t, member.head_dim, **dd))
        return member

    def describe(self, member: AttentionBase) -> str:
        rel_pos = self.rel_pos_lengths is not None
        return f'{super().describe(member)}, in_dims={self.in_dims}, rel_pos={rel_pos}'

    def rel_pos_bias(
        self, member: AttentionBase, pooled: dict[str, Tensor], q_shape: Sequence[int], k_shape: Sequence[int]
    ) -> BiasArg:
        """``R(Q) [B, H, Nq, Nk]`` of each branch's pooled queries, as the member hands them to
        its ``attend`` (:meth:`~dna_mm.models.attention.AttentionBase.position_bias`)."""

        def bias(q: Tensor) -> Tensor:
            tables = (member.rel_pos_t, member.rel_pos_h, member.rel_pos_w)
            return mvit_rel_pos(q, q_shape, k_shape, *tables, self.with_cls_token)

        return member.position_bias(pooled, bias)

    def __call__(
        self, member: AttentionBase, x: Tensor, in_size: Sequence[int]
    ) -> tuple[Tensor, Sequence[int]]:
        heads = member.project(x)  # each [B, heads, N, d]
        dtype = heads['q'].dtype  # the projections' (autocast: the norms' fp32 output cast back)

        def pool(t: Tensor, conv: nn.Module, norm: nn.Module) -> tuple[Tensor, Sequence[int]]:
            out, size = attention_pool(t, conv, in_size, with_cls_token=self.with_cls_token, norm=norm)
            return out.to(dtype), size

        q, q_shape = pool(heads['q'], member.pool_q, member.norm_q)  # [B, heads, Nq, d]
        k, k_shape = pool(heads['k'], member.pool_k, member.norm_k)  # [B, heads, Nk, d]
        v, _ = pool(heads['v'], member.pool_v, member.norm_v)
        pooled = dict(q=q, k=k, v=v)
        for head, base in member.extra_heads().items():  # DnA: Q- and V- by their own pooling
            conv = getattr(member, f'pool_{head}')
            own = None if conv is None else pool(heads[head], conv, getattr(member, f'norm_{head}'))[0]
            pooled[head] = pooled[base] if own is None else own
        bias = None
        if self.rel_pos_lengths is not None:
            bias = self.rel_pos_bias(member, pooled, q_shape, k_shape)
        out, _ = member.run_attend(pooled, None, bias, not member.fused_attn)  # [B, heads, Nq, d]
        if self.residual_pooling:
            if self.with_cls_token:
                out = torch.cat([out[:, :, :1], out[:, :, 1:] + q[:, :, 1:]], dim=2)
            else:
                out = out + q
        gate_input = self.pooled_input(x, in_size) if member.gated else x
        return member.project_out(member.merge_heads(out), gate_input), q_shape

    def pooled_input(self, x: Tensor, in_size: Sequence[int]) -> Tensor:
        """``x`` at the pooled queries' tokens (a gated member's gate reads it): max-pooled as
        MViTv2's block pools its skip connection (kernel ``s + 1`` along an axis of stride
        ``s > 1``, padding ``kernel // 2``), the tokens the block adds the output to; ``x``
        itself where the queries are not pooled."""
        if math.prod(self.stride_q) == 1:
            return x
        kernel = [s + 1 if s > 1 else s for s in self.stride_q]
        pool = nn.MaxPool3d(kernel, self.stride_q, [k // 2 for k in kernel])
        return attention_pool(x, pool, in_size, with_cls_token=self.with_cls_token)[0]


def from_host(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of MMAction2's MViTv2 ``MultiScaleAttention`` ``host``: its sizes, pooling, norm,
    relative position tables, biases and scale.

    Raises:
        UnsupportedModelError: a member that takes no position bias in a host with relative
            positions, a pooling norm other than ``LayerNorm``, a pooling padding other than
            ``kernel // 2``.
    """
    if not isinstance(host.norm_q, nn.LayerNorm):
        refuse(host, f'a pooling norm other than LayerNorm ({type(host.norm_q).__name__})')
    kernel = tuple(host.pool_q.kernel_size)
    if tuple(host.pool_q.padding) != tuple(k // 2 for k in kernel):
        refuse(host, f'pooling padding {host.pool_q.padding} other than kernel // 2')
    lengths = None
    if host.rel_pos_embed:
        lengths = tuple(getattr(host, f'rel_pos_{a}').shape[0] for a in 'thw')
    member = build_attention(
        attn_cfg,
        host.out_dims,
        host.num_heads,
        layer_index,
        num_layers,
        qkv_bias=host.qkv.bias is not None,
        proj_bias=host.proj.bias is not None,
    )
    member.scale = host.scale
    form = PoolingForm(
        in_dims=host.in_dims,
        pool_kernel=kernel,
        stride_q=tuple(host.pool_q.stride),
        stride_kv=tuple(host.pool_k.stride),
        norm_cfg=dict(type='LN', eps=host.norm_q.eps),
        rel_pos_lengths=lengths,
        residual_pooling=host.residual_pooling,
        with_cls_token=host.with_cls_token,
        host=host_name(host),
    )
    return form.attach(member)
