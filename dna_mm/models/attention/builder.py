"""Build an attention module of the family from a config, per layer.

``cfg`` is an MMEngine config dict (``type`` = a registered name below) or one of the short
names ``'softmax' | 'dna' | 'diff' | 'cog'``. Layer-dependent defaults:

* ``DiffAttention``: ``layer_index`` (sets ``λ_init``) is filled in from the layer's depth;
* ``CogAttention``: the first and last layer use ``SoftmaxAttention`` (the authors' setting)
  unless the config says ``softmax_first_last=False``.

Every model builds its attentions here: MMAction2's wrappers, ``with_attention``'s hosts and
ViTDet. A host whose attention is a form of the family's (ViTDet's grid forms, the
``nn.MultiheadAttention`` and MViTv2 forms) keeps its forms in a registry of its own, each
registered under the family name it is a form of, and passes it as ``registry``.

Every host takes the attention as one keyword, :data:`ATTENTION_KEY` (``attn_cfg``); a key it
took before is a deprecated alias for one release (:func:`deprecated_key`).
"""

from __future__ import annotations

import copy
import warnings
from typing import Union

from mmengine.registry import MODELS, Registry
from torch import nn

SHORT_NAMES = {
    'softmax': 'SoftmaxAttention',
    'dna': 'DnAAttention',
    'diff': 'DiffAttention',
    'cog': 'CogAttention',
}
_SELF_TYPES = tuple(SHORT_NAMES.values())
#: the registered names: the self-attentions, then their cross-attention forms
ATTENTION_TYPES = _SELF_TYPES + tuple(t.replace('Attention', 'CrossAttention') for t in _SELF_TYPES)

AttnCfg = Union[str, dict]
#: the keyword every host takes its attention by
ATTENTION_KEY = 'attn_cfg'


def attention_cfg(cfg: AttnCfg) -> dict:
    """Normalise ``'dna'`` / ``dict(type='dna', ...)`` to ``dict(type='DnAAttention', ...)``."""
    cfg = dict(type=cfg) if isinstance(cfg, str) else copy.deepcopy(dict(cfg))
    if 'type' not in cfg:
        raise KeyError(f'attention config {cfg} has no "type"')
    cfg['type'] = SHORT_NAMES.get(cfg['type'], cfg['type'])
    if isinstance(cfg['type'], str) and cfg['type'] not in ATTENTION_TYPES:
        raise ValueError(
            f'attention type {cfg["type"]!r} is not one of {sorted(SHORT_NAMES)} or {list(ATTENTION_TYPES)}'
        )
    return cfg


def build_attention(
    cfg: AttnCfg,
    embed_dims: int,
    num_heads: int,
    layer_index: int = 0,
    num_layers: int = 1,
    registry: Registry = MODELS,
    **default_args,
) -> nn.Module:
    """Build the attention of layer ``layer_index`` (0-based) of a ``num_layers``-deep model.

    ``registry``: where the type is looked up: MMEngine's ``MODELS`` (the family), or a host's
    registry of forms, which holds them under the family's self-attention names
    (:data:`~dna_mm.models.layers.vitdet_attention.VITDET_ATTENTIONS`, ...); a type it lacks is
    refused. ``default_args`` fill what ``cfg`` leaves out (a Cog layer turned softmax keeps
    them too).
    """
    cfg = attention_cfg(cfg)
    kind = cfg['type'] if isinstance(cfg['type'], str) else cfg['type'].__name__
    if kind.startswith('Cog') and cfg.pop('softmax_first_last', True) and layer_index in (0, num_layers - 1):
        kind = kind.replace('Cog', 'Softmax')
        cfg = {k: v for k, v in cfg.items() if k in _COMMON_KEYS} | dict(type=kind)
    if kind.startswith('Diff'):
        cfg.setdefault('layer_index', layer_index)
    cfg = dict(embed_dims=embed_dims, num_heads=num_heads, **default_args) | cfg
    if registry is MODELS:
        return MODELS.build(cfg)
    if kind not in registry.module_dict:
        raise ValueError(
            f'attention type {kind!r} is not a self-attention of the family; expected one of '
            f'{sorted(registry.module_dict)}'
        )
    # get, not build: build would look the name up in the default scope's registry tree
    return registry.get(kind)(**{k: v for k, v in cfg.items() if k != 'type'})


def deprecated_key(owner: str, old: str, new: str) -> None:
    """Warn (``FutureWarning``) that ``owner``'s argument ``old`` is a deprecated alias, kept
    for one release; ``new`` is what to write instead (it names the new key)."""
    warnings.warn(
        f'{owner}: {old} is deprecated and will be removed in the next release; use {new}',
        FutureWarning,
        stacklevel=3,
    )


#: arguments every member takes (what a Cog layer keeps when it falls back to softmax)
_COMMON_KEYS = ('qkv_bias', 'attn_drop', 'proj_drop', 'proj_bias', 'fused_attn', 'embed_dims', 'num_heads')
