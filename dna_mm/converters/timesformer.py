"""Whole-checkpoint layouts → dna_mm's TimeSformer keys (MMAction2 naming, timm-style attention).

Target keys (``attentions.0`` temporal, ``attentions.1`` spatial in divided space-time)::

    patch_embed.projection.*, cls_token, pos_embed, time_embed, norm.*,
    transformer_layers.layers.{i}.attentions.{j}.{norm,attn.{qkv,proj,q_neg,v_neg,alpha},temporal_fc}.*
    transformer_layers.layers.{i}.ffns.0.{norm,layers.0.0,layers.1}.*

Recognised sources (:func:`detect_layout`):

* ``'timesformer'``: MMAction2 / dna_mm TimeSformer (``nn.MultiheadAttention`` keys renamed);
* ``'mmaction_vit'``: MMAction2's ImageNet ViT file (``norms.0/1``, one attention per layer);
* ``'timm_vit'``: timm ViT (``blocks.{i}.attn.qkv``), incl. the authors' DnA ViT;
* ``'mmpretrain_vit'``: MMPretrain's ``VisionTransformer`` (``layers.{i}.ln1``; its ImageNet
  classifiers, ``MAEViT``), read as timm's (:mod:`.mmpretrain`);
* ``'fb_timesformer'``: facebookresearch TimeSformer code (``blocks.{i}.temporal_attn``), the
  layout of the authors' DnA TimeSformer checkpoints.

Image layouts are expanded as MMAction2 does: in divided space-time the temporal attention
(and its norm) starts as a copy of the spatial one; ``temporal_fc`` is left to its zero init.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Mapping

from torch import Tensor

from .attention import official_to_dna_mm, rename_mha
from .mmpretrain import NOT_BACKBONE, is_mmpretrain_vit, mmpretrain_to_timm

WRAPPER_KEYS = ('state_dict', 'model', 'module', 'model_state')
PREFIXES = (
    'module.',
    'backbone.',
    'model.',
    'encoder.',
    'timm_model.',
)  # timm_model.: MMPretrain's TIMMBackbone
LAYER = 'transformer_layers.layers.'
HEADS = ('cls_head.', 'head.', 'fc_norm.', 'head_drop.')  # a classifier's parts
#: the layouts of :func:`detect_layout` that are an image model's (no temporal parts)
IMAGE_LAYOUTS = ('timm_vit', 'mmaction_vit', 'mmpretrain_vit')


def state_dict_of(checkpoint: Mapping) -> Mapping:
    """The state dict a checkpoint wraps (``state_dict`` / ``model`` / ``module`` /
    ``model_state``), or the checkpoint itself."""
    return next((checkpoint[k] for k in WRAPPER_KEYS if isinstance(checkpoint.get(k), Mapping)), checkpoint)


def strip_prefixes(key: str, prefixes: tuple[str, ...] = PREFIXES) -> str:
    """``key`` without any leading run of ``prefixes`` (``'module.model.x'`` → ``'x'``)."""
    while key.startswith(prefixes):
        key = key[len(next(p for p in prefixes if key.startswith(p))) :]
    return key


def unwrap(checkpoint: Mapping, keep_heads: bool = False) -> 'OrderedDict[str, Tensor]':
    """The tensors of a checkpoint: unwrap ``state_dict``/``model``/... and strip ``module.``,
    ``backbone.``, ``model.``, ``encoder.``, ``timm_model.`` prefixes (a classifier ``cls_head.*`` /
    ``head.*`` is dropped unless ``keep_heads``)."""
    out: OrderedDict[str, Tensor] = OrderedDict()
    for key, value in state_dict_of(checkpoint).items():
        key = strip_prefixes(key)
        if isinstance(value, Tensor) and (keep_heads or not key.startswith(HEADS)):
            out[key] = value
    return out


def detect_layout(sd: Mapping[str, Tensor]) -> str:
    """One of ``'timesformer' | 'mmaction_vit' | 'timm_vit' | 'mmpretrain_vit' | 'fb_timesformer'``."""
    keys = list(sd)
    if any(k.startswith('blocks.') and '.temporal_attn.' in k for k in keys):
        return 'fb_timesformer'
    if any(k.startswith('blocks.') and '.attn.' in k for k in keys):
        return 'timm_vit'
    layered = [k for k in keys if k.startswith(LAYER)]
    if layered:
        if any('.norms.' in k for k in layered) and not any('.attentions.1.' in k for k in layered):
            return 'mmaction_vit'
        return 'timesformer'
    if is_mmpretrain_vit(sd):
        return 'mmpretrain_vit'
    raise ValueError(
        'unrecognised checkpoint layout: expected a TimeSformer (MMAction2 / '
        'facebookresearch), an MMAction2 ViT, a timm ViT or an MMPretrain ViT state dict; first keys: '
        f'{keys[:5]}'
    )


_TIMM_BLOCK = [  # timm block key → MMAction2 ViT-layer key (one attention per layer)
    ('norm1.', 'norms.0.'),
    ('attn.', 'attentions.0.attn.'),
    ('norm2.', 'norms.1.'),
    ('mlp.fc1.', 'ffns.0.layers.0.0.'),
    ('mlp.fc2.', 'ffns.0.layers.1.'),
]
_FB_BLOCK = [  # facebookresearch TimeSformer block key → dna_mm divided-space-time key
    ('temporal_norm1.', 'attentions.0.norm.'),
    ('temporal_attn.', 'attentions.0.attn.'),
    ('temporal_fc.', 'attentions.0.temporal_fc.'),
    ('norm1.', 'attentions.1.norm.'),
    ('attn.', 'attentions.1.attn.'),
    ('norm2.', 'ffns.0.norm.'),
    ('mlp.fc1.', 'ffns.0.layers.0.0.'),
    ('mlp.fc2.', 'ffns.0.layers.1.'),
]


def _map_blocks(sd: Mapping[str, Tensor], table: list[tuple[str, str]]) -> 'OrderedDict[str, Tensor]':
    out: OrderedDict[str, Tensor] = OrderedDict()
    for key, value in sd.items():
        m = re.match(r'blocks\.(\d+)\.(.*)', key)
        if m:
            idx, rest = m.groups()
            for old, new in table:
                if rest.startswith(old):
                    key = f'{LAYER}{idx}.{new}{rest[len(old) :]}'
                    break
            else:
                raise ValueError(f'{key}: no mapping for block key {rest!r}')
        elif key.startswith('patch_embed.proj.'):
            key = key.replace('patch_embed.proj.', 'patch_embed.projection.')
        out[key] = value
    return out


def _expand_image_layers(sd: Mapping[str, Tensor], attention_type: str) -> 'OrderedDict[str, Tensor]':
    """MMAction2's rule for an image ViT in divided space-time: ``norms.0 → attentions.0.norm``,
    ``norms.1 → ffns.0.norm``, then every ``attentions.0.*`` is copied to ``attentions.1.*``."""
    if attention_type != 'divided_space_time':
        return OrderedDict(sd)
    out: OrderedDict[str, Tensor] = OrderedDict()
    for key, value in sd.items():
        key = key.replace('.norms.0.', '.attentions.0.norm.').replace('.norms.1.', '.ffns.0.norm.')
        out[key] = value
        if '.attentions.0.' in key:
            out[key.replace('.attentions.0.', '.attentions.1.')] = value.clone()
    return out


def to_timesformer(
    checkpoint: Mapping, attention_type: str = 'divided_space_time', combine: str = 'add'
) -> tuple['OrderedDict[str, Tensor]', str]:
    """Any recognised checkpoint → dna_mm TimeSformer keys; returns ``(state_dict, layout)``.

    The authors' DnA layouts are mapped by :func:`official_to_dna_mm` (``combine``: the sign
    their code used, ``'add'`` or ``'sub'``), ``nn.MultiheadAttention`` keys by
    :func:`rename_mha`. Negative branches are *not* added here (that depends on the target
    model; see :func:`dna_mm.models.backbones.adapt_attentions`).
    """
    sd = official_to_dna_mm(unwrap(checkpoint), combine=combine, strict=False)
    layout = detect_layout(sd)
    if layout == 'fb_timesformer':
        if attention_type != 'divided_space_time':
            raise ValueError(
                'a divided space-time TimeSformer checkpoint cannot initialise '
                f'attention_type={attention_type!r}'
            )
        sd = _map_blocks(sd, _FB_BLOCK)
    elif layout in ('timm_vit', 'mmpretrain_vit'):
        if layout == 'mmpretrain_vit':  # in timm's keys; its head, MAE decoder and fc_norm dropped
            drop = HEADS + NOT_BACKBONE
            sd = OrderedDict((k, v) for k, v in mmpretrain_to_timm(sd).items() if not k.startswith(drop))
        sd = _expand_image_layers(_map_blocks(sd, _TIMM_BLOCK), attention_type)
    elif layout == 'mmaction_vit':
        sd = _expand_image_layers(sd, attention_type)
    return rename_mha(sd), layout
