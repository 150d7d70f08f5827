"""Whole-model checkpoints written by other code → the state dict of the dna_mm model they fit.

Used by the strict whole-model loads (``load_from``, ``tools/test.py``, ``tools/infer.py``, the
analysis tools: :func:`dna_mm.checkpoint.load_whole_model`), so that a file loads as its code wrote
it, with no conversion step:

* ``'mmengine'`` (mmengine, MMAction2, MMDetection, dna_mm: ``{'meta', 'state_dict', ...}``):
  ``state_dict`` unchanged;
* ``'authors_timesformer'`` (the authors' TimeSformer fork, PySlowFast's ``save_checkpoint``:
  ``{'epoch', 'model_state', 'optimizer_state', 'cfg'}``, keys ``model.*`` because their
  ``dna_base_patch16_224`` holds ``DnATransformer`` as ``self.model``): the keys of an
  MMAction2 ``Recognizer3D`` with ``DnATimeSformer`` and ``TimeSformerHead``, ``model.*`` →
  ``backbone.*`` (:func:`.to_timesformer`) and ``model.head.*`` → ``cls_head.fc_cls.*``;
* ``'deit'`` (the authors' ImageNet ``vit/main.py``, DeiT's layout: ``{'model', 'model_ema',
  'optimizer', 'lr_scheduler', 'epoch', 'scaler', 'args'}``): ``model`` (what their ``--eval``
  loads, not ``model_ema``) with the authors' attention layouts mapped
  (:func:`.official_to_dna_mm`): the keys of ``dna_vit_*`` (a DeiT file: timm's ViT);
* ``'state_dict'`` (a bare state dict): itself, the authors' attention layouts mapped;
* ``'mmpretrain_timm'`` (an MMPretrain ``ImageClassifier`` on ``TIMMBackbone``, what
  ``configs/imagenet/`` train): loaded into the timm model itself (``dna_vit_*``, the analysis and
  export tools' ``timm:`` models), timm's own keys (:func:`timm_classifier_state_dict`).

The authors' files are read with ``combine='add'``, the sign of the code that wrote them (their
TimeSformer fork and ``vit/dna_models.py``, the ViT ``main.py`` trains).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Mapping

from torch import Tensor

from .attention import has_official_attention, official_to_dna_mm
from .timesformer import detect_layout, strip_prefixes, to_timesformer, unwrap

#: how each layout is named in the load log and in errors
LAYOUT_NAMES = {
    'mmengine': 'an mmengine checkpoint',
    'authors_timesformer': "the authors' TimeSformer checkpoint (PySlowFast save_checkpoint: epoch, "
    'model_state, optimizer_state, cfg)',
    'deit': "a DeiT-style checkpoint, as the authors' ImageNet vit/main.py writes it (weights under "
    "'model'; optimizer, lr_scheduler, epoch, scaler, args beside them)",
    'state_dict': 'a bare state dict',
    'mmpretrain_timm': 'an MMPretrain classifier on a timm model (configs/imagenet/), read as the timm model',
}
#: MMPretrain's ``ImageClassifier`` on ``TIMMBackbone`` + ``LinearClsHead`` → the timm model's keys
MMPRETRAIN_TIMM = {'backbone.timm_model.': '', 'head.fc.': 'head.'}
#: PySlowFast's classifier (``DnATransformer.head``) → MMAction2's ``TimeSformerHead``
HEAD_KEYS = {'head.weight': 'cls_head.fc_cls.weight', 'head.bias': 'cls_head.fc_cls.bias'}


def authors_timesformer_recognizer(model_state: Mapping) -> 'OrderedDict[str, Tensor] | None':
    """The ``model_state`` of the authors' TimeSformer checkpoint → the keys of a
    ``Recognizer3D`` (``backbone.*`` of :class:`~dna_mm.models.DnATimeSformer` in divided
    space-time, ``cls_head.fc_cls.*``); ``None`` when it is not a TimeSformer in their layout."""
    tensors = OrderedDict((k, v) for k, v in model_state.items() if isinstance(v, Tensor))
    backbone = unwrap(tensors)  # model. / module. stripped, the head dropped
    if not backbone or detect_layout(backbone) != 'fb_timesformer':
        return None
    sd, _ = to_timesformer(tensors, 'divided_space_time', combine='add')
    out = OrderedDict((f'backbone.{k}', v) for k, v in sd.items())
    for key, value in tensors.items():
        head = HEAD_KEYS.get(strip_prefixes(key, ('module.', 'model.')))
        if head is not None:
            out[head] = value
    return out


def timm_classifier_state_dict(state_dict: Mapping) -> 'OrderedDict[str, Tensor] | None':
    """An MMPretrain classifier's state dict on ``TIMMBackbone`` (``backbone.timm_model.*``,
    ``head.fc.*``) in the timm model's own keys (``blocks.*``, ``head.*``); ``None`` when it is not
    one (a key under another prefix)."""
    out: OrderedDict[str, Tensor] = OrderedDict()
    for key, value in state_dict.items():
        prefix = next((p for p in MMPRETRAIN_TIMM if key.startswith(p)), None)
        if prefix is None:
            return None
        out[MMPRETRAIN_TIMM[prefix] + key[len(prefix) :]] = value
    return out or None


def whole_model_state_dict(checkpoint: Mapping) -> tuple['OrderedDict[str, Tensor]', str]:
    """``(state dict, layout)`` of a whole-model ``checkpoint`` (see the module docstring)."""
    if isinstance(checkpoint.get('state_dict'), Mapping):
        return OrderedDict(checkpoint['state_dict']), 'mmengine'
    if isinstance(checkpoint.get('model_state'), Mapping):
        mapped = authors_timesformer_recognizer(checkpoint['model_state'])
        if mapped is not None:
            return mapped, 'authors_timesformer'
        return OrderedDict(checkpoint['model_state']), 'state_dict'
    layout, state = 'state_dict', checkpoint
    if isinstance(checkpoint.get('model'), Mapping):
        layout, state = 'deit', checkpoint['model']
    state = OrderedDict(state)
    if has_official_attention(state) and not any(k.endswith('q_pos_proj.weight') for k in state):
        state = official_to_dna_mm(state, combine='add', strict=False)
    return state, layout
