"""The parameter schedules and the lr scaling, checked before anything is built
(:func:`dna_mm.config.check.check_config`):

* ``param_scheduler`` entries: a registered ``type`` (mmengine's ``PARAM_SCHEDULERS``), the
  arguments its class takes (a typo such as ``start_factr`` would be a ``TypeError`` once the model
  is built), the closest valid name suggested, and those it needs (``StepLR``'s ``step_size``:
  :func:`~dna_mm.utils.build_errors.required_arguments`, less the ``optimizer`` the runner gives);
* ``param_scheduler`` entries' values (:mod:`.scheduler_values`);
* (``mode='train'``) a ``param_scheduler`` entry by epoch (``by_epoch`` True, mmengine's default,
  without ``convert_to_iter_based=True``) under an iteration-based train loop (``train_cfg.type``
  ``IterBasedTrainLoop`` / ``ResumableIterBasedTrainLoop``, or ``max_iters`` without
  ``max_epochs``): mmengine's ``ParamSchedulerHook`` steps it at the end of an epoch, which that
  loop reaches only after its last iteration, so the schedule would silently never move;
* (``mode='train'``) ``train_cfg``'s keys, the arguments of its loop (``type``), and ``type`` beside
  ``by_epoch``: a child config that names another loop than its base keeps the base's keys
  (``max_epochs`` under an ``IterBasedTrainLoop``: a ``TypeError`` once the model is built), and
  the message says how to replace it whole;
* (``mode='train'``) ``auto_scale_lr`` (mmengine's ``Runner.scale_lr``): its keys ``enable`` and
  ``base_batch_size``, the others dropped silently (``base_batch=16`` would scale by the base
  config's size, ``enabled=True`` would turn nothing on), the closest valid name suggested;
  ``enable`` a bool; with it on, ``base_batch_size`` given (mmengine asserts it) and an int > 0 (0
  would be a ``ZeroDivisionError`` after the model is built, -8 a negative lr).
"""

from __future__ import annotations

from typing import Any, Optional

from mmengine.config import Config

from ..build import type_name
from .scheduler_values import scheduler_value_problems
from .values import (
    closest_name,
    not_positive,
    registered_class,
    registered_names,
    registry_of,
    type_class,
    unknown_keys,
)


def scheduler_problems(cfg: Config) -> list[str]:
    """Each ``param_scheduler`` entry (a list, one dict, or one of either per optimizer): its
    ``type`` registered, its keys those its class takes (with mmengine's
    ``convert_to_iter_based`` / ``epoch_length``; the runner gives the optimizer), the closest
    valid name suggested: a typo would be a ``TypeError`` once the model is built; and its values
    (:func:`scheduler_value_problems`)."""
    from ...utils.build_errors import accepted_arguments, required_arguments  # noqa: PLC0415

    registry = registry_of(cfg, 'PARAM_SCHEDULERS')
    if registry is None:
        return []
    out: list[str] = []
    for key, scheduler in _scheduler_entries(cfg.get('param_scheduler')):
        kind = scheduler.get('type')
        if kind is None:
            continue
        known, cls = registered_class(registry, kind) if isinstance(kind, str) else (True, kind)
        if not known:
            continue
        if cls is None:
            suggestion = closest_name(kind, registered_names(registry))
            out.append(f'{key}.type: unknown parameter scheduler {kind!r}; {suggestion}')
            continue
        valid = [a for a in accepted_arguments(cls) if a != 'optimizer']  # the runner gives it
        valid = list(dict.fromkeys([*valid, 'convert_to_iter_based', 'epoch_length']))  # mmengine's build
        given = {k: v for k, v in scheduler.items() if k != 'type' and not str(k).startswith('_')}  # _scope_
        out += unknown_keys(given, valid, key, f'an argument of {type_name(kind)}')
        missing = [a for a in required_arguments(cls) if a not in given and a != 'optimizer']
        if missing:  # a TypeError naming no key once the model is built
            out.append(f'{key} ({type_name(kind)}) needs {", ".join(repr(a) for a in missing)}')
        out += scheduler_value_problems(cls, scheduler, key)
    return out


def _scheduler_entries(schedulers: Any) -> list[tuple[str, dict]]:
    """``(key, entry)`` of each scheduler config in ``param_scheduler`` (a list, one dict, or one
    of either per optimizer: ``param_scheduler.<name>``), keyed as the messages name it
    (``param_scheduler[0]``)."""
    if isinstance(schedulers, dict) and 'type' not in schedulers:  # one per optimizer
        groups = [(f'param_scheduler.{k}', v) for k, v in schedulers.items()]
    else:
        groups = [('param_scheduler', schedulers)]
    entries = []
    for key, value in groups:
        if isinstance(value, dict):
            entries.append((key, value))
        elif isinstance(value, (list, tuple)):
            entries += [(f'{key}[{i}]', s) for i, s in enumerate(value) if isinstance(s, dict)]
    return entries


#: mmengine's iteration-based train loop and dna_mm's twin (a subclass registered under another
#: name is found through the registry)
ITERATION_LOOPS = ('IterBasedTrainLoop', 'ResumableIterBasedTrainLoop')


def iteration_loop(cfg: Config) -> Optional[str]:
    """How ``train_cfg`` makes mmengine's runner train by iterations, as the messages name it
    (``train_cfg.type='IterBasedTrainLoop'``), or ``None`` for a loop by epochs: a ``type`` of
    :data:`ITERATION_LOOPS` or a registered subclass of mmengine's ``IterBasedTrainLoop``; without
    a ``type``, ``max_iters`` without ``max_epochs`` (what
    :func:`dna_mm.engine.global_batch.scale_iteration_schedule` scales as iterations)."""
    from mmengine.runner import IterBasedTrainLoop  # noqa: PLC0415

    train_cfg = cfg.get('train_cfg')
    if not isinstance(train_cfg, dict):
        return None
    kind = train_cfg.get('type')
    if kind is None:
        iterations = 'max_iters' in train_cfg and 'max_epochs' not in train_cfg
        return 'train_cfg.max_iters without max_epochs' if iterations else None
    cls = kind
    if isinstance(kind, str):
        registry = registry_of(cfg, 'LOOPS')
        cls = registered_class(registry, kind)[1] if registry is not None else None
    by_class = isinstance(cls, type) and issubclass(cls, IterBasedTrainLoop)
    return f'train_cfg.type={type_name(kind)!r}' if by_class or type_name(kind) in ITERATION_LOOPS else None


def epoch_scheduler_problems(cfg: Config) -> list[str]:
    """A ``param_scheduler`` entry that steps by epoch (``by_epoch`` True, mmengine's default, and
    not ``convert_to_iter_based=True``) under an iteration-based train loop
    (:func:`iteration_loop`): mmengine's ``ParamSchedulerHook`` steps such a scheduler in
    ``after_train_epoch`` only, which ``IterBasedTrainLoop`` calls once, after its last iteration,
    so the schedule would never move during the run (a cosine by epoch stayed at its initial lr
    throughout), without a word."""
    loop = iteration_loop(cfg)
    if loop is None:
        return []
    return [
        f"{key}({type_name(s.get('type'))}) steps by epoch (by_epoch=True, mmengine's default) but the "
        f'train loop is iteration-based ({loop}): mmengine steps it only after the last iteration, so '
        'it would never change during the run; set by_epoch=False with its begin / end (and T_max, '
        'milestones, ...) in iterations, or convert_to_iter_based=True'
        for key, s in _scheduler_entries(cfg.get('param_scheduler'))
        if s.get('by_epoch', True) and not s.get('convert_to_iter_based', False)
    ]


#: the length of a run as each kind of mmengine's train loops counts it
LOOP_LENGTHS = ('max_epochs', 'max_iters')


def train_loop_problems(cfg: Config) -> list[str]:
    """``train_cfg``'s keys, the arguments of the loop it builds (its registered ``type``; mmengine
    passes them on, a wrong one a ``TypeError`` once the model is built), the closest valid name
    suggested; and ``type`` beside ``by_epoch`` (mmengine's runner takes one of them: a
    ``RuntimeError`` there). Both come most often from a child config that names another loop than
    its base: mmengine merges the base's ``train_cfg`` into the child's, so a child's
    ``type='IterBasedTrainLoop', max_iters=...`` keeps the base's ``max_epochs``; the message says
    how to replace it whole (``_delete_=True``)."""
    from ...utils.build_errors import accepted_arguments  # noqa: PLC0415

    train_cfg = cfg.get('train_cfg')
    if not isinstance(train_cfg, dict) or 'type' not in train_cfg:
        return []
    kind = train_cfg['type']
    replace = (
        f"a train_cfg that names another loop than its base config's keeps the base's keys: write "
        f'train_cfg = dict(_delete_=True, type={type_name(kind)!r}, ...) to replace it whole'
    )
    if 'by_epoch' in train_cfg:
        return [f"train_cfg has both type and by_epoch (mmengine's runner takes one of them); {replace}"]
    cls = type_class(registry_of(cfg, 'LOOPS'), kind)
    if cls is None:
        return []
    valid = [a for a in accepted_arguments(cls) if a not in ('runner', 'dataloader')]
    out = []
    for key in train_cfg:
        if key == 'type' or key in valid or str(key).startswith('_'):  # _scope_: the registry's
            continue
        length = next((k for k in LOOP_LENGTHS if k in valid and key in LOOP_LENGTHS), None)
        if length is not None:
            out.append(
                f'train_cfg.{key}: the loop {type_name(kind)} counts its length in {length}; {replace}'
            )
        else:
            out += unknown_keys({key: None}, valid, 'train_cfg', f'an argument of the loop {type_name(kind)}')
    return out


#: the keys of ``auto_scale_lr`` mmengine's ``Runner.scale_lr`` reads (0.10.x; dna_mm's runner
#: reads the same: tests/config/test_schedule_check.py holds them to mmengine's source)
AUTO_SCALE_LR_KEYS = ('enable', 'base_batch_size')


def auto_scale_lr_problems(auto_scale_lr: Any) -> list[str]:
    """``auto_scale_lr``: a dict of :data:`AUTO_SCALE_LR_KEYS` (mmengine's ``Runner.scale_lr``
    reads those and drops the others: ``base_batch=16`` would scale by the base config's
    ``base_batch_size``, ``enabled=True`` would turn nothing on), the closest valid name
    suggested; ``enable`` a bool (mmengine takes its truth: ``'False'`` would scale); with
    ``enable`` on, ``base_batch_size`` an int > 0 (mmengine asserts it is given; 0 stops the run
    on a ``ZeroDivisionError`` after the model is built, -8 trains with a negative lr)."""
    if auto_scale_lr is None:
        return []
    if not isinstance(auto_scale_lr, dict):
        return [
            f'auto_scale_lr must be a dict (enable=True / False, base_batch_size=...), got {auto_scale_lr!r}'
        ]
    given = {k: v for k, v in auto_scale_lr.items() if not str(k).startswith('_')}  # _scope_
    out = unknown_keys(
        given, list(AUTO_SCALE_LR_KEYS), 'auto_scale_lr', "a key mmengine's Runner.scale_lr reads"
    )
    enable = auto_scale_lr.get('enable', False)
    if not isinstance(enable, bool):
        out.append(f'auto_scale_lr.enable must be True or False, got {enable!r}')
    elif enable and 'base_batch_size' not in auto_scale_lr:
        out.append(
            'auto_scale_lr needs base_batch_size with enable=True (the total batch size the lr is set '
            'for; mmengine asserts it)'
        )
    elif enable:
        out += not_positive(auto_scale_lr['base_batch_size'], 'auto_scale_lr.base_batch_size', integer=True)
    return out
