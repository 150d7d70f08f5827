"""Faults that ``test_run_ends.py`` puts into real ``tools/train.py`` / ``test.py`` / ``infer.py``
runs: a config imports this module (``custom_imports``, with ``tests/engine`` on ``PYTHONPATH``)
and names :class:`FaultHook` or :class:`FaultTransform`. Each fault writes the time it fired to
the file ``$DNA_MM_FAULT_STAMP`` (when set) and raises :class:`InjectedFault`, so that a test can
measure how long the process took to end after it.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from mmcv.transforms import BaseTransform
from mmengine.hooks import Hook
from mmengine.registry import HOOKS, TRANSFORMS


class InjectedFault(RuntimeError):
    """The exception every fault raises."""


def stamp() -> None:
    """Write the time to ``$DNA_MM_FAULT_STAMP`` (when set), and, in a rank of a distributed run,
    to ``$DNA_MM_FAULT_STAMP.rank<RANK>``."""
    path = os.environ.get('DNA_MM_FAULT_STAMP')
    paths = [path, f'{path}.rank{os.environ["RANK"]}' if 'RANK' in os.environ else None] if path else []
    for path in filter(None, paths):
        with open(path + '.part', 'w') as f:
            f.write(repr(time.time()))
        os.replace(path + '.part', path)


def fire(what: str) -> None:
    """Stamp the time and raise."""
    stamp()
    raise InjectedFault(f'injected fault: {what}')


def _break_first_member(model: Any, what: str) -> None:
    """The first attention member of ``model`` raises from its ``attend`` (the step's forward)."""
    member = next(m for m in model.modules() if hasattr(m, 'attend'))

    def attend(*args: Any, **kwargs: Any) -> None:
        fire(what)

    member.attend = attend


@HOOKS.register_module()
class FaultHook(Hook):
    """Raise at one place of a run.

    Args:
        where: ``'member'`` (the model's first attention member raises in iteration ``at``'s
            forward), ``'hook'`` (this hook after iteration ``at``), ``'sleep'`` (this hook
            stamps and sleeps ``seconds`` after iteration ``at``), ``'val'`` (in validation,
            after its first batch), ``'checkpoint'`` (before a checkpoint is written),
            ``'test_member'`` (the member raises in testing), ``'test_sleep'`` (stamps and sleeps
            ``seconds`` after the first test batch).
        at: The 1-based training iteration for ``'member'``, ``'hook'`` and ``'sleep'``.
        seconds: How long ``'sleep'`` and ``'test_sleep'`` sleep.
    """

    priority = 'HIGHEST'

    def __init__(self, where: str, at: int = 3, seconds: float = 60) -> None:
        self.where, self.at, self.seconds = where, at, seconds

    def before_train_iter(self, runner, batch_idx: int, data_batch: Optional[dict] = None) -> None:
        if self.where == 'member' and runner.iter + 1 == self.at:
            _break_first_member(runner.model, 'a member raised in a training step')

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if self.where == 'hook' and runner.iter + 1 == self.at:
            fire('a hook raised after a training step')
        if self.where == 'sleep' and runner.iter + 1 == self.at:
            stamp()
            time.sleep(self.seconds)

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if self.where == 'val':
            fire('validation raised')

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if self.where == 'checkpoint':
            fire('a checkpoint write raised')

    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if self.where == 'test_sleep' and batch_idx == 0:
            stamp()
            time.sleep(self.seconds)

    def before_test(self, runner) -> None:
        if self.where == 'test_member':
            _break_first_member(runner.model, 'a member raised in testing')


@TRANSFORMS.register_module()
class FaultTransform(BaseTransform):
    """A pipeline step that raises on its ``at``-th call in its process (a loader worker's)."""

    def __init__(self, at: int = 2) -> None:
        self.at, self.calls = at, 0

    def transform(self, results: dict) -> dict:
        self.calls += 1
        if self.calls >= self.at:
            fire('a transform raised in a data-loader worker')
        return results
