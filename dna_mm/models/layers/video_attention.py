"""MMAction2 / mmcv attention wrappers whose inner attention is any member of the family
(``attn_cfg``: any config :func:`~dna_mm.models.attention.build_attention` accepts).

They keep MMAction2's parameter names outside the attention (``norm``, ``temporal_fc``,
``attn.*`` for the attention itself) and its token layout ``[B, 1 + P·T, C]`` (patch-major,
time-minor): :class:`DividedTemporalAttention` and :class:`DividedSpatialAttention` (the steps
of a divided space-time block) and :class:`TokenAttention` (mmcv's ``MultiheadAttention``; the
form ``with_attention`` gives that host, built by :func:`from_host`)."""

from __future__ import annotations

import warnings
from typing import Any, Optional

import torch
from einops import rearrange
from mmaction.models.common.transformer import (
    DividedSpatialAttentionWithNorm,
    DividedTemporalAttentionWithNorm,
)
from mmcv.cnn.bricks.transformer import MultiheadAttention
from mmengine.registry import MODELS
from torch import Tensor, nn

from ..attention import build_attention
from ..attention.builder import AttnCfg
from .forms import refuse
from .mha_attention import mha_masks


class _DividedAttention:
    """Shared constructor: MMAction2's wrapper, then its ``nn.MultiheadAttention`` swapped for
    a family attention. ``forward(query [B, 1 + P·T, C])`` → same shape (the ``key`` /
    ``value`` / ``residual`` of MMAction2's signature are not used).

    Args:
        embed_dims, num_heads, num_frames, attn_drop, proj_drop, dropout_layer, norm_cfg,
            init_cfg: As MMAction2's ``Divided*AttentionWithNorm``.
        attn_cfg: The attention (``'dna'``, ``dict(type='DnAAttention', variant=...)``, ...).
        layer_index, num_layers: Depth of this layer / of the model (per-layer defaults of
            the family, e.g. Diff's ``λ_init``, Cog's softmax first and last layer).
    """

    def __init__(
        self,
        embed_dims: int,
        num_heads: int,
        num_frames: int,
        attn_cfg='dna',
        attn_drop: float = 0.0,
        layer_index: int = 0,
        num_layers: int = 1,
        **kwargs,
    ) -> None:
        kwargs.pop('batch_first', None)
        super().__init__(embed_dims, num_heads, num_frames, attn_drop=attn_drop, **kwargs)
        self.attn = build_attention(
            attn_cfg, embed_dims, num_heads, layer_index, num_layers, attn_drop=attn_drop
        )


@MODELS.register_module()
class DividedTemporalAttention(_DividedAttention, DividedTemporalAttentionWithNorm):
    """Temporal step: attention over ``[B·P, T, C]`` (no CLS token), then the zero-initialised
    ``temporal_fc``; residual inside (arguments: :class:`_DividedAttention`)."""

    def forward(self, query: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        cls_token = query[:, :1]  # [B, 1, C]
        identity = query_t = query[:, 1:]  # [B, P·T, C]
        b, pt, c = query_t.shape
        t = self.num_frames
        query_t = self.norm(query_t.reshape(b * (pt // t), t, c))  # [B·P, T, C]
        res = self.dropout_layer(self.proj_drop(self.attn(query_t)))
        res = self.temporal_fc(res).reshape(b, pt, c)  # [B, P·T, C]
        return torch.cat((cls_token, identity + res), dim=1)


@MODELS.register_module()
class DividedSpatialAttention(_DividedAttention, DividedSpatialAttentionWithNorm):
    """Spatial step: attention over ``[B·T, 1 + P, C]``, the CLS token repeated per frame and
    averaged back; residual inside (arguments: :class:`_DividedAttention`)."""

    def forward(self, query: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        identity = query
        cls_token = query[:, :1]  # [B, 1, C]
        query_s = query[:, 1:]  # [B, P·T, C]
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


@MODELS.register_module()
class TokenAttention(MultiheadAttention):
    """Drop-in for mmcv's ``MultiheadAttention`` with a family attention inside (the norms are
    the ``BaseTransformerLayer``'s).

    Same arguments, call and result as mmcv's module (MMAction2's ``joint_space_time`` layers,
    any ``BaseTransformerLayer`` / DETR encoder or decoder of MMDetection; registered in the
    root registry)::

        q = query + query_pos,  k = key + key_pos,  v = value         (key_pos defaults to
        out = identity + dropout_layer(proj_drop(attn(q, k, v)))        query_pos, as in mmcv)

    with ``key = query`` and ``value = key`` (before ``key_pos``) when not given,
    ``batch_first=False`` meaning ``[N, B, C]`` tokens, and ``nn.MultiheadAttention``'s masks:
    ``attn_mask`` ``[M, N]`` or ``[B·H, M, N]`` (``bool``: True = *not* allowed; float: added)
    and ``key_padding_mask`` ``[B, N]`` (``bool``: True = ignore; float: added). Both are
    exclusion masks for the family attention (added unchanged to every branch's logits), so
    with ``attn_cfg='softmax'`` the module equals mmcv's on the same weights; mmcv's
    ``state_dict()`` maps by :func:`dna_mm.converters.rename_mha` (``attn.in_proj_*`` →
    ``attn.qkv.*``, ``attn.out_proj`` → ``attn.proj``), to DnA by ``softmax_to_dna``.

    Args:
        embed_dims, num_heads, attn_drop, proj_drop, dropout_layer, batch_first, init_cfg:
            As mmcv's ``MultiheadAttention``.
        attn_cfg: The attention (``'dna'``, ``dict(type='DnAAttention', variant=...)``, ...).
        layer_index, num_layers: Depth of this layer / of the model (per-layer defaults).
    """

    def __init__(
        self,
        embed_dims: int,
        num_heads: int,
        attn_cfg='dna',
        attn_drop: float = 0.0,
        layer_index: int = 0,
        num_layers: int = 1,
        **kwargs,
    ) -> None:
        super().__init__(embed_dims, num_heads, attn_drop=attn_drop, **kwargs)
        self.attn = build_attention(
            attn_cfg, embed_dims, num_heads, layer_index, num_layers, attn_drop=attn_drop
        )

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        identity: Optional[Tensor] = None,
        query_pos: Optional[Tensor] = None,
        key_pos: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        **kwargs,
    ) -> Tensor:
        key = query if key is None else key
        value = key if value is None else value
        identity = query if identity is None else identity
        if key_pos is None and query_pos is not None:
            if query_pos.shape == key.shape:
                key_pos = query_pos
            else:
                warnings.warn(
                    f'{type(self).__name__}: position encoding of key is missing '
                    f'(query_pos {list(query_pos.shape)} does not fit key '
                    f'{list(key.shape)})',
                    stacklevel=2,
                )
        q = query if query_pos is None else query + query_pos
        k = key if key_pos is None else key + key_pos
        self_attn = k is q and value is q
        values_are_keys = value is k
        if not self.batch_first:  # [N, B, C] -> [B, N, C]
            q, k, value = q.transpose(0, 1), k.transpose(0, 1), value.transpose(0, 1)
        mask = mha_masks(attn_mask, key_padding_mask, q.shape[0], self.num_heads, q.dtype)
        if self_attn:
            out = self.attn(q, attn_mask=mask)
        else:
            out = self.attn(q, attn_mask=mask, context=k, value=None if values_are_keys else value)
        if not self.batch_first:
            out = out.transpose(0, 1)
        return identity + self.dropout_layer(self.proj_drop(out))


def from_host(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of mmcv's ``MultiheadAttention`` ``host``: :class:`TokenAttention` with its sizes,
    dropouts, layout and ``dropout_layer``; refuses an ``nn.MultiheadAttention`` inside with
    ``kdim`` / ``vdim``, extra key / value rows or no biases."""
    mha = host.attn
    if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.in_proj_bias is None:
        refuse(host, 'nn.MultiheadAttention with kdim / vdim, add_bias_kv or bias=False')
    token = TokenAttention(
        host.embed_dims,
        host.num_heads,
        attn_cfg=attn_cfg,
        attn_drop=mha.dropout,
        proj_drop=host.proj_drop.p,
        batch_first=host.batch_first,
        layer_index=layer_index,
        num_layers=num_layers,
        dropout_layer=None,
    )
    token.dropout_layer = host.dropout_layer  # the host's module (DropPath, Dropout, Identity)
    return token
