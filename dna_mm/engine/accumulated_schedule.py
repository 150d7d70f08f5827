"""The schedule an accumulated optimizer step takes: the values of its window's first iteration.

With gradient accumulation (``optim_wrapper.accumulative_counts = K``, which a recipe's
``global_batch_size`` sets on fewer GPUs) the optimizer steps after every ``K``-th backward pass,
while mmengine's ``ParamSchedulerHook`` steps an iteration-based schedule (a warm-up by
iteration, or one by epoch with ``convert_to_iter_based``) after every data iteration. Step ``j``
ends the window of data iterations ``jK … jK + K − 1``; left alone it takes the value of the
window's last one, ``f(jK + K − 1)``, ``(K − 1) / K`` of a step further into a warm-up than the
run on the global batch, whose schedule counts one iteration a step (``K`` times fewer:
:func:`~dna_mm.engine.global_batch.scale_iteration_schedule`), ``g(j) = f(jK)``. Here every step
takes its window's first value::

    step j uses  f(jK) = g(j)          (f: the schedule by data iteration, g: by optimizer step)

for every scheduled key (``lr``, ``momentum`` and Adam's ``betas``, ``weight_decay``, ...) of every
parameter group: :class:`AccumulatedScheduleHook` keeps the values of the window's first
iteration, puts them in the groups for the window's other iterations, and puts the scheduler's
own back after each of them, before ``ParamSchedulerHook`` steps from those (mmengine's schedulers
are chainable: each takes the group's value as it finds it). Milestones fall on the same steps
either way; the logged lr (``train/lr``, recorded as an iteration starts) is the lr the step
takes, constant over its window.

A checkpoint written inside a window (preemption, an epoch whose length ``K`` does not divide)
records the window's first values (``meta['accumulated_schedule']``), and a run resumed from it
at that iteration, in the same layout, takes them for the rest of the window. A run resumed in
another layout (:mod:`dna_mm.engine.global_batch`) replays its schedule to the converted
iteration; a window it resumes inside takes the value its iteration has there.

mmengine's linear, polynomial and constant schedulers move over ``end - begin - 1`` steps (their
``total_iters``: the last value at ``end - 1``). A schedule of ``T`` steps on the global batch
thus moves over ``T - 1`` steps, ``K (T - 1)`` data iterations, while its counts in data
iterations (``end - begin = K T``: scaled by ``--global-batch``, or an epoch's iterations with
``convert_to_iter_based``) would make it move over ``K T - 1``. :func:`fit_to_accumulation`,
which ``DnARunner`` calls as it builds the schedulers, moves their ``end`` to ``end - K + 1``, so
that they move over ``K (T - 1)`` and ``f(jK) = g(j)`` holds for them too.

``DnARunner`` adds the hook to every training run; it does nothing without accumulation or
without a schedule. It also keeps PyTorch's warning of a ``scheduler.step()`` called before the
first ``optimizer.step()`` quiet, which every accumulated run would print once: the scheduler
steps with the data iterations by design.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from .optim_wrappers import optim_wrappers

#: the checkpoint ``meta`` key of the open window's first values
WINDOW_KEY = 'accumulated_schedule'
#: PyTorch's (mmengine's copy) warning of a scheduler step before the first optimizer step: by
#: design under accumulation, and in a run resumed at an epoch's end
EARLY_STEP_WARNING = r'Detected call of `scheduler\.step\(\)` before `optimizer\.step\(\)`'

#: one parameter group's scheduled values: key -> value
GroupValues = dict[str, Any]


def scheduled_keys(param_schedulers: Any) -> set[str]:
    """The parameter group keys that ``param_schedulers`` (a list, or name -> list for several
    optimizers) change; with ``'betas'`` beside ``'momentum'`` (mmengine's momentum schedulers set
    Adam's first beta)."""
    groups = param_schedulers.values() if isinstance(param_schedulers, dict) else [param_schedulers or []]
    keys = {s.param_name for schedulers in groups for s in schedulers if hasattr(s, 'param_name')}
    return keys | {'betas'} if 'momentum' in keys else keys


def fit_to_accumulation(param_schedulers: Any, optim_wrapper: Any) -> None:
    """Set each by-iteration linear, polynomial or constant scheduler of ``param_schedulers``
    (a list, or optimizer name -> list) to end at ``end - K + 1``, moving over ``end - begin - K``
    data iterations, ``K`` its optimizer's accumulation steps (module docstring); nothing where
    ``K = 1`` or where the range is not longer than one window."""
    from mmengine.optim.scheduler.param_scheduler import (
        ConstantParamScheduler,
        LinearParamScheduler,
        PolyParamScheduler,
    )

    wrappers = optim_wrappers(optim_wrapper)
    named = param_schedulers.items() if isinstance(param_schedulers, dict) else [('', param_schedulers or [])]
    for name, schedulers in named:
        k = getattr(wrappers.get(name, optim_wrapper), '_accumulative_counts', 1)
        for s in schedulers:
            moves = isinstance(s, (LinearParamScheduler, PolyParamScheduler, ConstantParamScheduler))
            if k > 1 and moves and not s.by_epoch and s.end - s.begin - k >= 1:
                s.end -= k - 1  # they stop only at their end
                s.total_iters = s.end - s.begin - 1


def group_values(param_groups: list[dict], keys: set[str]) -> list[GroupValues]:
    """Each group's values of ``keys`` (those it has)."""
    return [{k: group[k] for k in keys if k in group} for group in param_groups]


def put_values(param_groups: list[dict], values: list[GroupValues]) -> None:
    """Set each group's keys to ``values`` (one dict per group, as :func:`group_values` gives)."""
    for group, own in zip(param_groups, values, strict=True):
        group.update(own)


@HOOKS.register_module()
class AccumulatedScheduleHook(Hook):
    """Each accumulated optimizer step takes the schedule's values at its window's first
    iteration (module docstring). Added by ``DnARunner`` to every training run.

    ``HIGHEST`` priority: the values are in place before ``RuntimeInfoHook`` logs the lr as an
    iteration starts, and the scheduler's are back before any other hook sees the iteration end
    (``ParamSchedulerHook`` steps from them, a checkpoint saves them)."""

    priority = 'HIGHEST'

    def __init__(self) -> None:
        self._steps: dict[str, int] = {}  # wrapper name -> K (> 1 only)
        self._keys: set[str] = set()
        self._first: dict[str, tuple[int, list[GroupValues]]] = {}  # name -> (window start, values)
        self._held: dict[str, list[GroupValues]] = {}  # name -> the scheduler's, while swapped
        self._loaded: Optional[tuple[int, dict]] = None  # (saved iteration, saved windows)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        meta = checkpoint.get('meta') or {}
        if isinstance(meta.get(WINDOW_KEY), dict):
            self._loaded = (int(meta.get('iter', -1)), meta[WINDOW_KEY])

    def before_train(self, runner) -> None:
        wrappers = optim_wrappers(runner.optim_wrapper)
        self._steps = {n: k for n, w in wrappers.items() if (k := getattr(w, '_accumulative_counts', 1)) > 1}
        self._keys = scheduled_keys(getattr(runner, 'param_schedulers', None)) if self._steps else set()
        if not self._keys:
            self._steps = {}
            return
        loaded, self._loaded = self._loaded, None
        moved = getattr(runner, 'resumed_layout', None)  # another layout: its schedule replayed
        if loaded is not None and moved is None and loaded[0] == runner.iter:
            for name, window in loaded[1].items():
                if self._fits(window, name, wrappers):
                    self._first[name] = (int(window['start']), [dict(v) for v in window['values']])
        warnings.filterwarnings('ignore', message=EARLY_STEP_WARNING)  # for the process: it ends the run

    def _fits(self, window: dict, name: str, wrappers: dict[str, Any]) -> bool:
        """Whether a saved ``window`` is one of this run's wrapper ``name`` (as many steps a
        window, a value set per parameter group)."""
        if name not in self._steps or window.get('steps') != self._steps[name]:
            return False
        return len(window.get('values', ())) == len(wrappers[name].param_groups)

    def before_train_iter(self, runner, batch_idx: int, data_batch: Any = None) -> None:
        wrappers = optim_wrappers(runner.optim_wrapper)
        for name, k in self._steps.items():
            groups = wrappers[name].param_groups
            it = wrappers[name].inner_count  # the data iterations done: this one's index
            start = it - it % k
            if it == start:
                self._first[name] = (start, group_values(groups, self._keys))
            elif self._first.get(name, (None,))[0] == start:
                self._held[name] = group_values(groups, self._keys)
                put_values(groups, self._first[name][1])

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        wrappers = optim_wrappers(runner.optim_wrapper)
        for name, values in self._held.items():
            put_values(wrappers[name].param_groups, values)
        self._held = {}

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        wrappers = optim_wrappers(runner.optim_wrapper)
        open_windows = {
            name: dict(start=self._first[name][0], steps=k, values=self._first[name][1])
            for name, k in self._steps.items()
            if (it := wrappers[name].inner_count) % k and self._first.get(name, (None,))[0] == it - it % k
        }
        if open_windows:
            checkpoint.setdefault('meta', {})[WINDOW_KEY] = open_windows
