"""``torch.nn.MultiheadAttention``'s call for every member of the family.

Each class is the family module itself (same parameters, same names: ``qkv``, ``proj``, and for
DnA ``q_neg``, ``v_neg``, ``alpha``) with ``nn.MultiheadAttention``'s forward, so a host that
calls ``self.attn(q, k, v, ...)`` runs unchanged (torchvision's ``vit_*`` ``EncoderBlock``, the
CLIP-style ``ResidualAttentionBlock`` of MMAction2's UniFormerV2, OpenAI CLIP and OpenCLIP,
``nn.TransformerEncoderLayer``)::

    out, weights = attn(query, key, value, key_padding_mask=None, need_weights=True,
                        attn_mask=None, average_attn_weights=True, is_causal=False)

* Layout: ``[L, N, E]`` tokens (``batch_first=False``, the default) or ``[N, L, E]``, or one
  unbatched ``[L, E]`` sequence, as the host.
* Self-attention when ``key`` and ``value`` are ``query`` (the same tensor), cross-attention
  otherwise: ``Q±`` from ``query``, ``K`` from ``key``, ``V±`` from ``value``.
* Masks (:func:`mha_masks`): ``attn_mask`` ``[L, S]`` or
  ``[N·H, L, S]`` and ``key_padding_mask`` ``[N, S]``, ``bool`` (True = not allowed) or float
  (added), are **exclusion masks** (dna_mm's rule, :mod:`dna_mm.models.attention.functional`):
  added unchanged to every branch's logits after the softmin sign, so a masked key leaves both
  DnA branches and the positive branch keeps the additive meaning the host gives a float mask.
  ``is_causal`` is, as for the host, a hint that ``attn_mask`` is the causal mask: ``attn_mask``
  decides, and ``is_causal`` without it is the host's error.
* ``need_weights=True`` (the host's default) takes the eager route and returns the positive
  (softmax) map ``[N, L, S]`` (the host's map, for DnA and Diff the first branch's; softmax and
  Cog have one), averaged over the heads unless ``average_attn_weights=False`` (``[N, H, L, S]``);
  the host returns its map after attention dropout, this one before it (equal in eval). Both
  DnA maps: :meth:`AttentionBase.forward` with ``return_attn=True`` on ``[N, L, E]`` tokens.
  ``need_weights=False`` takes the fused route (the family's SDPA calls, in place of the host's
  own fused ``_native_multi_head_attention`` path) and returns ``(out, None)``.

Keys: ``nn.MultiheadAttention``'s ``in_proj_weight`` / ``in_proj_bias`` are ``qkv.weight`` /
``qkv.bias`` (rows ``[Q, K, V]`` in both), ``out_proj.*`` is ``proj.*``
(:func:`dna_mm.converters.rename_mha`). A host with ``kdim`` / ``vdim`` other than ``E`` has
separate ``q_proj_weight`` / ``k_proj_weight`` / ``v_proj_weight`` (and the packed
``in_proj_bias``): they are ``q_proj``, ``k_proj``, ``v_proj`` here.

Classes ``Multihead{Member}`` (``MultiheadDnAAttention``, ...), one per member of the family
(:func:`~.forms.register_forms`); :func:`from_host` builds the form of a host module.
"""

from __future__ import annotations

import functools
import operator
from typing import Optional

import torch
from torch import Tensor, nn

from ..attention import AttentionBase
from ..attention.base import check_inputs
from ..attention.builder import AttnCfg
from ..attention.functional import additive_mask
from .forms import build_form, refuse, register_forms


def mha_masks(
    attn_mask: Optional[Tensor],
    key_padding_mask: Optional[Tensor],
    batch: int,
    num_heads: int,
    dtype: torch.dtype,
) -> Optional[Tensor]:
    """``nn.MultiheadAttention``'s two masks → one exclusion mask broadcastable to
    ``[B, H, M, N]`` (``bool``: True = attend, or an additive float).

    ``attn_mask``: ``[M, N]`` or ``[B·H, M, N]``, ``bool`` True = masked out, float added;
    ``key_padding_mask``: ``[B, N]``, ``bool`` True = ignore, float added.
    """
    if attn_mask is not None and attn_mask.dim() == 3:  # [B·H, M, N] -> [B, H, M, N]
        attn_mask = attn_mask.reshape(batch, num_heads, *attn_mask.shape[-2:])
    if key_padding_mask is not None:
        key_padding_mask = key_padding_mask[:, None, None, :]  # [B, 1, 1, N]
    masks = [
        ~m.bool() if m.dtype in (torch.bool, torch.uint8) else m  # bool: True = attend
        for m in (attn_mask, key_padding_mask)
        if m is not None
    ]
    if not masks:
        return None
    if all(m.dtype == torch.bool for m in masks):
        return functools.reduce(operator.and_, masks)
    return functools.reduce(operator.add, (additive_mask(m, dtype).to(dtype) for m in masks))


class MultiheadAttentionMixin(AttentionBase):
    """``nn.MultiheadAttention``'s call and layout for a family attention class (mixed in before
    it: ``class MultiheadDnAAttention(MultiheadAttentionMixin, DnAAttention)``).

    Args (keyword, beside the family class's own):
        batch_first: ``[N, L, E]`` tokens (True) or ``[L, N, E]`` (False, the host's default).
        kdim, vdim: Widths of the key and value inputs (default ``E``). When either differs,
            the projections are separate, as the host's ``q/k/v_proj_weight``: ``q_proj``
            ``Linear(E, E)``, ``k_proj`` ``Linear(kdim, E)``, ``v_proj`` ``Linear(vdim, E)``
            in place of ``qkv``, and DnA's ``v_neg`` is ``Linear(vdim, E)``.

    ``in_proj_weight`` / ``in_proj_bias`` are ``None`` (as on a host without packed
    projections): ``nn.TransformerEncoderLayer`` reads them to pick its fused path, and ``None``
    sends it to the path that calls this module. The weights are in ``qkv`` (or ``q_proj``,
    ``k_proj``, ``v_proj``) and ``proj``.
    """

    in_proj_weight = None
    in_proj_bias = None

    def __init__(
        self,
        *args,
        batch_first: bool = False,
        kdim: Optional[int] = None,
        vdim: Optional[int] = None,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.batch_first = batch_first
        self.kdim, self.vdim = kdim or self.embed_dims, vdim or self.embed_dims
        if self._qkv_same_embed_dim:
            return
        dims, dd, bias = self.embed_dims, self.factory_kwargs, self.qkv.bias is not None
        del self.qkv
        self.q_proj = nn.Linear(dims, dims, bias=bias, **dd)
        self.k_proj = nn.Linear(self.kdim, dims, bias=bias, **dd)
        self.v_proj = nn.Linear(self.vdim, dims, bias=bias, **dd)
        if self.has_negative_branch and self.v_neg is not None:  # DnA's V- reads the values
            self.v_neg = nn.Linear(self.vdim, dims, bias=bias, **dd)

    @property
    def _qkv_same_embed_dim(self) -> bool:
        """Keys and values as wide as the queries (packed ``qkv``), the host's attribute."""
        return self.kdim == self.embed_dims and self.vdim == self.embed_dims

    @property
    def embed_dim(self) -> int:
        """The host's name for the token width."""
        return self.embed_dims

    @property
    def dropout(self) -> float:
        """The host's name for the attention dropout probability."""
        return self.attn_drop_p

    def project(
        self, x: Tensor, context: Optional[Tensor] = None, value: Optional[Tensor] = None
    ) -> dict[str, Tensor]:
        """The family's projections (packed ``qkv``), or the separate ones: ``Q`` (and DnA's
        ``Q-``) from ``x``, ``K`` from ``context``, ``V`` (and ``V-``) from ``value``."""
        if self._qkv_same_embed_dim:
            return super().project(x, context, value)
        keys = x if context is None else context
        values = keys if value is None else value
        heads = dict(q=self.q_proj(x), k=self.k_proj(keys), v=self.v_proj(values))
        if self.has_negative_branch:  # DnA: Q- and V-, where the variant has them
            for name, src in (('q_neg', x), ('v_neg', values)):
                if getattr(self, name) is not None:
                    heads[name] = getattr(self, name)(src)
        heads = {k: self.split_heads(v) for k, v in heads.items()}  # [N, H, ·, d]
        if self.has_negative_branch:  # DnA without its own Q- / V- shares Q / V
            heads.setdefault('q_neg', heads['q'])
            heads.setdefault('v_neg', heads['v'])
        return heads

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        need_weights: bool = True,
        attn_mask: Optional[Tensor] = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Optional[Tensor]]:
        """``query [L, N, E]``, ``key [S, N, kdim]``, ``value [S, N, vdim]`` (``[N, ·, ·]`` when
        ``batch_first``, ``[·, ·]`` unbatched) → ``(out, weights or None)``, ``out`` shaped as
        ``query``."""
        name = type(self).__name__
        if is_causal and attn_mask is None:
            raise RuntimeError(f'{name}: is_causal=True needs attn_mask (as nn.MultiheadAttention)')
        self_attn = key is query and value is query
        values_are_keys = value is key
        unbatched = query.dim() == 2
        if unbatched:  # [L, E] -> [1, L, E]
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:  # [L, N, E] -> [N, L, E]
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if not self._qkv_same_embed_dim:
            _check_widths(name, (self.embed_dims, self.kdim, self.vdim), query, key, value)
        context = None if self_attn else key
        value = None if self_attn or values_are_keys else value
        if self._qkv_same_embed_dim:
            check_inputs(name, self.embed_dims, query, context, value)
        mask = mha_masks(attn_mask, key_padding_mask, query.shape[0], self.num_heads, query.dtype)
        heads = self.project(query, context, value)
        out, maps = self.run_attend(heads, mask, None, need_weights or not self.fused_attn)
        out = self.proj_drop(self.proj(self.merge_heads(out)))  # [N, L, E]
        weights = None
        if need_weights:
            weights = maps['attn'] if 'attn' in maps else maps['pos']  # [N, H, L, S]
            weights = weights.mean(dim=1) if average_attn_weights else weights
            weights = weights.squeeze(0) if unbatched else weights
        if unbatched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def extra_repr(self) -> str:
        dims = '' if self._qkv_same_embed_dim else f', kdim={self.kdim}, vdim={self.vdim}'
        return f'{super().extra_repr()}, batch_first={self.batch_first}{dims}'


def _check_widths(name: str, widths: tuple[int, int, int], query: Tensor, key: Tensor, value: Tensor) -> None:
    """A ``ValueError`` naming the shapes unless ``query [N, L, E]``, ``key [N, S, kdim]`` and
    ``value [N, S, vdim]`` (``widths = (E, kdim, vdim)``)."""
    for label, t, width in zip(('query', 'key', 'value'), (query, key, value), widths, strict=True):
        if t.dim() != 3 or t.shape[-1] != width or t.shape[0] != query.shape[0]:
            raise ValueError(f'{name}: expected {label} of width {width}, got {list(t.shape)} (batch first)')
    if key.shape[1] != value.shape[1]:
        raise ValueError(f'{name}: value has {value.shape[1]} tokens, keys have {key.shape[1]}')


#: family self-attention name → its ``nn.MultiheadAttention`` form (:func:`~.forms.build_form`)
MHA_ATTENTIONS = register_forms(
    MultiheadAttentionMixin, 'Multihead', globals(), "with nn.MultiheadAttention's call"
)


def form_of(
    mha: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int, owner: nn.Module
) -> nn.Module:
    """The form of the ``nn.MultiheadAttention`` ``mha``: its sizes (``kdim`` / ``vdim``
    included), biases, dropout and layout; ``owner`` (the module swapped, ``mha`` or a block
    holding it) is named in a refusal of ``add_bias_kv`` / ``add_zero_attn``."""
    if mha.bias_k is not None or mha.add_zero_attn:
        what = '' if owner is mha else 'its nn.MultiheadAttention with '
        refuse(owner, f'{what}add_bias_kv=True or add_zero_attn=True')
    return build_form(
        MHA_ATTENTIONS,
        attn_cfg,
        mha.embed_dim,
        mha.num_heads,
        layer_index,
        num_layers,
        qkv_bias=mha.in_proj_bias is not None,
        proj_bias=mha.out_proj.bias is not None,
        attn_drop=mha.dropout,
        batch_first=mha.batch_first,
        kdim=mha.kdim,
        vdim=mha.vdim,
    )


def from_host(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of torch's ``nn.MultiheadAttention`` ``host`` (:func:`form_of`)."""
    return form_of(host, attn_cfg, layer_index, num_layers, host)
