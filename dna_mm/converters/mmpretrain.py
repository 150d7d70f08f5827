"""MMPretrain's ``VisionTransformer`` keys → timm's ViT keys, so that its image checkpoints (an
ImageNet classifier, an ``MAEViT`` pre-training) initialise a TimeSformer or a ViTDet backbone
by the converters of timm's layout.

One block, by meaning (``layers.{i}.`` → ``blocks.{i}.``)::

    ln1.  → norm1.     attn.{qkv, proj, q_neg, v_neg, alpha}. → attn.*.     ln2. → norm2.
    ffn.layers.0.0. → mlp.fc1.     ffn.layers.1. → mlp.fc2.

and around the blocks: ``patch_embed.projection.`` → ``patch_embed.proj.``, the final norm
``ln1.`` → ``norm.``, the pooled-token norm of ``out_type='avg_featmap'`` ``ln2.`` →
``fc_norm.`` (a classifier's part, as timm names it). ``cls_token`` and ``pos_embed`` keep their
names; every other key is passed on, those of :data:`NOT_BACKBONE` among them.

A ViT whose function these backbones cannot hold is refused (``ValueError`` naming the key):
layer scale (``attn.gamma1`` / ``ffn.gamma2``) and CLIP's ``pre_norm`` have no counterpart in
them, and dropping them would change what the weights compute.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Mapping

from torch import Tensor

#: an MMPretrain ViT block's key (``backbone.`` already removed)
BLOCK_KEY = re.compile(r'layers\.(\d+)\.(.*)')
_BLOCK = (  # MMPretrain block key → timm block key
    ('ln1.', 'norm1.'),
    ('attn.', 'attn.'),
    ('ln2.', 'norm2.'),
    ('ffn.layers.0.0.', 'mlp.fc1.'),
    ('ffn.layers.1.', 'mlp.fc2.'),
)
_AROUND = (  # outside the blocks
    ('patch_embed.projection.', 'patch_embed.proj.'),
    ('ln1.', 'norm.'),
    ('ln2.', 'fc_norm.'),
)
#: the parts of an MMPretrain file around its ViT: an ``ImageClassifier``'s head, an MAE's decoder
NOT_BACKBONE = ('head.', 'neck.')
#: parts of an MMPretrain ViT that a ViT without them cannot hold
NO_COUNTERPART = {
    'attn.gamma1.': 'layer scale',
    'ffn.gamma2.': 'layer scale',
    'pre_norm.': "CLIP's norm before the blocks",
}


def is_mmpretrain_vit(state_dict: Mapping[str, Tensor]) -> bool:
    """Whether ``state_dict`` (prefixes removed) is an MMPretrain ``VisionTransformer``'s: its
    blocks' first norm is ``layers.{i}.ln1``."""
    return any(re.fullmatch(r'layers\.\d+\.ln1\.weight', key) for key in state_dict)


def mmpretrain_to_timm(state_dict: Mapping[str, Tensor]) -> 'OrderedDict[str, Tensor]':
    """An MMPretrain ViT's state dict (prefixes removed) in timm's keys (module docstring); the
    tensors are the input's, the input is not modified.

    Raises:
        ValueError: a part with no counterpart in timm's ViT (layer scale, ``pre_norm``), named.
    """
    out: OrderedDict[str, Tensor] = OrderedDict()
    for key, value in state_dict.items():
        block = BLOCK_KEY.fullmatch(key)
        rest = block.group(2) if block else key
        part = next((p for p in NO_COUNTERPART if rest.startswith(p)), None)
        if part is not None:
            raise ValueError(
                f"{key}: MMPretrain ViT with {NO_COUNTERPART[part]}, which this backbone does not "
                'have (loading the rest would change what the weights compute)'
            )
        table = _BLOCK if block else _AROUND
        old = next((o for o, _ in table if rest.startswith(o)), None)
        if old is not None:
            rest = dict(table)[old] + rest[len(old) :]
        out[f'blocks.{block.group(1)}.{rest}' if block else rest] = value
    return out
