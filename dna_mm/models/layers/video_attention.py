"""MMAction2's and mmcv's modules around an ``nn.MultiheadAttention``, given any member of the
family (``attn_cfg``: any config :func:`~dna_mm.models.attention.build_attention` accepts).

* MMAction2's divided space-time steps (``DividedTemporalAttentionWithNorm``,
  ``DividedSpatialAttentionWithNorm``) stay MMAction2's modules, with their call, norm,
  ``temporal_fc`` and token layout ``[B, 1 + P·T, C]`` (patch-major, time-minor); their ``attn``
  becomes the member in ``nn.MultiheadAttention``'s form (:func:`give_member`). The one route
  into them is :func:`from_divided` (a copy given the member): ``with_attention``'s host table
  names it, and ``DnATimeSformer`` builds its steps through it.
* mmcv's ``MultiheadAttention`` becomes :class:`TokenAttention`, the member under ``attn.``
  (:func:`from_host`): its own call keeps a self-attention packed when mmcv's ``batch_first``
  transposes would hide that keys and values are the queries.

Keys: ``attn.in_proj_*`` → ``attn.qkv.*``, ``attn.out_proj`` → ``attn.proj``
(:func:`dna_mm.converters.rename_mha`); the rest are the host's."""

from __future__ import annotations

import copy
import warnings
from typing import Any, Callable, Optional

from mmaction.models.common.transformer import (
    DividedSpatialAttentionWithNorm,
    DividedTemporalAttentionWithNorm,
)
from mmcv.cnn.bricks.transformer import MultiheadAttention
from mmengine.registry import MODELS
from torch import Tensor, nn

from ..attention import build_attention
from ..attention.builder import AttnCfg, deprecated_key
from .forms import refuse
from .mha_attention import form_of, mha_masks


def give_member(step: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """MMAction2's divided space-time ``step`` (in place) with its ``nn.MultiheadAttention`` the
    member ``attn_cfg`` names, attention ``layer_index`` of ``num_layers``, in that module's
    form (:func:`~.mha_attention.form_of`: the host's sizes, dropout and layout). The step calls
    ``attn(q, q, q)[0]``, asking for the weights and dropping them, so the form takes the fused
    route (``returns_weights=False``)."""
    step.attn = form_of(step.attn, attn_cfg, layer_index, num_layers, step, returns_weights=False)
    return step


def from_divided(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of MMAction2's ``DividedTemporalAttentionWithNorm`` /
    ``DividedSpatialAttentionWithNorm`` ``host``: a copy of it given the member
    (:func:`give_member`); the host is left as it is. The route into these hosts of both
    ``with_attention`` (:data:`~dna_mm.models.adapters.hosts.HOSTS`) and ``DnATimeSformer``
    (:func:`~dna_mm.models.backbones.timesformer.give_members`)."""
    return give_member(copy.deepcopy(host), attn_cfg, layer_index, num_layers)


def _deprecated_step(old: str, step: type) -> Callable[..., nn.Module]:
    """The config type ``old`` of earlier releases (dna_mm's divided step with an ``attn_cfg``):
    MMAction2's ``step`` given the member, with a ``FutureWarning``."""

    def build(
        attn_cfg: AttnCfg = 'dna', layer_index: int = 0, num_layers: int = 1, **kwargs: Any
    ) -> nn.Module:
        deprecated_key(
            'transformer_layers', f"type='{old}'", f"type='{step.__name__}' (DnATimeSformer's attn_cfg)"
        )
        kwargs.pop('batch_first', None)
        return give_member(step(**kwargs), attn_cfg, layer_index, num_layers)

    return build


for _old, _step in (
    ('DividedTemporalAttention', DividedTemporalAttentionWithNorm),
    ('DividedSpatialAttention', DividedSpatialAttentionWithNorm),
):
    MODELS.register_module(name=_old, module=_deprecated_step(_old, _step))


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
