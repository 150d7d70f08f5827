"""Layer-wise learning-rate decay for ViTDet (MMDetection ``projects/ViTDet``'s constructor).

Configured as the reference::

    optim_wrapper = dict(constructor='LayerDecayOptimizerConstructor',
                         paramwise_cfg=dict(decay_rate=0.7, decay_type='layer_wise', num_layers=12),
                         optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.1, ...))

Layer ids (``L = num_layers``): ``backbone.patch_embed.*`` / ``backbone.pos_embed`` → 0,
``backbone.blocks.{i}.*`` → ``i + 1``, everything else (the rest of the backbone, neck, heads)
→ ``L + 1``; a parameter's lr is ``lr · decay_rate ** (L + 1 − id)`` (the heads keep ``lr``).
Weight decay is 0 for the block norms (``backbone.blocks.*norm*``) and ``pos_embed``, the base
value for everything else, biases included, as in the reference.

An attention member's parameters sit in ``backbone.blocks.{i}.attn`` and so take their block's
id (DnA's ``q_neg``, ``v_neg``, ``alpha``). Its 1-d parameters other than biases get **no weight
decay**: DnA's per-head gain ``alpha``, whose decay would pull the negative branch to 0, i.e.
towards plain softmax attention, a prior the method does not have; differential attention's
``lambda_*`` vectors, whose decay would pull ``λ`` to its fixed ``λ_init``; the gains of a
member of one's own. So the baselines are treated as the method is, and as in their ImageNet
pre-training (timm's optimizer factory, which the authors train with, leaves every 1-d
parameter undecayed; ``configs/imagenet/_base_/adamw_cosine_300e.py``: ``flat_decay_mult=0``).
"""

from __future__ import annotations

import json
import re

import torch
from mmengine.dist import get_dist_info
from mmengine.logging import MMLogger
from mmengine.optim import DefaultOptimWrapperConstructor
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS
from torch import nn

_BLOCK = re.compile(r'backbone\.blocks\.(\d+)\.')


def get_layer_id(name: str, num_layers: int) -> int:
    """Layer id of parameter ``name`` of a detector whose ViT backbone has ``num_layers`` blocks."""
    if name.startswith(('backbone.patch_embed', 'backbone.pos_embed')):
        return 0
    block = _BLOCK.match(name)
    return int(block.group(1)) + 1 if block else num_layers + 1


def no_weight_decay(name: str, param: torch.Tensor) -> bool:
    """Block norms, ``pos_embed`` and an attention member's 1-d parameters that are not biases
    (module docstring: DnA's ``alpha``, differential attention's ``lambda_*``) are not decayed."""
    in_block = name.startswith('backbone.blocks.')
    gain = in_block and '.attn.' in name and param.ndim == 1 and not name.endswith('.bias')
    return 'pos_embed' in name or gain or (in_block and 'norm' in name)


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimizerConstructor(DefaultOptimWrapperConstructor):
    """Parameter groups per (layer id, decayed or not) with ``lr_scale`` and ``lr`` set.

    ``paramwise_cfg`` keys: ``num_layers`` (backbone depth, required), ``decay_rate``
    (required), ``decay_type`` (only ``'layer_wise'``, the reference's).
    """

    def add_params(self, params: list[dict], module: nn.Module, **kwargs) -> None:
        cfg = self.paramwise_cfg
        missing = [k for k in ('num_layers', 'decay_rate') if k not in cfg]
        if missing:
            raise KeyError(f'LayerDecayOptimizerConstructor: paramwise_cfg needs {missing}, got {dict(cfg)}')
        if cfg.get('decay_type', 'layer_wise') != 'layer_wise':
            raise ValueError(
                f"LayerDecayOptimizerConstructor: only decay_type='layer_wise' is "
                f"supported, got {cfg['decay_type']!r}"
            )
        num_layers, decay_rate = int(cfg['num_layers']), float(cfg['decay_rate'])
        groups: dict[str, dict] = {}
        for name, param in module.named_parameters():
            if not param.requires_grad:
                continue
            layer_id = get_layer_id(name, num_layers)
            decay = not no_weight_decay(name, param)
            group_name = f'layer_{layer_id}_{"decay" if decay else "no_decay"}'
            if group_name not in groups:
                scale = decay_rate ** (num_layers + 1 - layer_id)
                group = dict(
                    params=[], param_names=[], group_name=group_name, lr_scale=scale, lr=scale * self.base_lr
                )
                if not decay or self.base_wd is not None:  # else the optimizer's default
                    group['weight_decay'] = self.base_wd if decay else 0.0
                groups[group_name] = group
            groups[group_name]['params'].append(param)
            groups[group_name]['param_names'].append(name)
        if get_dist_info()[0] == 0:
            keys = ('lr_scale', 'lr', 'weight_decay')
            shown = {k: dict({n: g.get(n) for n in keys}, params=len(g['params'])) for k, g in groups.items()}
            MMLogger.get_current_instance().info(
                f'LayerDecayOptimizerConstructor (decay_rate={decay_rate}, num_layers='
                f'{num_layers}): {json.dumps(shown, indent=1)}'
            )
        params.extend(groups.values())
