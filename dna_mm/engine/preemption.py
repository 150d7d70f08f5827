"""``PreemptionHook``: a run told to stop saves where it stands and exits with a status to requeue on.

Schedulers stop a job with a signal, then kill it after a grace period: SLURM on preemption and
``scancel`` (``SIGTERM``; ``--signal=USR1@120`` sends ``SIGUSR1`` two minutes before the time
limit), Kubernetes and spot machines (``SIGTERM``). On one of ``signals`` the handler only
records it; at the end of the iteration in progress (after the other hooks: the parameter
schedulers have stepped, the logger has logged) every rank learns whether any rank was
signalled (:mod:`dna_mm.engine.ranks`), and then all of them

1. save that iteration as ``CheckpointHook(by_epoch=False)`` would (model, optimizer, parameter
   schedulers, message hub, the random state of ``RNGStateHook``, ``meta`` epoch / iter) to
   ``preempted_iter_<N>.pth`` in the checkpoint folder, whole or not at all, and point
   ``last_checkpoint`` at it (:mod:`dna_mm.engine.checkpoint_hook`); the ``Resumable*TrainLoop``
   continue from it mid-epoch, to the weights of a run that was never stopped;
2. log one line: the signal, the iteration, the file, the exit status;
3. end with :class:`Preempted`, a ``SystemExit`` with status ``128 + signal number`` (143 for
   ``SIGTERM``, 138 for ``SIGUSR1``).

Why ``128 + N``: it is what a shell (and ``srun``) reports for a process ended by signal ``N``,
so whatever watches the job sees what the signal alone would have given, now with a checkpoint
behind it. Kubeflow's training operator (``restartPolicy: ExitCode``) restarts a worker that
exits 143 (``SIGTERM``), 137 or 130, and 138 (``128 + SIGUSR1``, its code for "retry me"), and
treats 1, 2 and codes it does not list, ``timeout``'s 124 among them, as permanent; a SLURM
script requeues on ``[ $? -ge 128 ]``; dna_mm's own failures are 1 (a crash) and 2 (a user's
mistake).

``SIGINT`` (Ctrl-C, default in ``signals``) does the same and exits 130; a second Ctrl-C (more
than :data:`REPEAT_S` after the first: a terminal and torchrun's agent each deliver the first one)
stops at once with ``KeyboardInterrupt``, nothing saved. The first signal of each kind writes one
line to stderr at once, so that a log shows that it arrived.

The handlers are set in ``before_train`` (main thread only) and the previous ones put back when
training ends, however it ends (:meth:`PreemptionHook.release`, which ``after_train`` and
:class:`~dna_mm.engine.runner.DnARunner`'s ``train`` call): a signal after a crash ends the process
as it would have without dna_mm. SLURM signals every process of a job step, data-loader workers
included, a terminal's Ctrl-C every process of its foreground group, and a torch worker dies on
``SIGTERM`` (``SIGUSR1``'s default also ends a process): the main process would then fail on the
lost worker. So the train and validation loaders' workers ignore ``signals``
(:func:`~dna_mm.engine.loader_workers.workers_die_with_parent`, in their ``worker_init_fn``,
before the loader's own); an iteration-based loop's first workers, started when the loop was
built (persistent ones too), are started again. Workers that ignore ``SIGTERM`` are not ended by
Python's exit: the main process ends them itself on every path
(:mod:`dna_mm.engine.loader_workers`). Validation and checkpoint
writes are not interrupted: the grace period (``--signal=USR1@T``, SLURM's ``GraceTime``, Kubernetes'
``terminationGracePeriodSeconds``) must cover one validation, one iteration and one save.
"""

from __future__ import annotations

import contextlib
import os
import os.path as osp
import signal
import threading
import time
from functools import partial
from typing import Any, Optional

from mmengine.dist import is_main_process
from mmengine.fileio import get_file_backend
from mmengine.hooks import CheckpointHook, Hook
from mmengine.registry import HOOKS

from ..errors import ConfigError
from ..utils.parent_death import agent_ended
from .checkpoint_hook import (
    INTERIM_INFO,
    earlier_layout_name,
    move_checkpoint,
    point_last_checkpoint,
    save_on_all_ranks,
    set_aside_line,
)
from .loader_workers import (  # and, at exit, ends the workers made to ignore signals
    watch_worker_deaths,
    workers_die_with_parent,
)
from .loops import fresh_iterator, where_in_run
from .ranks import max_over_ranks

#: the checkpoint of a preempted iteration (its number, 1-based, as ``iter_{}.pth``)
PREEMPTED_TMPL = 'preempted_iter_{}.pth'
#: seconds within which a second ``SIGINT`` is the same Ctrl-C (delivered twice), not a second one
REPEAT_S = 1.0


class Preempted(SystemExit):
    """The run stopped on ``signum`` after saving ``checkpoint``; exit status ``128 + signum``."""

    def __init__(self, signum: int, checkpoint: str) -> None:
        super().__init__(128 + signum)
        self.signum, self.checkpoint = signum, checkpoint


class StopSignals:
    """The signals that stop a run, recorded when they arrive and acted on at the end of the
    iteration in progress (the module docstring): :class:`PreemptionHook` in training,
    :mod:`dna_mm.engine.test_progress` in testing.

    Args:
        signals: Names of the signals that stop the run (``signal.Signals`` names).
    """

    def __init__(self, signals: tuple[str, ...] = ('SIGTERM', 'SIGUSR1', 'SIGINT')) -> None:
        signals = (signals,) if isinstance(signals, str) else tuple(signals)
        known = {s.name for s in signal.Signals}
        unknown = [s for s in signals if s not in known]
        if unknown or not signals:
            raise ConfigError(f'PreemptionHook: signals must be signal names (SIGTERM, ...), got {signals}')
        self.signals = tuple(signal.Signals[s] for s in signals)
        self.received = 0  # the last signal's number; 0: none
        self._first_at: dict[int, float] = {}  # signal number -> when it first arrived
        self._previous: dict[signal.Signals, Any] = {}

    def _record(self, signum: int, frame: Any) -> None:
        """Record ``signum`` for the end of the iteration; a second Ctrl-C raises at once. No
        logging here (the main thread may hold the logger's or a stream's lock): ``os.write``."""
        now = time.monotonic()
        first = self._first_at.setdefault(signum, now)
        if signum == signal.SIGINT and now - first > REPEAT_S:
            self.release()
            raise KeyboardInterrupt
        if first == now:
            name = signal.Signals(signum).name
            again = '; Ctrl-C again stops at once, unsaved' if signum == signal.SIGINT else ''
            why = " (torchrun's agent ended)" if agent_ended() else ''
            line = f'{name}{why}: saving at the end of this iteration, then exiting{again}\n'
            with contextlib.suppress(OSError):  # a terminal or pipe gone with the parent: save anyway
                os.write(2, line.encode())
        self.received = signum

    def install(self) -> bool:
        """Record :attr:`signals` from now on (their previous handlers kept for :meth:`release`),
        and loader workers' deaths (:func:`~dna_mm.engine.loader_workers.watch_worker_deaths`);
        ``False`` outside the main thread, where Python cannot catch signals."""
        if threading.current_thread() is not threading.main_thread():
            return False
        self.received, self._first_at = 0, {}
        watch_worker_deaths()
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._record)
        return True

    def release(self) -> None:
        """Put back the handlers :meth:`install` replaced (nothing if none)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        self._previous.clear()


@HOOKS.register_module()
class PreemptionHook(Hook):
    """Save and exit on ``signals`` at the end of the current iteration (module docstring).

    Args:
        signals: Names of the signals that stop the run (``signal.Signals`` names).
    """

    priority = 'LOWEST'

    def __init__(self, signals: tuple[str, ...] = ('SIGTERM', 'SIGUSR1', 'SIGINT')) -> None:
        self.stop = StopSignals(signals)
        self.signals = self.stop.signals

    @property
    def received(self) -> int:
        """The last signal's number; 0: none."""
        return self.stop.received

    def before_train(self, runner) -> None:
        if not self.stop.install():
            runner.logger.warning('PreemptionHook: training outside the main thread; signals are not caught')
            return
        for loop in (runner.train_loop, getattr(runner, '_val_loop', None)):
            loader = getattr(loop, 'dataloader', None)
            if getattr(loader, 'num_workers', 0):
                workers_die_with_parent(loader, ignore=self.signals)
        started = getattr(runner.train_loop, 'dataloader_iterator', None)  # iteration-based loops
        loader = getattr(runner.train_loop, 'dataloader', None)
        renews = getattr(started, 'renew', False)  # dna_mm's resumed iterator: anew at its first batch
        if started is not None and getattr(loader, 'num_workers', 0) and not renews:
            runner.train_loop.dataloader_iterator = fresh_iterator(loader)

    def after_train(self, runner) -> None:
        self.release()

    def release(self) -> None:
        """Put back the handlers :meth:`before_train` replaced (nothing if none)."""
        self.stop.release()

    def after_train_iter(
        self, runner, batch_idx: int, data_batch: Any = None, outputs: Optional[dict] = None
    ) -> None:
        signum = int(max_over_ranks([self.received])[0])
        if not signum:
            return
        self.release()
        path = save_preempted(runner)
        name, status = signal.Signals(signum).name, 128 + signum
        why = " (torchrun's agent ended)" if agent_ended() else ''
        runner.logger.warning(
            f'preempted by {name}{why}: saved {where_in_run(runner)} to {path}; '
            f'exit status {status} (128 + {name}); --resume continues from it'
        )
        raise Preempted(signum, path)


def save_preempted(runner) -> str:
    """Save the iteration that just ended as ``CheckpointHook(by_epoch=False)`` would, to
    :data:`PREEMPTED_TMPL` in the checkpoint hook's folder (else the work dir), on every rank
    together, point ``last_checkpoint`` at it and drop the previous out-of-schedule checkpoint;
    its path. After a resume in another layout a file of that name saved before it is moved
    aside first (:func:`set_aside_earlier_preempted`)."""
    hook = next((h for h in runner.hooks if isinstance(h, CheckpointHook)), None)
    out_dir = getattr(hook, 'out_dir', None) or runner.work_dir
    filename = PREEMPTED_TMPL.format(runner.iter + 1)
    backend = getattr(hook, 'file_backend', None)
    path = backend.join_path(out_dir, filename) if backend is not None else f'{out_dir}/{filename}'
    previous = runner.message_hub.get_info(INTERIM_INFO)
    if getattr(runner, 'resumed_layout', None) is not None:  # (the same on every rank)
        files = backend or get_file_backend(out_dir)
        main = is_main_process()
        aside = partial(set_aside_earlier_preempted, runner, files, out_dir, filename, previous)
        save_on_all_ranks(aside if main else lambda: None, path)
    runner.message_hub.update_info(INTERIM_INFO, path)  # in the checkpoint: the next one removes it
    save_on_all_ranks(
        lambda: runner.save_checkpoint(
            out_dir,
            filename,
            meta=dict(epoch=runner.epoch, iter=runner.iter + 1),
            by_epoch=False,
            backend_args=getattr(hook, 'backend_args', None),
        ),
        path,
    )
    point_last_checkpoint(runner.work_dir, path)
    stale = previous if previous and previous != path and backend is not None else None
    if is_main_process() and stale and backend.isfile(stale):
        backend.remove(stale)
    return path


def set_aside_earlier_preempted(
    runner, backend: Any, out_dir: str, filename: str, interim: Optional[str]
) -> None:
    """Before a run resumed in another layout (its iterations numbered anew) writes ``filename``
    (main process): a file of that name in ``out_dir`` was saved before the resume, at another
    point of training, and is moved to its :data:`~dna_mm.engine.checkpoint_hook.EARLIER_LAYOUT`
    name (one INFO line), as the checkpoint hook does with an ``iter_N.pth``. Not ``interim``
    (matched by name: the work dir may have moved since), the out-of-schedule checkpoint the run
    went on from: this run's next checkpoint replaces that one whatever its name (a
    ``preempted_iter_N.pth`` of another ``N`` removes it)."""
    path = backend.join_path(out_dir, filename)
    if (interim and osp.basename(interim) == filename) or not backend.isfile(path):
        return
    aside = earlier_layout_name(backend, out_dir, filename)
    move_checkpoint(backend, path, backend.join_path(out_dir, aside))
    runner.logger.info(set_aside_line(filename, aside, f'iteration {runner.iter + 1}'))
