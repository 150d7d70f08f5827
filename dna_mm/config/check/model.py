"""The model's values and its attention, checked before anything is built
(:func:`dna_mm.config.check.check_config`, :func:`~dna_mm.config.check.model_problems`):

* a head's ``average_clips`` (MMAction2's): ``'prob'`` or ``'score'`` (``'mean'`` stops the test
  after it has run; ``None`` gives one score per view, which no metric reads);
* the model's sizes (and the top-level ``data_preprocessor``'s): every ``num_classes`` an int > 0,
  every ``num_heads`` an int > 0 that divides the width beside it (``embed_dims`` /
  ``embed_dim``: MMAction2's TimeSformer would stop on torch's assertion), every width,
  ``patch_size``, ``num_transformer_layers``, ``num_frames`` and ``img_size`` an int > 0; the
  dropout and stochastic-depth rates (``drop_path_rate``, ``dropout_ratio``, ``attn_drop``, ...)
  in [0, 1) (a ``drop_path_rate`` of 2 ends in NaN losses); ``alpha_init`` (DnA's initial ``α``)
  a number; the keys of a ``type='with_attention'`` that it does not take (the model's own
  arguments, which go in its ``model``) (:func:`~dna_mm.config.check.model_problems`: these,
  the attention names and :mod:`~dna_mm.config.check.recognizer`'s model-only checks, for a tool
  that builds the model without data);
* attention names under ``model`` (``attn_cfg``, also per step: ``attn_cfg.temporal`` /
  ``.spatial``; and its deprecated aliases): one of dna_mm's, else the closest valid name is
  suggested (``'dnaa'`` → ``DnAAttention / dna``); a DnA ``variant`` that is not one of the
  family's, the closest one suggested (``'qpm_vmp'`` → ``'qpm_vpm'``);
* every ``init_cfg`` under ``model`` (a dict or a list of them, and each ``override``): the
  arguments of its initialiser (mmengine's ``WEIGHT_INITIALIZERS``: ``TruncNormal``,
  ``Pretrained``, ...; an ``override`` its ``name`` and a ``type`` of its own where it gives other
  keys), the closest valid name suggested: a typo (``sdt``) would be a ``TypeError`` traceback at
  ``init_weights``, once the model is built;
* a ``model.data_preprocessor`` beside a top-level ``data_preprocessor`` (MMPretrain's
  configs, the ImageNet ones, keep the normalisation there) that lacks the top-level one's
  ``mean`` / ``std`` / ``to_rgb``: mmengine's runner merges the top-level one only into a model
  that has none, so ``--cfg-options model.data_preprocessor.num_classes=4`` would silently
  train and test on unnormalised pixels; ``data_preprocessor.<key>`` is named instead.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterator

from mmengine.config import Config

from ...errors import ConfigError
from ...models.attention.builder import OWN_MEMBER, suggest_attention
from ..build import type_name
from .values import argument_problems, is_number, not_positive, registry_of, unknown_keys

#: the keyword every host takes its attention by (``dna_mm.models.attention.builder.ATTENTION_KEY``),
#: then DnATimeSformer's deprecated aliases (removed in the next release)
ATTENTION_KEYS = ('attn_cfg', 'temporal_attn', 'spatial_attn')
#: the per-step keys of a DnATimeSformer's ``attn_cfg=dict(temporal=..., spatial=...)``
STEP_KEYS = ('temporal', 'spatial')


def preprocessor_problems(cfg: Config) -> list[str]:
    """The top-level ``data_preprocessor``'s normalisation keys a ``model.data_preprocessor``
    would drop (the runner uses the model's alone when it has one)."""
    top, model = cfg.get('data_preprocessor'), cfg.get('model')
    own = model.get('data_preprocessor') if isinstance(model, dict) else None
    if not isinstance(top, dict) or not isinstance(own, dict):
        return []
    given = [key for key in ('mean', 'std') if top.get(key) is not None]
    given += ['to_rgb'] if top.get('to_rgb') else []  # False: nothing to lose
    lost = [key for key in given if key not in own]
    if not lost:
        return []
    return [
        f'model.data_preprocessor is set, so the runner ignores the top-level data_preprocessor and '
        f'its {" / ".join(lost)} (the model would see unnormalised pixels): set '
        f'data_preprocessor.<key> instead (e.g. data_preprocessor.num_classes), or give '
        f'model.data_preprocessor the {" / ".join(lost)} too'
    ]


#: what an attention splits into heads: a host's width, by the name it takes it (MMAction2 and
#: mmcv ``embed_dims``, timm and ViTDet ``embed_dim``)
WIDTH_KEYS = ('embed_dims', 'embed_dim')
#: sizes under ``model`` that are ints > 0 (each of them, in a list of one per stage or a pair):
#: a clip's frames and an image's side too (a recognizer's random clips in the benchmarks have them)
SIZE_KEYS = (*WIDTH_KEYS, 'patch_size', 'num_transformer_layers', 'num_frames', 'img_size')
#: probabilities under ``model``, in [0, 1): dropout (MMAction2's ``dropout_ratio``, mmcv's and
#: timm's ``*drop*``) and stochastic depth (a rate of 1 drops a whole block and divides by 0)
PROBABILITY_KEYS = (
    'drop_path_rate',
    'dropout_ratio',
    'attn_drop',
    'proj_drop',
    'ffn_drop',
    'drop_rate',
    'attn_drop_rate',
    'proj_drop_rate',
    'drop_prob',
)
#: numbers under ``model``: DnA's initial ``α`` (its attention's and a ``dna_vit_*`` model's)
NUMBER_KEYS = ('alpha_init',)


def model_value_problems(node: Any, key: str) -> Iterator[str]:
    """The sizes and arguments of the parts under ``node`` (the model config, or the top-level
    ``data_preprocessor``) that would stop the build with a traceback: ``num_classes`` a
    positive int (or 0 in a backbone: timm's "no classifier"), ``num_heads`` a positive int that
    divides the width beside it (:data:`WIDTH_KEYS`; a list of them, one per stage, is the host's
    own business), the :data:`SIZE_KEYS` ints > 0, the :data:`PROBABILITY_KEYS` in [0, 1), the
    :data:`NUMBER_KEYS` numbers, and the keys of a ``type='with_attention'`` (the model's own
    arguments go in its ``model``)."""
    if isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from model_value_problems(value, f'{key}[{i}]')
        return
    if not isinstance(node, dict):
        return
    none = (0,) if 'backbone' in key.split('.') else ()  # a timm backbone's 0: no classifier
    yield from not_positive(node.get('num_classes'), f'{key}.num_classes', none, integer=True)
    for name in SIZE_KEYS:
        sizes = node.get(name)
        for size in sizes if isinstance(sizes, (list, tuple)) else [sizes]:
            yield from not_positive(size, f'{key}.{name}', integer=True)
    for name in PROBABILITY_KEYS:
        rate = node.get(name)
        if rate is not None and (not is_number(rate) or not 0 <= rate < 1):
            yield f'{key}.{name} must be a number in [0, 1) (a probability), got {rate!r}'
    for name in (n for n in NUMBER_KEYS if n in node):
        if not is_number(node[name]):
            yield f'{key}.{name} must be a number, got {node[name]!r}'
    heads = node.get('num_heads')
    if heads is not None and not isinstance(heads, (list, tuple)):
        wrong = not_positive(heads, f'{key}.num_heads', integer=True)
        yield from wrong
        width_key = next((k for k in WIDTH_KEYS if k in node), None)
        width = node.get(width_key)
        if not wrong and isinstance(width, int) and not isinstance(width, bool) and width % heads:
            yield (
                f'{key}.num_heads ({heads}) must divide {key}.{width_key} ({width}): each head takes '
                f'{width_key} / num_heads channels'
            )
    if 'with_cp' in node and not isinstance(node['with_cp'], bool):
        yield f'{key}.with_cp must be True or False (activation checkpointing), got {node["with_cp"]!r}'
    if 'average_clips' in node and node['average_clips'] not in ('prob', 'score'):
        yield (
            f"{key}.average_clips must be 'prob' or 'score' (the views of a video averaged after or "
            f"before the softmax), got {node['average_clips']!r}"
            + (
                ': None keeps one score per view, which the metrics, --dump and infer cannot read'
                if node['average_clips'] is None
                else ''
            )
        )
    if type_name(node.get('type')) == 'with_attention':
        yield from _with_attention_keys(node, key)
    for name, value in node.items():
        yield from model_value_problems(value, f'{key}.{name}')


def _with_attention_keys(node: dict, key: str) -> list[str]:
    """The keys of a ``with_attention`` config it does not take (it raises a ``TypeError`` when
    it is built): the model's own arguments belong in its ``model``."""
    from mmengine.registry import MODELS  # noqa: PLC0415

    from ...utils.build_errors import accepted_arguments  # noqa: PLC0415

    kind = node['type']
    cls = MODELS.get(kind) if isinstance(kind, str) else kind
    valid = [a for a in accepted_arguments(cls) if a != 'registry']  # the registry's own
    given = {k: v for k, v in node.items() if k != 'type' and not str(k).startswith('_')}  # _scope_
    what = f"an argument of with_attention (the model's own go in {key}.model)"
    return unknown_keys(given, valid, key, what)


def attention_problems(node: Any, key: str) -> Iterator[str]:
    """An unknown attention name (a short name or a config dict's ``type``) anywhere under
    ``node`` (the model config): the key, the name, the closest valid names."""
    if isinstance(node, dict):
        for name, value in node.items():
            sub = f'{key}.{name}'
            per_step = isinstance(value, dict) and 'type' not in value and set(STEP_KEYS) & set(value)
            if name == 'attn_cfg' and per_step:
                for step in (s for s in STEP_KEYS if s in value):
                    yield from _unknown_attention(value[step], f'{sub}.{step}')
            elif name in ATTENTION_KEYS:
                yield from _unknown_attention(value, sub)
            else:
                yield from attention_problems(value, sub)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from attention_problems(value, f'{key}[{i}]')


def _unknown_attention(value: Any, key: str) -> Iterator[str]:
    """The problem of an attention choice ``value`` at ``key``: an unknown name, an argument its
    member does not take, or a ``variant`` of DnA's family that is not one (a member with DnA's
    negative branch, :attr:`~dna_mm.models.attention.AttentionBase.has_negative_branch`, or a
    config without a type: a ``dna_vit_*`` model's DnA), the closest valid name suggested. The
    member is named as a config names it: a short or registered name, a dotted path to it or its
    class (:func:`~dna_mm.models.attention.builder.member_type`)."""
    from ...family import method_attention  # noqa: PLC0415
    from ...models.attention.builder import (  # noqa: PLC0415
        accepted_arguments,
        attention_class,
        member_type,
        unknown_arguments,
    )

    if isinstance(value, str):  # a name with a method's settings: 'dna:apm+gated' (attention_cfg)
        try:
            member, settings = method_attention(value)
        except ConfigError as err:
            yield f'{key}: {err}'
            return
        if settings:
            yield from _unknown_attention(dict(type=member, **settings), key)
            return
    attn = value.get('type') if isinstance(value, dict) else value
    member = member_type(attn)
    if isinstance(attn, str) and member is None:
        where = f'{key}.type' if isinstance(value, dict) else key
        own = OWN_MEMBER if attn != attn.lower() or '.' in attn else ''  # a class's name, or a path
        yield f'{where}: unknown attention {attn!r}; {suggest_attention(attn)}{own}'
        return
    if isinstance(value, dict) and member is not None:
        takes = sorted(accepted_arguments(attention_class(member)))
        for name in unknown_arguments(value):
            step = key.endswith('attn_cfg') and difflib.get_close_matches(name, STEP_KEYS)
            near = difflib.get_close_matches(name, takes, n=1)
            hint = (
                ' (one attention per step: attn_cfg=dict(_delete_=True, temporal=..., spatial=...))'
                if step
                else f'; did you mean {near[0]!r}?'
                if near
                else ''
            )
            yield f'{key}.{name}: {type_name(member)} takes no argument {name!r}{hint}'
    if isinstance(value, dict) and 'variant' in value and (attn is None or member is not None):
        yield from _variant_problems(value['variant'], member, f'{key}.variant')


def _variant_problems(variant: Any, member: Any, key: str) -> list[str]:
    """A DnA ``variant`` at ``key`` that is not one of the family's
    (:func:`~dna_mm.family.canonical_variant`), where the member ``member`` (its registered name
    or class; ``None``: the host's DnA) has DnA's negative branch."""
    from ...family import canonical_variant  # noqa: PLC0415
    from ...models.attention.builder import attention_class  # noqa: PLC0415

    if member is not None and not attention_class(member).has_negative_branch:
        return []
    try:
        canonical_variant(variant)
    except ConfigError as err:
        return [f'{key}: {err}']
    return []


def init_cfg_problems(cfg: Config) -> list[str]:
    """Each ``init_cfg`` under ``model`` (module docstring): its initialisers' arguments, and each
    ``override``'s (mmengine 0.10.7's ``_initialize_override``: its ``name``, and beside it either
    nothing, the parent's initialiser then, or a ``type`` of its own and its arguments)."""
    registry = registry_of(cfg, 'WEIGHT_INITIALIZERS')
    out: list[str] = []
    for key, init in _init_cfgs(cfg.get('model'), 'model') if registry is not None else ():
        overrides = init.get('override')
        own = {k: v for k, v in init.items() if k != 'override'}
        out += argument_problems(registry, own, key)
        listed = isinstance(overrides, (list, tuple))
        for i, override in enumerate(overrides if listed else [overrides]):
            at = f'{key}.override' + (f'[{i}]' if listed else '')
            own = {k: v for k, v in override.items() if k != 'name'} if isinstance(override, dict) else {}
            if isinstance(override, dict) and 'name' not in override:
                out.append(f'{at} needs name (the attribute of the module it initialises)')
            if own and 'type' not in own:  # only a name: the parent's initialiser
                out.append(
                    f'{at} needs type (an override with keys beside name is an initialiser of its own)'
                )
            out += argument_problems(registry, own, at) if own else []
    return out


def _init_cfgs(node: Any, key: str) -> Iterator[tuple[str, dict]]:
    """``(config key, initialiser dict)`` of every ``init_cfg`` under ``node``."""
    if isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _init_cfgs(value, f'{key}[{i}]')
    if not isinstance(node, dict):
        return
    for name, value in node.items():
        if name != 'init_cfg':
            yield from _init_cfgs(value, f'{key}.{name}')
            continue
        listed = isinstance(value, (list, tuple))
        for i, init in enumerate(value if listed else [value]):
            if isinstance(init, dict):
                yield f'{key}.init_cfg' + (f'[{i}]' if listed else ''), init
