"""MMAction2 / mmcv attention wrappers whose inner attention is any member of the family.

They keep MMAction2's parameter names outside the attention (``norm``, ``temporal_fc``,
``attn.*`` for the attention itself) and its token layout ``[B, 1 + P·T, C]``
(patch-major, time-minor):

* :class:`DividedTemporalAttention`: attention over ``[(B·P), T, C]`` (no CLS token), then a
  zero-initialised ``temporal_fc``; residual inside.
* :class:`DividedSpatialAttention`: attention over ``[(B·T), 1 + P, C]`` with the CLS token
  repeated per frame and averaged back; residual inside.
* :class:`TokenAttention`: drop-in for mmcv's ``MultiheadAttention`` (``joint_space_time`` /
  ``space_only`` layers here; registered in the root registry, so any ``BaseTransformerLayer``
  of MMAction2 or MMDetection can use it). Norms live in the ``BaseTransformerLayer``.

``attn_cfg`` is any config accepted by :func:`~dna_mm.models.attention.build_attention`.
"""
from __future__ import annotations

from typing import Optional

import torch
from einops import rearrange
from mmaction.models.common.transformer import (DividedSpatialAttentionWithNorm,
                                                DividedTemporalAttentionWithNorm)
from mmaction.registry import MODELS
from mmcv.cnn.bricks.transformer import MultiheadAttention
from mmengine.registry import MODELS as ROOT_MODELS
from torch import Tensor

from ..attention import build_attention


def _attention(attn_cfg, embed_dims: int, num_heads: int, attn_drop: float, layer_index: int,
               num_layers: int) -> torch.nn.Module:
    return build_attention(attn_cfg, embed_dims, num_heads, layer_index=layer_index,
                           num_layers=num_layers, attn_drop=attn_drop)


class _DividedAttention:
    """Shared constructor: MMAction2's wrapper, then its ``nn.MultiheadAttention`` swapped for
    a family attention.

    Args:
        embed_dims, num_heads, num_frames, attn_drop, proj_drop, dropout_layer, norm_cfg,
            init_cfg: As MMAction2's ``Divided*AttentionWithNorm``.
        attn_cfg: The attention (``'dna'``, ``dict(type='DnAAttention', variant=...)``, ...).
        layer_index, num_layers: Depth of this layer / of the model (per-layer defaults of
            the family, e.g. Diff's ``λ_init``, Cog's softmax first and last layer).
    """

    def __init__(self, embed_dims: int, num_heads: int, num_frames: int, attn_cfg='dna',
                 attn_drop: float = 0., layer_index: int = 0, num_layers: int = 1,
                 **kwargs) -> None:
        kwargs.pop('batch_first', None)
        super().__init__(embed_dims, num_heads, num_frames, attn_drop=attn_drop, **kwargs)
        self.attn = _attention(attn_cfg, embed_dims, num_heads, attn_drop, layer_index, num_layers)


@MODELS.register_module()
class DividedTemporalAttention(_DividedAttention, DividedTemporalAttentionWithNorm):
    """Temporal attention of a divided space-time block (arguments: :class:`_DividedAttention`)."""

    def forward(self, query: Tensor, key: Optional[Tensor] = None, value: Optional[Tensor] = None,
                residual: Optional[Tensor] = None, **kwargs) -> Tensor:
        cls_token = query[:, :1]                                    # [B, 1, C]
        identity = query_t = query[:, 1:]                           # [B, P·T, C]
        b, pt, c = query_t.shape
        t = self.num_frames
        query_t = self.norm(query_t.reshape(b * (pt // t), t, c))   # [B·P, T, C]
        res = self.dropout_layer(self.proj_drop(self.attn(query_t)))
        res = self.temporal_fc(res).reshape(b, pt, c)               # [B, P·T, C]
        return torch.cat((cls_token, identity + res), dim=1)


@MODELS.register_module()
class DividedSpatialAttention(_DividedAttention, DividedSpatialAttentionWithNorm):
    """Spatial attention of a divided space-time block (arguments: :class:`_DividedAttention`)."""

    def forward(self, query: Tensor, key: Optional[Tensor] = None, value: Optional[Tensor] = None,
                residual: Optional[Tensor] = None, **kwargs) -> Tensor:
        identity = query
        cls_token = query[:, :1]                                    # [B, 1, C]
        query_s = query[:, 1:]                                      # [B, P·T, C]
        b, pt, c = query_s.shape
        t = self.num_frames
        p = pt // t
        cls_tokens = cls_token.repeat(1, t, 1).reshape(b * t, 1, c)  # [B·T, 1, C]
        query_s = rearrange(query_s, 'b (p t) m -> (b t) p m', p=p, t=t)
        query_s = self.norm(torch.cat((cls_tokens, query_s), dim=1))  # [B·T, 1 + P, C]
        res = self.dropout_layer(self.proj_drop(self.attn(query_s)))
        cls_res = res[:, 0].reshape(b, t, c).mean(dim=1, keepdim=True)  # [B, 1, C]
        res = rearrange(res[:, 1:], '(b t) p m -> b (p t) m', p=p, t=t)
        return identity + torch.cat((cls_res, res), dim=1)


@ROOT_MODELS.register_module()
class TokenAttention(MultiheadAttention):
    """Drop-in for mmcv's ``MultiheadAttention`` in any ``BaseTransformerLayer`` (MMAction2,
    MMDetection, ...), with a family attention inside: ``identity + dropout_layer(proj_drop(
    attn(query)))``. Registered in the root registry. ``nn.MultiheadAttention`` checkpoints map
    with :func:`dna_mm.converters.rename_mha` / ``softmax_to_dna``."""

    def __init__(self, embed_dims: int, num_heads: int, attn_cfg='dna', attn_drop: float = 0.,
                 layer_index: int = 0, num_layers: int = 1, **kwargs) -> None:
        kwargs['batch_first'] = True
        super().__init__(embed_dims, num_heads, attn_drop=attn_drop, **kwargs)
        self.attn = _attention(attn_cfg, embed_dims, num_heads, attn_drop, layer_index, num_layers)

    def forward(self, query: Tensor, key: Optional[Tensor] = None, value: Optional[Tensor] = None,
                identity: Optional[Tensor] = None, query_pos: Optional[Tensor] = None,
                key_pos: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None,
                key_padding_mask: Optional[Tensor] = None, **kwargs) -> Tensor:
        identity = query if identity is None else identity
        if query_pos is not None:
            query = query + query_pos
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            attn_mask = ~attn_mask  # nn.MHA: True = masked out; SDPA: True = attend
        if key_padding_mask is not None:  # [B, N] True = ignore (mmcv / nn.MHA convention)
            keep = ~key_padding_mask[:, None, None, :]
            attn_mask = keep if attn_mask is None else attn_mask & keep
        context = None if key is None or key is query else key
        out = self.attn(query, attn_mask=attn_mask, context=context)
        return identity + self.dropout_layer(self.proj_drop(out))
