"""``torch.nn.MultiheadAttention``'s call for every member of the family.

Each class is the family module itself (same parameters, same names: ``qkv``, ``proj``, and for
DnA ``q_neg``, ``v_neg``, ``alpha``) with ``nn.MultiheadAttention``'s forward, so a host that
calls ``self.attn(q, k, v, ...)`` runs unchanged (torchvision's ``vit_*`` ``EncoderBlock``, CLIP's
``ResidualAttentionBlock`` in OpenAI CLIP, OpenCLIP and MMAction2's UniFormerV2,
``nn.TransformerEncoderLayer``)::

    out, weights = attn(query, key, value, key_padding_mask=None, need_weights=True,
                        attn_mask=None, average_attn_weights=True, is_causal=False)

* Layout: ``[L, N, E]`` tokens (``batch_first=False``, the default) or ``[N, L, E]``, or one
  unbatched ``[L, E]`` sequence, as the host.
* Self-attention when ``key`` and ``value`` are ``query`` (the same tensor), cross-attention
  otherwise: ``Q±`` from ``query``, ``K`` from ``key``, ``V±`` from ``value``.
* Masks (:func:`~dna_mm.models.layers.video_attention.mha_masks`): ``attn_mask`` ``[L, S]`` or
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
(:func:`dna_mm.converters.rename_mha`).
"""

from __future__ import annotations

from typing import Optional

from torch import Tensor, nn

from ..attention import AttentionBase, CogAttention, DiffAttention, DnAAttention, SoftmaxAttention
from ..attention.builder import AttnCfg, build_attention
from .video_attention import mha_masks


class MultiheadAttentionMixin(AttentionBase):
    """``nn.MultiheadAttention``'s call and layout for a family attention class (mixed in before
    it: ``class MultiheadDnAAttention(MultiheadAttentionMixin, DnAAttention)``).

    Args (keyword, beside the family class's own):
        batch_first: ``[N, L, E]`` tokens (True) or ``[L, N, E]`` (False, the host's default).

    ``in_proj_weight`` / ``in_proj_bias`` are ``None`` (as on a host without packed
    projections): ``nn.TransformerEncoderLayer`` reads them to pick its fused path, and ``None``
    sends it to the path that calls this module. The weights are in ``qkv`` / ``proj``.
    """

    in_proj_weight = None
    in_proj_bias = None
    _qkv_same_embed_dim = True

    def __init__(self, *args, batch_first: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batch_first = batch_first

    @property
    def embed_dim(self) -> int:
        """The host's name for the token width."""
        return self.embed_dims

    @property
    def dropout(self) -> float:
        """The host's name for the attention dropout probability."""
        return self.attn_drop_p

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
        """``query [L, N, E]``, ``key`` / ``value [S, N, E]`` (``[N, ·, E]`` when ``batch_first``,
        ``[·, E]`` unbatched) → ``(out, weights or None)``, ``out`` shaped as ``query``."""
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
        mask = mha_masks(attn_mask, key_padding_mask, query.shape[0], self.num_heads, query.dtype)
        kwargs = {} if self_attn else dict(context=key, value=None if values_are_keys else value)
        result = super().forward(query, attn_mask=mask, return_attn=need_weights, **kwargs)
        out, maps = result if need_weights else (result, None)
        weights = None
        if maps is not None:
            weights = maps['attn'] if 'attn' in maps else maps['pos']  # [N, H, L, S]
            weights = weights.mean(dim=1) if average_attn_weights else weights
            weights = weights.squeeze(0) if unbatched else weights
        if unbatched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, batch_first={self.batch_first}'


class MultiheadSoftmaxAttention(MultiheadAttentionMixin, SoftmaxAttention):
    """Softmax attention with ``nn.MultiheadAttention``'s call (the host's formula)."""


class MultiheadDnAAttention(MultiheadAttentionMixin, DnAAttention):
    """DnA attention with ``nn.MultiheadAttention``'s call."""


class MultiheadDiffAttention(MultiheadAttentionMixin, DiffAttention):
    """Differential attention with ``nn.MultiheadAttention``'s call."""


class MultiheadCogAttention(MultiheadAttentionMixin, CogAttention):
    """Cog attention with ``nn.MultiheadAttention``'s call."""


#: family class name → its ``nn.MultiheadAttention`` form
MHA_ATTENTIONS: dict[str, type] = {
    'SoftmaxAttention': MultiheadSoftmaxAttention,
    'DnAAttention': MultiheadDnAAttention,
    'DiffAttention': MultiheadDiffAttention,
    'CogAttention': MultiheadCogAttention,
}


def build_mha_attention(
    attn_cfg: AttnCfg, embed_dims: int, num_heads: int, layer_index: int, num_layers: int, **kwargs
) -> nn.Module:
    """The ``nn.MultiheadAttention`` form of layer ``layer_index`` of ``num_layers``:
    :func:`~dna_mm.models.attention.build_attention` (its per-layer rules included) with the
    classes above; ``kwargs``: ``batch_first`` and any family argument."""
    return build_attention(
        attn_cfg, embed_dims, num_heads, layer_index, num_layers, classes=MHA_ATTENTIONS, **kwargs
    )
