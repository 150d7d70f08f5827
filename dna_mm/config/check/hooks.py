"""The hooks' arguments, and the checkpoint and early-stopping hooks against what the validation
reports, checked before anything is built (:func:`dna_mm.config.check.check_config`):

* the keys of each hook of ``custom_hooks`` and ``default_hooks``: the arguments of its class,
  and for mmengine's ``EMAHook`` those of the averaged model it passes the others on to at the
  start of the run (``momentm``: a ``TypeError`` traceback once the model is built), the closest
  valid name suggested; a ``default_hooks`` entry without a ``type`` that is none of the runner's
  default hooks (``checkpoin``: mmengine's ``KeyError`` traceback as the runner is made);
* ``default_hooks.checkpoint``'s keys: mmengine's ``CheckpointHook`` passes the ones it does not
  know on to the checkpoint save, where a typo (``intervl``) would fail only at the first save,
  after an epoch of training; the closest valid name is suggested;
* ``default_hooks.checkpoint.rule``: ``'greater'``, ``'less'`` or None (or a list of them);
* ``default_hooks.checkpoint.save_best``: a metric the validation reports, where the
  evaluator's keys follow from its config (MMAction2's ``AccMetric``: ``acc/top{k}`` for its
  ``topk``, which the runs limit to k < the number of classes, ``acc/mean1``, and on multi-label
  data ``acc/mmit_mean_average_precision`` / ``acc/mean_average_precision``); mmengine would
  stop on a ``KeyError`` after the first validation (other evaluators: ``AtomicCheckpointHook``
  names the reported keys then);
* (``mode='train'``) an mmengine ``EarlyStoppingHook`` in ``custom_hooks``: its ``monitor``
  given, and a metric the validation reports where the evaluator's keys follow from its config
  (as for ``save_best``): the hook would only warn at each validation (``acc/top_1``) and never
  stop the run early.
"""

from __future__ import annotations

import difflib
from typing import Any

from mmengine.config import Config

from ...utils.default_hooks import MMENGINE_DEFAULT_HOOKS
from ..build import type_name
from .evaluation import evaluator_keys
from .values import class_arguments, has_base, registry_of, type_class, unknown_keys


def early_stopping_problems(cfg: Config) -> list[str]:
    """Each mmengine ``EarlyStoppingHook`` in ``custom_hooks``: its ``monitor`` given (a
    ``TypeError`` as the runner is made) and a metric the validation reports, where the
    evaluator's keys follow from its config (:func:`evaluator_keys`, as for ``save_best``): with
    another key the hook only warns at each validation and the run never stops early."""
    keys = evaluator_keys(cfg.get('val_evaluator'))
    hooks = cfg.get('custom_hooks')
    out = []
    for i, hook in enumerate(hooks if isinstance(hooks, (list, tuple)) else []):
        if not isinstance(hook, dict) or type_name(hook.get('type')) != 'EarlyStoppingHook':
            continue
        key = f'custom_hooks[{i}](EarlyStoppingHook)'
        monitor = hook.get('monitor')
        if monitor is None:
            reported = f': {", ".join(keys)}' if keys is not None else ''
            out.append(f'{key} needs monitor (the metric it watches, one the validation reports{reported})')
        elif keys is not None and monitor not in keys:
            out.append(
                f'{key}.monitor={monitor!r}: the validation reports {", ".join(keys)} (mmengine would only '
                'warn at each validation and never stop early)'
            )
    return out


def checkpoint_keys(hook: Any) -> list[str]:
    """Keys of ``default_hooks.checkpoint`` that neither mmengine's ``CheckpointHook`` nor the
    runner's ``save_checkpoint`` (where the hook passes the rest) takes."""
    if not isinstance(hook, dict) or type_name(hook.get('type', 'CheckpointHook')) != 'CheckpointHook':
        return []
    from mmengine.hooks import CheckpointHook
    from mmengine.runner import Runner

    from ...utils.build_errors import accepted_arguments

    valid = list(
        dict.fromkeys(accepted_arguments(CheckpointHook) + accepted_arguments(Runner.save_checkpoint))
    )
    out = []
    for key in sorted(
        k for k in set(hook) - {'type', 'priority', *valid} if not k.startswith('_')
    ):  # _scope_
        close = difflib.get_close_matches(key, valid, n=3, cutoff=0.6)
        hint = (
            f"did you mean {' / '.join(repr(c) for c in close)}?" if close else f"it takes {', '.join(valid)}"
        )
        out.append(
            f'default_hooks.checkpoint.{key}: the hook CheckpointHook takes no argument {key!r}; {hint}'
        )
    return out


#: hooks that pass the arguments they do not name on to a class they build at the start of the run:
#: hook -> (its argument naming that class, the class's default, the registry it is built from,
#: the arguments the hook gives it itself)
FORWARDING_HOOKS = {'EMAHook': ('ema_type', 'ExponentialMovingAverage', 'MODELS', ('model',))}


def hook_argument_problems(cfg: Config) -> list[str]:
    """The keys of each hook of ``custom_hooks`` and ``default_hooks`` (but the checkpoint hook's:
    :func:`checkpoint_keys`): the arguments of its registered class (mmengine builds it with them:
    a ``TypeError`` as the runner is made) and, for a hook of :data:`FORWARDING_HOOKS` (mmengine's
    ``EMAHook``), those of the class it passes the others on to at the start of the run (its
    ``ExponentialMovingAverage``: a ``TypeError`` traceback once the model is built), the closest
    valid name suggested. A hook that takes any other keyword is its own affair."""
    from ...utils.build_errors import accepted_arguments  # noqa: PLC0415

    hooks = cfg.get('custom_hooks')
    listed = [
        (f'custom_hooks[{i}]', h) for i, h in enumerate(hooks if isinstance(hooks, (list, tuple)) else [])
    ]
    defaults = cfg.get('default_hooks')
    named = [(f'default_hooks.{k}', h) for k, h in (defaults.items() if isinstance(defaults, dict) else [])]
    registry, base = registry_of(cfg, 'HOOKS'), has_base(cfg)
    out = []
    for key, hook in listed + named:
        if not isinstance(hook, dict) or key == 'default_hooks.checkpoint':
            continue
        if key.startswith('default_hooks.') and 'type' not in hook:  # merged into the runner's, or unknown
            out += _default_hook_problems(key)
            continue
        cls = type_class(registry, hook.get('type')) if registry is not None else None
        if cls is None:
            continue
        name = type_name(hook['type'])
        valid = class_arguments(cls)
        what = f'an argument of {name}'
        forward = next((f for hook_cls, f in FORWARDING_HOOKS.items() if _named(cls, hook_cls)), None)
        if forward is not None:
            valid = accepted_arguments(cls)
            argument, default, registry_name, given = forward
            target = hook.get(argument, default)
            target_cls = type_class(registry_of(cfg, registry_name), target)
            if target_cls is None:
                continue
            valid += [a for a in accepted_arguments(target_cls) if a not in given]
            what = f'an argument of {name} or of its {type_name(target)}'
        elif valid is None:
            continue
        keys = {k: v for k, v in hook.items() if k not in ('type', 'priority') and not str(k).startswith('_')}
        merged = key if base and key.startswith('default_hooks.') else ''  # custom_hooks: a list, replaced
        out += unknown_keys(keys, valid, f'{key}({name})', what, merged=merged)
    return out


def _default_hook_problems(key: str) -> list[str]:
    """A ``default_hooks`` entry without a ``type``: one of the runner's default hooks (merged
    into it), or a message naming the closest (mmengine's ``KeyError`` as the runner is made)."""
    name = key.removeprefix('default_hooks.')
    if name in MMENGINE_DEFAULT_HOOKS:
        return []
    near = difflib.get_close_matches(name, MMENGINE_DEFAULT_HOOKS, n=1)
    hint = f'did you mean {near[0]!r}? ' if near else ''
    return [
        f"{key} is not one of the runner's default hooks ({hint}valid: {', '.join(MMENGINE_DEFAULT_HOOKS)}), "
        'and a hook of your own needs its type'
    ]


def _named(cls: type, name: str) -> bool:
    """Whether ``cls`` or a class it derives from is called ``name``."""
    return any(k.__name__ == name for k in cls.__mro__)


def rule_problems(rule: Any) -> list[str]:
    """``default_hooks.checkpoint.rule``: ``'greater'``, ``'less'`` or ``None`` (by the metric's
    name), or a list of them, one per ``save_best`` key (mmengine's ``CheckpointHook`` raises a
    ``KeyError`` as the hooks are registered)."""
    rules = rule if isinstance(rule, (list, tuple)) else [rule]
    wrong = [r for r in rules if r not in ('greater', 'less', None)]
    return [
        f"default_hooks.checkpoint.rule must be 'greater', 'less' or None (chosen by the metric's name), "
        f'or a list of them, one per save_best key, got {r!r}'
        for r in wrong[:1]
    ]


def save_best_problems(save_best: Any, evaluator: Any) -> list[str]:
    keys = evaluator_keys(evaluator)
    wanted = [save_best] if isinstance(save_best, str) else list(save_best or [])
    unknown = [k for k in wanted if k != 'auto' and keys is not None and k not in keys]
    return [
        f'default_hooks.checkpoint.save_best={k!r}: the validation reports {", ".join(keys)} '
        f"(or 'auto': the first of them)"
        for k in unknown
    ]
