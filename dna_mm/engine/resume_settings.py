"""A resumed run keeps the optimizer and schedule settings of its config, not of its checkpoint.

mmengine's ``Runner.resume`` loads the optimizer's and the parameter schedulers' state dicts as
they were saved, settings included: a run resumed with ``--cfg-options
train_cfg.max_epochs=30`` (the milestones moved with it) or ``optim_wrapper.optimizer.lr=0.01``
or another weight decay would go on with the checkpoint's milestones, lr and weight decay, and
nothing would say so. Here the config wins, as a researcher who changes a setting of a resumed
run expects, and one log line names each change:

* an optimizer option no scheduler sets (``weight_decay``, ``betas``, ``eps``, ...): the
  config's value, in every param group it changes;
* a scheduler's settings (``milestones``, ``end``, ``T_max``, ``gamma``, ...) or the values it
  starts from (``base_values``: the config's lr, scaled by ``auto_scale_lr`` and each group's
  ``lr_mult``): the config's schedulers from step 0, stepped as many times as the checkpoint's
  had been (each its own ``_global_step``), so the scheduled values are those of the config's
  schedule at the point where the run goes on.

A checkpoint saved without the optimizer's or the schedulers' state (``best_*.pth``, or a
checkpoint hook with ``save_optimizer=False`` / ``save_param_scheduler=False``; mmengine resumes
from it without a word) is resumed on the config's schedule replayed to where the run stopped
(:func:`replay_to`), not from its step 0 (a warm-up again, at the end of a run), and one warning
says what starts afresh (:func:`missing_state`).

A run resumed on another number of processes (or per-process batch) counts other iterations: its
runner converts the saved iteration (:func:`dna_mm.engine.global_batch.layout_iteration`) and
hands the conversion to :func:`apply_config_settings` (``convert``), which replays every
scheduler by iteration to the converted step (the config's, built for this run's epoch length and
accumulation) and compares only the values it starts from (its iteration counts are the saved
layout's, not the user's settings); a scheduler by epoch is compared and stepped as ever.

A resume with the config the run was saved with changes nothing (the exact resume of
:mod:`dna_mm.engine.loops` is untouched). Schedulers are replayed in step with each other, in
the config's order: exact for the schedulers of one kind (all by iteration, as
``convert_to_iter_based`` makes them, or all by epoch), and for schedulers by epoch and by
iteration whose ranges do not overlap (a warm-up, then the schedule).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from .optim_wrappers import optim_wrappers

#: a scheduler's state entries that count its progress, not its settings
PROGRESS_KEYS = frozenset({'last_step', '_global_step', '_last_value', 'verbose', 'base_values'})
#: an optimizer group's entries that are not options of the run (torch's implementation switches)
IMPLEMENTATION_KEYS = frozenset({'params', 'foreach', 'fused', 'capturable', 'differentiable'})


@dataclass
class ConfigSettings:
    """The optimizer groups' options and the schedulers' states as the config built them (step
    0), taken before the checkpoint's are loaded over them."""

    groups: list[list[dict]]  # per optim wrapper, per param group: its options (no params)
    schedulers: list[dict]  # per scheduler, in the config's order: its state dict


def _optimizers(optim_wrapper: Any) -> list[Any]:
    """The optim wrappers of an ``OptimWrapper`` or an ``OptimWrapperDict``: their
    ``param_groups`` are what the schedulers set (with several groups, mmengine's
    ``base_param_settings`` too, the ``base_lr`` of the log)."""
    return list(optim_wrappers(optim_wrapper).values())


def _schedulers(param_schedulers: Any) -> list[Any]:
    """Every scheduler of a list or a ``{name: list}`` dict, in order (``None``: none; a config
    dict or a list of them: as they are, not built)."""
    if param_schedulers is None:
        return []
    if isinstance(param_schedulers, dict) and 'type' not in param_schedulers:
        return [s for group in param_schedulers.values() for s in _schedulers(group)]
    return list(param_schedulers) if isinstance(param_schedulers, (list, tuple)) else [param_schedulers]


def drop_scheduler_functions(checkpoint: dict) -> list[str]:
    """Leave out of ``checkpoint['param_schedulers']`` the state entries that are functions
    (mmengine's ``OneCycleLR`` keeps its ``anneal_func``, which its ``anneal_strategy`` sets):
    a weights-only load refuses a pickle that names a function, so the file could not be resumed
    or tested; the resumed run's scheduler, built from the config, has its own (the config's
    settings win anyway). Returns ``'<index>.<key>'`` for each entry left out."""
    states = checkpoint.get('param_schedulers')
    named = states.items() if isinstance(states, dict) else [('', states or [])]
    dropped = []
    for name, group in named:
        for i, state in enumerate(group):
            for key in [k for k, v in state.items() if callable(v)] if isinstance(state, dict) else []:
                del state[key]
                dropped.append(f'{name}[{i}].{key}' if name else f'{i}.{key}')
    return dropped


def _group_options(group: dict) -> dict:
    return {k: copy.deepcopy(v) for k, v in group.items() if k not in IMPLEMENTATION_KEYS}


def config_settings(optim_wrapper: Any, param_schedulers: Any) -> Optional[ConfigSettings]:
    """What the config built, before a checkpoint's state is loaded over it; ``None`` where the
    optimizer or the schedulers are not built (``None`` or config dicts: not a training run)."""
    built = hasattr(optim_wrapper, 'param_groups') or hasattr(optim_wrapper, 'optim_wrappers')
    if not built or not all(hasattr(s, 'state_dict') for s in _schedulers(param_schedulers)):
        return None
    return ConfigSettings(
        groups=[[_group_options(g) for g in opt.param_groups] for opt in _optimizers(optim_wrapper)],
        schedulers=[copy.deepcopy(s.state_dict()) for s in _schedulers(param_schedulers)],
    )


def _shown(value: Any) -> str:
    """A setting as the log line shows it: a Counter's keys (milestones), floats to 6 digits, a
    per-group list of one value once (``0.005 (each of 70 groups)``), of several their set."""
    if isinstance(value, dict):  # MultiStepLR's milestones: a Counter
        return str(sorted(value))
    if isinstance(value, float):
        return f'{value:.6g}'
    if isinstance(value, (list, tuple)) and len(value) > 4:
        distinct = sorted({_shown(v) for v in value})
        one = distinct[0] if len(distinct) == 1 else '{' + ', '.join(distinct) + '}'
        return (
            f'{one} (each of {len(value)} groups)' if len(distinct) == 1 else f'{one} ({len(value)} groups)'
        )
    if isinstance(value, (list, tuple)):
        return '[' + ', '.join(_shown(v) for v in value) + ']'
    return str(value)


def _plain(value: Any) -> Any:
    """``value`` compared as a setting: tuples as lists (a loaded ``betas`` may be either)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _differences(name: str, config: dict, loaded: dict, keys: Iterable[str]) -> list[str]:
    """``'<name>.<key> <loaded> -> <config>'`` for each of ``keys`` whose values differ (a key the
    loaded state lacks is not a change of the user's: a newer torch's default)."""
    return [
        f'{name}.{k} {_shown(loaded[k])} -> {_shown(config.get(k))}'
        for k in keys
        if k in loaded and _plain(config.get(k)) != _plain(loaded[k])
    ]


def apply_config_settings(
    optim_wrapper: Any,
    param_schedulers: Any,
    config: Optional[ConfigSettings],
    convert: Optional[Callable[[int], int]] = None,
) -> list[str]:
    """Put the config's settings (:func:`config_settings`, taken before the resume) back over
    the checkpoint's, as the module docstring says; returns the changes (``'param_scheduler[0]
    (MultiStepLR).milestones [2, 3] -> [4, 5]'``), none when the config is the checkpoint's.
    ``convert``: the saved run's iteration -> this run's, for a run saved in another layout (its
    schedulers by iteration are replayed to the converted step, their iteration counts not
    compared)."""
    if config is None:
        return []
    schedulers = _schedulers(param_schedulers)
    scheduled = {s.param_name for s in schedulers}
    changes = []
    for o, (opt, groups) in enumerate(zip(_optimizers(optim_wrapper), config.groups, strict=True)):
        for g, (group, options) in enumerate(zip(opt.param_groups, groups, strict=True)):
            keys = [k for k in options if k not in scheduled and not k.startswith('initial_')]
            found = _differences(f'optimizer{o or ""}.param_groups[{g}]', options, group, keys)
            for k in keys:  # (a key the checkpoint lacks is set too)
                group[k] = copy.deepcopy(options[k])
            changes += found
    progress = [s.state_dict()['_global_step'] for s in schedulers]
    moved = [convert is not None and not s.by_epoch for s in schedulers]  # counts of another layout
    if convert is not None:
        progress = [convert(p) if m else p for p, m in zip(progress, moved, strict=True)]
    replay = False
    for i, (s, state, m) in enumerate(zip(schedulers, config.schedulers, moved, strict=True)):
        name = f'param_scheduler[{i}]({type(s).__name__})'
        loaded = s.state_dict()
        settings = [] if m else [k for k in state if k not in PROGRESS_KEYS]
        found = _differences(name, state, loaded, [*settings, 'base_values'])
        replay = replay or bool(found)
        changes += found
    if replay or any(moved):
        _replay(schedulers, _optimizers(optim_wrapper), config, progress)
    if replay:
        now = scheduled_values(optim_wrapper, schedulers)
        changes.append(f"the config's schedule goes on where the run stopped ({now})")
    return changes


def scheduled_values(optim_wrapper: Any, param_schedulers: Any) -> str:
    """The values the schedulers set now, in the first param group: ``'lr 0.0005'``."""
    group = _optimizers(optim_wrapper)[0].param_groups[0]
    names = sorted({s.param_name for s in _schedulers(param_schedulers)})
    return ', '.join(f'{n} {_shown(group[n])}' for n in names)


def _replay(
    schedulers: list[Any], optimizers: list[Any], config: ConfigSettings, progress: list[int]
) -> None:
    """The config's schedulers from step 0 (their states and the groups' scheduled values as
    built), each stepped ``progress[i]`` times, in step with each other."""
    names = {s.param_name for s in schedulers}
    for s, state in zip(schedulers, config.schedulers, strict=True):
        s.load_state_dict(copy.deepcopy(state))
    for opt, groups in zip(optimizers, config.groups, strict=True):
        for group, built in zip(opt.param_groups, groups, strict=True):
            for key in [k for n in names for k in (n, f'initial_{n}') if k in built]:
                group[key] = copy.deepcopy(built[key])
    with warnings.catch_warnings():  # mmengine's order check of scheduler and optimizer steps
        warnings.simplefilter('ignore')
        for t in range(max(progress, default=0)):
            for s, steps in zip(schedulers, progress, strict=True):
                if t < steps:
                    s.step()


#: the checkpoint entries a resume reads besides the weights, as mmengine names them
STATE_ENTRIES = ('optimizer', 'param_schedulers')


def replay_to(optim_wrapper: Any, param_schedulers: Any, config: ConfigSettings, epoch: int, it: int) -> str:
    """The config's schedulers (their state as built, :func:`config_settings`) stepped to where a
    run stopped at ``epoch`` / ``it`` (completed epochs, iterations): a scheduler by epoch
    ``epoch`` times, one by iteration ``it`` times, as mmengine's ``ParamSchedulerHook`` steps
    them; returns the scheduled values now (``'lr 0.0005'``)."""
    schedulers = _schedulers(param_schedulers)
    _replay(schedulers, _optimizers(optim_wrapper), config, [epoch if s.by_epoch else it for s in schedulers])
    return scheduled_values(optim_wrapper, schedulers)


def missing_state(
    filename: str,
    entries: Iterable[str],
    optim_wrapper: Any,
    param_schedulers: Any,
    config: Optional[ConfigSettings],
    epoch: int,
    it: int,
) -> Optional[str]:
    """The warning for a resume from ``filename`` whose checkpoint ``entries`` lack the optimizer's
    or the schedulers' state (``None`` when it has both, or nothing is trained); the schedule is
    replayed to the run's point (:func:`replay_to`) when the schedulers' state is the one
    missing."""
    absent = [e for e in STATE_ENTRIES if e not in set(entries)]
    if config is None or not absent:
        return None
    what = {'optimizer': 'optimizer', 'param_schedulers': 'scheduler'}
    parts = []
    if 'param_schedulers' in absent and _schedulers(param_schedulers):
        now = replay_to(optim_wrapper, param_schedulers, config, epoch, it)
        parts.append(f"the config's schedule is replayed to where the run stopped ({now})")
    if 'optimizer' in absent:
        parts.append('the optimizer starts afresh (its momentum / moment estimates at zero)')
    return (
        f'resume: {filename} holds no {" and no ".join(what[e] for e in absent)} state (a best_*.pth, or a '
        f'checkpoint hook with save_optimizer=False): {"; ".join(parts)}. The run is not the one '
        f'that was saved; resume from epoch_N.pth / iter_N.pth to go on exactly'
    )


#: mmengine ``EMAHook``'s checkpoint entry: the trained weights (``module.`` + key) while the
#: checkpoint's ``state_dict`` holds the average (what a test, ``load_from`` and the tools load)
EMA_KEY = 'ema_state_dict'


def trained_weights_back(filename: str, checkpoint: dict, hooks: Iterable[Any]) -> Optional[str]:
    """A resume from ``filename``, saved with mmengine's ``EMAHook``, by a run whose ``hooks`` keep
    no average: the trained weights put back in ``checkpoint['state_dict']`` (as ``EMAHook``'s own
    resume swaps them back) and the warning that says so; ``None``, nothing changed, otherwise.
    Without it the run would train on from the average, its optimizer state the trained
    weights'."""
    from mmengine.hooks import EMAHook

    trained = checkpoint.get(EMA_KEY)
    if not isinstance(trained, dict) or any(isinstance(h, EMAHook) for h in hooks):
        return None
    state = checkpoint['state_dict']
    for key, value in trained.items():
        if key.startswith('module.') and key[len('module.') :] in state:
            state[key[len('module.') :]] = value
    return (
        f'resume: {filename} was saved with EMAHook (its state_dict holds the moving average, '
        f'{EMA_KEY} the trained weights) and this run has none: training goes on from the trained '
        'weights, without the average (custom_hooks with EMAHook keeps averaging)'
    )
