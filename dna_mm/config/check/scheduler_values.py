"""The values of a ``param_scheduler`` entry, checked before anything is built
(:func:`dna_mm.config.check.schedule.scheduler_problems`), by the mmengine scheduler class of the
entry (``*LR``, ``*Momentum``, a subclass), one message a key:

* what mmengine refuses once the model is built: ``end`` <= ``begin``; ``LinearLR``'s
  ``start_factor`` / ``end_factor`` or ``ConstantLR``'s ``factor`` outside [0, 1]; ``OneCycleLR``'s
  ``total_steps`` not an int > 0, ``pct_start`` not a float in [0, 1], an unknown
  ``anneal_strategy``; ``ReduceOnPlateauLR``'s ``factor`` >= 1, ``threshold`` < 0, an unknown
  ``rule`` / ``threshold_rule``; both ``eta_min`` and ``eta_min_ratio``, or ``CosineRestartLR``
  with neither, or with ``restart_weights`` (default ``[1]``) not one per period;
* what divides by zero mid-run: ``start_factor`` / ``factor`` 0, ``StepLR``'s ``step_size`` 0,
  ``PolyLR``'s ``power`` < 0, ``OneCycleLR``'s ``div_factor`` / ``final_div_factor`` 0;
* what makes the scheduled value negative without a word: ``gamma``, ``eta_min``,
  ``eta_min_ratio``, ``eta_max`` < 0;
* what keeps it at 0 without a word: ``OneCycleLR``'s ``eta_max`` (the peak lr, not a factor of
  the optimizer's) 0 or not given (mmengine's default 0);
* what cuts it short or moves it: ``T_max`` < 0, ``begin`` < 0, a ``CosineRestartLR`` period <= 0
  (a 0 one skipped with its restart weight, a negative one moving or dropping the restarts after
  it).

What mmengine runs passes: a ``gamma`` > 1 (a warm-up by growth), ``T_max=0`` (mmengine's
``end - begin``), no ``end`` (mmengine's runner sets the train loop's ``max_epochs`` /
``max_iters``).
"""

from __future__ import annotations

from typing import Any, Optional

from ..build import type_name
from .values import is_number


def _bound(
    value: Any,
    key: str,
    low: float,
    high: Optional[float] = None,
    *,
    open_low: bool = False,
    open_high: bool = False,
    why: str = '',
) -> list[str]:
    """``value`` of ``key`` a number from ``low`` (excluded with ``open_low``) up to ``high``
    (``None``: no upper bound; excluded with ``open_high``); ``None`` leaves it to the default.
    The message names the range and ``why`` (what another value would do)."""
    if value is None:
        return []
    above = is_number(value) and (value > low if open_low else value >= low)
    below = high is None or (is_number(value) and (value < high if open_high else value <= high))
    if above and below:
        return []
    if high is None:
        span = f'{">" if open_low else ">="} {low:g}'
    else:
        span = f'in {"(" if open_low else "["}{low:g}, {high:g}{")" if open_high else "]"}'
    return [f'{key} must be a number {span}{f" ({why})" if why else ""}, got {value!r}']


def _scheduled(cls: type, scheduler: dict) -> str:
    """What the scheduler ``cls`` sets, as the messages name it: the learning rate (mmengine's
    ``*LR``), the momentum (``*Momentum``), or the ``param_name`` of a generic one."""
    from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin  # noqa: PLC0415
    from mmengine.optim.scheduler.momentum_scheduler import MomentumSchedulerMixin  # noqa: PLC0415

    param = scheduler.get('param_name')
    if issubclass(cls, LRSchedulerMixin) or param == 'lr':
        return 'the learning rate'
    return 'the momentum' if issubclass(cls, MomentumSchedulerMixin) else f'the {param or "parameter"}'


def scheduler_value_problems(cls: type, scheduler: dict, key: str) -> list[str]:
    """The values of one ``param_scheduler`` entry (``key``) of class ``cls`` (one of mmengine's
    0.10.x ``*ParamScheduler`` or a subclass: its ``*LR``, its ``*Momentum``), each against what
    mmengine refuses (a ``ValueError`` or an ``AssertionError`` once the model is built), divides
    by zero mid-run, or takes without a word to make the scheduled value negative or never move;
    one message per key. What mmengine runs is left alone: ``gamma`` > 1 (a warm-up by growth),
    ``T_max=0`` (mmengine reads ``T_max or end - begin``)."""
    from mmengine.optim.scheduler import param_scheduler as ps  # noqa: PLC0415

    if not isinstance(cls, type) or not issubclass(cls, ps._ParamScheduler):
        return []
    name, what, get = type_name(cls), _scheduled(cls, scheduler), scheduler.get
    later = f"otherwise mmengine's {name} raises a ValueError once the model is built"
    negative = f'a negative one makes {what} negative'
    # _ParamScheduler.__init__: `if end <= begin: raise ValueError`; its steps count from 0
    begin, end = get('begin', 0), get('end')
    out = _bound(
        begin,
        f'{key}.begin',
        0,
        why='mmengine counts the steps from 0: a negative begin cuts short the schedule, whose length '
        'is end - begin',
    )
    if end is not None and (not is_number(end) or (is_number(begin) and end <= begin)):
        shown = begin if is_number(begin) else 0
        out.append(f'{key}.end must be a number > its begin, {shown} ({later}), got {end!r}')
    if issubclass(cls, (ps.StepParamScheduler, ps.MultiStepParamScheduler, ps.ExponentialParamScheduler)):
        out += _bound(get('gamma'), f'{key}.gamma', 0, why=f'a negative gamma makes {what} negative')
    if issubclass(cls, ps.StepParamScheduler):  # `self.last_step % self.step_size`
        why = 'the steps from one decay to the next: 0 divides by zero at the first step'
        out += _bound(get('step_size'), f'{key}.step_size', 0, open_low=True, why=why)
    if issubclass(cls, ps.CosineAnnealingParamScheduler):  # `self.T_max = T_max or (end - begin)`
        why = 'the steps of a half cosine; 0 or None: end - begin'  # no end: the runner's max_epochs / iters
        out += _bound(get('T_max'), f'{key}.T_max', 0, why=why)
    if issubclass(
        cls, (ps.CosineAnnealingParamScheduler, ps.CosineRestartParamScheduler, ps.PolyParamScheduler)
    ):
        out += _bound(get('eta_min'), f'{key}.eta_min', 0, why=negative)
    if issubclass(cls, (ps.CosineAnnealingParamScheduler, ps.CosineRestartParamScheduler)):
        # `assert (eta_min is None) ^ (eta_min_ratio is None)` (CosineAnnealing: eta_min=0. without either)
        out += _bound(get('eta_min_ratio'), f'{key}.eta_min_ratio', 0, why=negative)
        given = [k for k in ('eta_min', 'eta_min_ratio') if get(k) is not None]
        if len(given) == 2:
            out.append(f'{key} ({name}) takes eta_min or eta_min_ratio, not both (mmengine asserts one)')
        elif not given and issubclass(cls, ps.CosineRestartParamScheduler):
            out.append(f'{key} ({name}) needs eta_min or eta_min_ratio (mmengine asserts one)')
    if issubclass(cls, ps.CosineRestartParamScheduler):
        out += _cosine_restart_problems(scheduler, key, name)
    outside = f"outside [0, 1], mmengine's {name} raises a ValueError once the model is built"
    if issubclass(cls, ps.LinearParamScheduler):  # 0: `... / (self.total_iters * self.start_factor + ...)`
        why = f'{outside}; 0 divides by zero at the first step'
        out += _bound(get('start_factor'), f'{key}.start_factor', 0, 1, open_low=True, why=why)
        out += _bound(get('end_factor'), f'{key}.end_factor', 0, 1, why=later)
    if issubclass(cls, ps.ConstantParamScheduler):  # 0: `group[self.param_name] * (1.0 / self.factor)`
        why = f'{outside}; 0 divides by zero where the schedule ends'
        out += _bound(get('factor'), f'{key}.factor', 0, 1, open_low=True, why=why)
    if issubclass(cls, ps.PolyParamScheduler):  # `(1 - 1 / (total_iters - last_step + 1)) ** power`
        out += _bound(
            get('power'), f'{key}.power', 0, why='a negative power divides by zero at the last step'
        )
    if issubclass(cls, ps.OneCycleParamScheduler):
        out += _one_cycle_problems(scheduler, key, name, what)
    if issubclass(cls, ps.ReduceOnPlateauParamScheduler):
        out += _plateau_problems(scheduler, key, later)
    return out


def _one_cycle_problems(scheduler: dict, key: str, name: str, what: str) -> list[str]:
    """``OneCycleParamScheduler`` (mmengine 0.10.x): ``total_steps`` an int > 0 and ``pct_start``
    a float in [0, 1] (its ``ValueError``s: on an int 0 or 1 too), ``anneal_strategy`` ``'cos'`` or
    ``'linear'`` (its ``ValueError``), ``eta_max`` >= 0 (the peak; a list: one per parameter group)
    and ``div_factor`` / ``final_div_factor`` > 0 (they divide it: 0 a ``ZeroDivisionError`` once
    the model is built, a negative one a negative value)."""
    get = scheduler.get
    later = f"otherwise mmengine's {name} raises a ValueError once the model is built"
    out = []
    total = get('total_steps')  # `if total_steps <= 0 or not isinstance(total_steps, int)`
    if total is not None and not (isinstance(total, int) and not isinstance(total, bool) and total > 0):
        out.append(f'{key}.total_steps must be an int > 0 (None: end - begin; {later}), got {total!r}')
    pct = get('pct_start')  # `if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float)`
    bad = _bound(pct, f'{key}.pct_start', 0, 1, why=later)
    if bad:
        out += bad
    elif pct is not None and not isinstance(pct, float):
        out.append(
            f"{key}.pct_start must be a float in [0, 1] (mmengine's {name} raises a ValueError on an int "
            f'once the model is built), got {pct!r}: write it as a float, {key}.pct_start={float(pct)!r}'
        )
    strategy = get('anneal_strategy')
    if strategy is not None and strategy not in ('cos', 'linear'):
        out.append(f"{key}.anneal_strategy must be 'cos' or 'linear' ({later}), got {strategy!r}")
    peak = get('eta_max')  # the peak itself: the schedule starts at eta_max / div_factor
    peaks = peak if isinstance(peak, (list, tuple)) else [peak]
    if peak is None:
        out.append(
            f"{key}.eta_max is the peak lr: {name}'s default 0 keeps {what} at 0 the whole run (it rises "
            "from eta_max / div_factor to eta_max and falls; the optimizer's lr is not read); set it"
        )
    elif not peaks or not all(is_number(p) and p >= 0 for p in peaks) or not any(p > 0 for p in peaks):
        out.append(
            f'{key}.eta_max is the peak lr: it must be a number > 0, or one per parameter group (0 keeps '
            f'{what} at 0 the whole run, a negative one makes it negative), got {peak!r}'
        )
    why = f'it divides {what}: 0 divides by zero once the model is built, a negative one makes it negative'
    for factor in ('div_factor', 'final_div_factor'):
        out += _bound(get(factor), f'{key}.{factor}', 0, open_low=True, why=why)
    return out


def _cosine_restart_problems(scheduler: dict, key: str, name: str) -> list[str]:
    """``CosineRestartParamScheduler`` (mmengine 0.10.x): ``periods`` a non-empty list of numbers
    > 0 (it looks a step up in their running sums, ``cumulative_periods``: a 0 period is never
    reached, its restart weight skipped, and a negative one makes a later sum smaller, which moves
    or drops the restarts after it and can end the schedule early, all without a word), and
    ``restart_weights`` (default ``(1,)``) one per period (its ``AssertionError`` once the model is
    built), each >= 0 (a cycle starts at its weight times the base value)."""
    periods = scheduler.get('periods')
    if periods is None:  # required: mmengine's TypeError names it
        return []
    if (
        not isinstance(periods, (list, tuple))
        or not periods
        or not all(is_number(p) and p > 0 for p in periods)
    ):
        return [
            f'{key}.periods must be a non-empty list of numbers > 0 (the steps of each cosine cycle: '
            f"mmengine's {name} skips a 0 one and its restart weight, and a negative one moves or drops "
            f'the restarts after it, without a word), got {periods!r}'
        ]
    weights = scheduler.get('restart_weights')
    if weights is None:
        if len(periods) == 1:
            return []
        return [
            f'{key}.restart_weights must give one weight per period, {len(periods)} (its default, [1], '
            f"fits one period: mmengine's {name} asserts it once the model is built); set it, e.g. "
            f'restart_weights={[1] * len(periods)!r}'
        ]
    if isinstance(weights, (list, tuple)) and len(weights) == len(periods):
        if all(is_number(w) and w >= 0 for w in weights):
            return []
        return [
            f'{key}.restart_weights must be numbers >= 0 (each cycle starts at its weight times the '
            "base value: a negative one makes the learning rate negative, which climbs the loss, without "
            f'a word), got {weights!r}'
        ]
    return [
        f"{key}.restart_weights must give one weight per period, {len(periods)} (mmengine's {name} "
        f'asserts it once the model is built), got {weights!r}'
    ]


def _plateau_problems(scheduler: dict, key: str, later: str) -> list[str]:
    """``ReduceOnPlateauParamScheduler`` (mmengine 0.10.x): what its ``__init__`` and
    ``_init_is_better`` refuse with a ``ValueError``: ``factor`` >= 1, ``threshold`` < 0, a ``rule``
    other than ``'less'`` / ``'greater'``, a ``threshold_rule`` other than ``'rel'`` / ``'abs'``."""
    get = scheduler.get
    factor = get('factor')  # `if factor >= 1.0: raise ValueError`
    out = []
    if factor is not None and (not is_number(factor) or factor >= 1):
        out.append(f'{key}.factor must be a number < 1 ({later}), got {factor!r}')
    out += _bound(get('threshold'), f'{key}.threshold', 0, why=later)
    for option, valid in (('rule', ('less', 'greater')), ('threshold_rule', ('rel', 'abs'))):
        value = get(option)
        if value is not None and value not in valid:
            out.append(f'{key}.{option} must be {valid[0]!r} or {valid[1]!r} ({later}), got {value!r}')
    return out
