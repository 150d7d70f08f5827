"""Whole-checkpoint layouts → ViTDet backbone keys (detectron2 / MMDetection ViTDet naming).

Target keys (timm's block names, no CLS token, no final norm)::

    patch_embed.proj.*, pos_embed [1, (1 +) S², C],
    blocks.{i}.{norm1, attn.{qkv, proj, q_neg, v_neg, alpha, rel_pos_h, rel_pos_w}, norm2,
                mlp.fc1, mlp.fc2}.*

Recognised sources (:func:`to_vitdet` returns which):

* ``'mmdet_vitdet'``: an MMDetection (or dna_mm) ViTDet detector checkpoint: the
  ``backbone.*`` tensors of its ``state_dict`` (neck and heads are not the backbone's);
* ``'authors_dna_vit'``: the authors' DnA ViT (``qqkvv`` / ``qqkv``, ``neg_scalers``,
  ``pos_embed`` without a CLS row), mapped by :func:`~.attention.official_to_dna_mm`;
* ``'dna_vit'``: a dna_mm ``dna_vit_*`` timm model (``q_neg``, ``v_neg``, ``alpha``);
* ``'timm_vit'``: a timm ViT or an MAE encoder (``model`` key; ``blocks.{i}.attn.qkv``);
* ``'mmpretrain_vit'``: MMPretrain's ``VisionTransformer`` (an ImageNet classifier, an
  ``MAEViT`` pre-training: ``backbone.layers.{i}.ln1``), read as timm's (:mod:`.mmpretrain`).

The classification parts of image models (``cls_token``, the final ``norm``, ``fc_norm``,
``head``) have no place in ViTDet: they are returned separately as ``unused``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Mapping

from torch import Tensor

from .attention import official_to_dna_mm
from .mmpretrain import NOT_BACKBONE, is_mmpretrain_vit, mmpretrain_to_timm
from .timesformer import state_dict_of, unwrap

#: image-classification tensors a ViTDet backbone has no counterpart for
CLASSIFIER_KEYS = ('cls_token', 'dist_token', 'norm.weight', 'norm.bias')
CLASSIFIER_PREFIXES = ('head.', 'fc_norm.', 'head_drop.')


def detector_backbone(checkpoint: Mapping) -> 'OrderedDict[str, Tensor] | None':
    """The ``backbone.*`` tensors of a detector checkpoint (prefix removed), or ``None`` when
    the checkpoint is not a detector's (no key starts with ``backbone.``, or it is an MMPretrain
    model's: ``backbone.timm_model.*``, a timm ViT, or ``backbone.layers.{i}.ln1``, its own ViT,
    which :func:`to_vitdet` reads as image ViTs)."""
    tensors = ((k.removeprefix('module.'), v) for k, v in state_dict_of(checkpoint).items())
    backbone = OrderedDict(
        (k.removeprefix('backbone.'), v)
        for k, v in tensors
        if isinstance(v, Tensor) and k.startswith('backbone.')
    )
    if any(k.startswith('timm_model.') for k in backbone) or is_mmpretrain_vit(backbone):  # MMPretrain's
        return None
    return backbone or None


def to_vitdet(checkpoint: Mapping, combine: str = 'add') -> tuple['OrderedDict[str, Tensor]', str, list[str]]:
    """Any recognised checkpoint → ``(ViTDet state dict, layout, unused keys)``.

    Negative branches are not added and nothing is resized here (both depend on the target
    model: :func:`dna_mm.models.backbones.load_pretrained`).

    Args:
        checkpoint: The loaded checkpoint (wrapped in ``state_dict`` / ``model`` or bare).
        combine: Sign of the branch sum in the authors' files (``'add'`` / ``'sub'``, see
            :func:`~.attention.official_to_dna_mm`).
    """
    sd = detector_backbone(checkpoint)
    if sd is not None:
        layout = 'mmdet_vitdet'
    else:
        sd = unwrap(checkpoint, keep_heads=True)  # module. / model. / encoder. prefixes removed
        if is_mmpretrain_vit(sd):
            layout, sd = 'mmpretrain_vit', mmpretrain_to_timm(sd)
        elif any(k.endswith(('qqkvv.weight', 'qqkv.weight', 'neg_scalers')) for k in sd):
            layout = 'authors_dna_vit'
        elif any(k.endswith(('.q_neg.weight', '.v_neg.weight', '.alpha')) for k in sd):
            layout = 'dna_vit'
        else:
            layout = 'timm_vit'
    sd = official_to_dna_mm(sd, combine=combine, strict=False)  # also: zero CLS row for a CLS-less pos_embed
    if not any(k.startswith('blocks.') for k in sd):
        raise ValueError(
            f'unrecognised checkpoint layout for ViTDet: expected blocks.{{i}}.* '
            f'keys (timm / MAE / MMPretrain / dna_mm / MMDetection ViTDet); first keys: '
            f'{list(sd)[:5]}'
        )
    outside = CLASSIFIER_PREFIXES + (NOT_BACKBONE if layout == 'mmpretrain_vit' else ())
    unused = sorted(k for k in sd if k in CLASSIFIER_KEYS or k.startswith(outside))
    out = OrderedDict((k, v) for k, v in sd.items() if k not in unused)
    return out, layout, unused
