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

``paramwise_cfg.custom_keys`` apply as in mmengine's constructor (one key per parameter, the
longest that matches: :mod:`dna_mm.engine.param_groups`), on top of the layer's rate: a key's
``lr_mult`` multiplies its parameters' layer-decayed lr (``0`` freezes them), its
``decay_mult`` sets their weight decay in place of the rule above, and its other entries go
into their parameter group as they are. Any other ``paramwise_cfg`` key (mmengine's
``bias_decay_mult``, ...) is refused, as is a ``num_layers`` that is not the backbone's depth:
the decay would start from a layer the model does not have.
"""

from __future__ import annotations

import difflib
import json
import re

import torch
from mmengine.dist import get_dist_info
from mmengine.logging import MMLogger
from mmengine.optim import DefaultOptimWrapperConstructor
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS
from torch import nn

from ..errors import ConfigError
from .param_groups import matched_names, winning_key

_BLOCK = re.compile(r'backbone\.blocks\.(\d+)\.')
#: the ``paramwise_cfg`` keys :class:`LayerDecayOptimizerConstructor` reads
PARAMWISE_KEYS = ('num_layers', 'decay_rate', 'decay_type', 'custom_keys')
AT = 'optim_wrapper.paramwise_cfg'


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

    ``paramwise_cfg`` keys (:data:`PARAMWISE_KEYS`): ``num_layers`` (the backbone's depth,
    required), ``decay_rate`` (required), ``decay_type`` (only ``'layer_wise'``, the
    reference's), ``custom_keys`` (module docstring); a mistake in them is a
    :class:`~dna_mm.errors.ConfigError`.
    """

    PARAMWISE_KEYS = PARAMWISE_KEYS  # what dna_mm.config.check.optim holds a config's paramwise_cfg to

    def add_params(self, params: list[dict], module: nn.Module, **kwargs) -> None:
        cfg = self.paramwise_cfg
        num_layers, decay_rate = _checked(cfg, module)
        custom_keys = cfg.get('custom_keys') or {}
        groups: dict[str, dict] = {}
        for (name, param), matched in zip(module.named_parameters(), matched_names(module), strict=True):
            if not param.requires_grad:
                continue
            layer_id = get_layer_id(name, num_layers)
            key = winning_key(matched, custom_keys)
            custom = dict(custom_keys[key]) if key is not None else {}
            lr_mult = custom.pop('lr_mult', 1.0)
            decay_mult = float(custom.pop('decay_mult', 0.0 if no_weight_decay(name, param) else 1.0))
            kind = {1.0: 'decay', 0.0: 'no_decay'}.get(decay_mult, f'decay_x{decay_mult:g}')
            # one group per set of settings: a key that gives the rule's settings changes no group
            extra = ''.join(f'_{k}={v}' for k, v in sorted(custom.items()))
            group_name = f'layer_{layer_id}_{kind}' + (f'_lr_x{lr_mult:g}' if lr_mult != 1 else '') + extra
            if group_name not in groups:
                scale = decay_rate ** (num_layers + 1 - layer_id) * lr_mult
                group = dict(
                    params=[], param_names=[], group_name=group_name, lr_scale=scale, lr=scale * self.base_lr
                )
                if self.base_wd is not None:
                    group['weight_decay'] = self.base_wd * decay_mult
                elif decay_mult == 0:  # else the optimizer's default
                    group['weight_decay'] = 0.0
                groups[group_name] = dict(group, **custom)
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


def _checked(cfg: dict, module: nn.Module) -> tuple[int, float]:
    """``paramwise_cfg``'s ``num_layers`` and ``decay_rate``, after checking its keys against
    :data:`PARAMWISE_KEYS` and ``num_layers`` against the depth of ``module``'s backbone (its
    ``backbone.blocks.{i}``); a :class:`~dna_mm.errors.ConfigError` naming the key otherwise."""
    problems = []
    for key in cfg:
        if key not in PARAMWISE_KEYS:
            near = difflib.get_close_matches(str(key), PARAMWISE_KEYS, n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            problems.append(
                f'{AT}.{key} is not a key LayerDecayOptimizerConstructor reads ({hint}it reads: '
                f'{", ".join(PARAMWISE_KEYS)}; a setting for some parameters goes in custom_keys)'
            )
    problems += [
        f'{AT}.{key} is required by LayerDecayOptimizerConstructor'
        for key in PARAMWISE_KEYS[:2]
        if key not in cfg
    ]
    if cfg.get('decay_type', 'layer_wise') != 'layer_wise':
        problems.append(f"{AT}.decay_type must be 'layer_wise' (the only one), got {cfg['decay_type']!r}")
    depth = 1 + max(
        (int(m.group(1)) for n, _ in module.named_parameters() if (m := _BLOCK.match(n))), default=-1
    )
    layers = cfg.get('num_layers')
    if 'num_layers' in cfg and (isinstance(layers, bool) or not isinstance(layers, int) or layers != depth):
        problems.append(
            f"{AT}.num_layers must be the backbone's depth, {depth} (backbone.blocks.0-{depth - 1}), "
            f'got {layers!r}'
            if depth
            else f'{AT}: LayerDecayOptimizerConstructor is for a model whose backbone has blocks '
            f'(backbone.blocks.{{i}}); this one has none'
        )
    rate = cfg.get('decay_rate')
    if 'decay_rate' in cfg and (
        isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1
    ):
        problems.append(f'{AT}.decay_rate must be a number in (0, 1], got {rate!r}')
    if problems:
        raise ConfigError('; '.join(problems))
    return int(layers), float(rate)
