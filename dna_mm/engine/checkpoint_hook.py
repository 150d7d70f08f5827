"""``AtomicCheckpointHook``: mmengine's ``CheckpointHook`` whose checkpoints a fault cannot spoil.

Same arguments and file names as mmengine 0.10.7's; three things differ:

* **Whole files.** The checkpoint and ``last_checkpoint`` are written to a temporary name and
  renamed (:mod:`dna_mm.engine.atomic_files`; ``DnARunner.save_checkpoint`` does it for the
  checkpoint): a kill or a full disk never leaves part of a file under a final name, and
  ``last_checkpoint`` always names a whole file.
* **Save first, prune after.** With ``max_keep_ckpts=N`` mmengine deletes the oldest checkpoint
  *before* writing the new one, so a failed write can leave none that loads, and with
  ``save_best`` the previous best before the new best. Here the old file goes only once the new
  one is written: the newest checkpoint (and best checkpoint) that loads is never deleted.
* **All ranks together.** A failed write stops every rank, not only rank 0, which writes
  (:func:`save_on_all_ranks`).
* **A ``save_best`` the validation does not report** is a :class:`~dna_mm.errors.ConfigError`
  naming the keys it reports (mmengine: a ``KeyError`` traceback).
* **A resume in another layout** (another number of processes or batch per process:
  ``DnARunner.resumed_layout``) numbers iterations anew, so the saved run's ``iter_8.pth`` is
  another point of training than this run's. ``max_keep_ckpts`` goes on keeping the newest
  checkpoints of the run: the kept ones saved before the resume are tracked by file name, not by
  number (``keep_ckpt_ids`` holds their names). A checkpoint saved before the resume that this run
  would overwrite with its own of the same name is moved aside first, to
  ``iter_8_earlier_layout.pth`` (:data:`EARLIER_LAYOUT`; one INFO line), and pruned in its turn.
  So is a ``preempted_iter_8.pth`` saved before the resume that this run's preemption would
  overwrite (:func:`~dna_mm.engine.preemption.save_preempted`), unless it is the out-of-schedule
  checkpoint this run went on from, which this run's next checkpoint replaces whatever its name.

``--resume`` reads the files in the order of :func:`resume_candidates` and skips one that does
not load (``DnARunner.load_or_resume``). A checkpoint written out of schedule (on preemption,
:mod:`dna_mm.engine.preemption`) is recorded in the message hub as :data:`INTERIM_INFO` and
removed once a later scheduled checkpoint is written.
"""

from __future__ import annotations

import copy
import os
import os.path as osp
import re
from collections import deque
from typing import Any, Callable, Optional, Union

from mmengine.dist import is_main_process
from mmengine.fileio import LocalBackend
from mmengine.hooks import CheckpointHook
from mmengine.registry import HOOKS

from ..errors import ConfigError
from .atomic_files import CheckpointWriteError, write_text_atomically
from .ranks import any_rank

#: the message-hub key naming a checkpoint written out of schedule (removed by the next one)
INTERIM_INFO = 'interim_ckpt'
#: the name a checkpoint saved before a resume in another layout is moved to when the resumed
#: run writes one of its name (``iter_8.pth`` -> ``iter_8_earlier_layout.pth``; then ``..._2``, ...)
EARLIER_LAYOUT = '{stem}_earlier_layout{n}{ext}'
#: the training checkpoints of a work dir that ``--resume`` may fall back to
CHECKPOINT_NAME = re.compile(r'(epoch|iter|preempted_iter)_\d+(_earlier_layout(_\d+)?)?\.pth')
#: a kept checkpoint: a step of this run's layout (its file ``filename_tmpl.format(step)``), or
#: the file name of one saved before a resume in another layout
KeptCheckpoint = Union[int, str]
LAST_CHECKPOINT = 'last_checkpoint'


def save_on_all_ranks(save: Callable[[], None], path: str) -> None:
    """Call ``save`` (mmengine writes on rank 0 only); then a failure on any rank raises on
    every rank: its error where it happened, a :class:`CheckpointWriteError` naming ``path``
    elsewhere. One all-reduce; none in a run of one process."""
    error: Optional[Exception] = None
    try:
        save()
    except Exception as err:  # noqa: BLE001 (re-raised below, on every rank)
        error = err
    if any_rank(error is not None):
        if error is not None:
            raise error
        raise CheckpointWriteError(f'checkpoint {path} was not written (rank 0 failed; its log says why)')


def point_last_checkpoint(work_dir: str, path: str) -> None:
    """``<work_dir>/last_checkpoint`` = ``path``, whole or not at all (main process only)."""
    if is_main_process():
        write_text_atomically(osp.join(work_dir, LAST_CHECKPOINT), path)


def named_checkpoint(work_dir: str) -> str:
    """The path ``last_checkpoint`` names (relative to the work dir), or ``''``: no such file, or
    one that names no path (empty, binary, more than one line: a damaged file)."""
    pointer = osp.join(work_dir, LAST_CHECKPOINT)
    if not osp.isfile(pointer):
        return ''
    with open(pointer, 'rb') as file:
        raw = file.read(64 * 1024)
    try:
        named = raw.decode('utf-8').strip()
    except UnicodeDecodeError:
        return ''
    if not named or any(c in named for c in '\x00\n\r'):
        return ''
    return named if '://' in named or osp.isabs(named) else osp.join(work_dir, named)


def checkpoint_folder(work_dir: str, out_dir: Optional[str]) -> Optional[str]:
    """Where a run in ``work_dir`` writes its checkpoints when ``default_hooks.checkpoint.out_dir``
    is ``out_dir`` (mmengine's ``CheckpointHook``: ``out_dir/<the work dir's name>``); ``None``
    for the work dir itself, or for a remote ``out_dir`` (a URL)."""
    if not out_dir or out_dir == work_dir or '://' in str(out_dir):
        return None
    return osp.join(out_dir, osp.basename(work_dir.rstrip(osp.sep)))


def resume_candidates(work_dir: str, checkpoints: Optional[str] = None) -> list[str]:
    """The checkpoints ``--resume`` tries, in order: the one ``last_checkpoint`` names
    (:func:`named_checkpoint`), then the other training checkpoints (:data:`CHECKPOINT_NAME`) of
    its folder, of the run's checkpoint folder (``checkpoints``: :func:`checkpoint_folder`, for a
    ``last_checkpoint`` lost with a node-local work dir), then of the work dir (a work dir moved
    since, whose ``last_checkpoint`` names the old folder), each folder's newest first."""
    named = named_checkpoint(work_dir)
    folders = dict.fromkeys(
        f for f in (osp.dirname(named), checkpoints, work_dir) if f and '://' not in f and osp.isdir(f)
    )
    found = []
    for folder in folders:
        here = [osp.join(folder, n) for n in os.listdir(folder) if CHECKPOINT_NAME.fullmatch(n)]
        found += sorted((p for p in here if osp.isfile(p)), key=lambda p: (osp.getmtime(p), p), reverse=True)
    return list(dict.fromkeys([named] if named else [])) + [p for p in dict.fromkeys(found) if p != named]


def earlier_layout_name(backend: Any, out_dir: str, filename: str) -> str:
    """The first :data:`EARLIER_LAYOUT` name of ``filename`` (``iter_8_earlier_layout.pth``, then
    ``..._2``, ...) that ``out_dir`` does not hold."""
    stem, ext = osp.splitext(filename)
    n = 1
    aside = EARLIER_LAYOUT.format(stem=stem, n='', ext=ext)
    while backend.exists(backend.join_path(out_dir, aside)):
        n += 1
        aside = EARLIER_LAYOUT.format(stem=stem, n=f'_{n}', ext=ext)
    return aside


def move_checkpoint(backend: Any, src: str, dst: str) -> None:
    """``src`` (a file, or deepspeed's folder) renamed ``dst``."""
    if isinstance(backend, LocalBackend):
        os.replace(src, dst)
        return
    if backend.isdir(src):
        backend.copytree(src, dst)
    else:
        backend.put(backend.get(src), dst)
    remove_checkpoint(backend, src)


def remove_checkpoint(backend: Any, path: str) -> None:
    """``path`` removed: a file, or deepspeed's folder (nothing where there is neither)."""
    if backend.isfile(path):
        backend.remove(path)
    elif backend.isdir(path):
        backend.rmtree(path)


def set_aside_line(filename: str, aside: str, step: str) -> str:
    """The INFO line of ``filename`` moved to ``aside`` before this run writes its own at ``step``
    (``'iteration 8'``)."""
    return (
        f'checkpoint: {filename} was saved before the resume in another layout (another point of '
        f"training than this run's {step}): moved to {aside}, not overwritten"
    )


class _DeferredRemovals:
    """A file backend whose ``remove`` / ``rmtree`` are recorded (:attr:`removals`), not done."""

    def __init__(self, backend) -> None:
        self._backend, self.removals = backend, []

    def remove(self, path: str) -> None:
        self.removals.append(path)

    def rmtree(self, path: str) -> None:
        self.removals.append(path)

    def __getattr__(self, name: str):
        return getattr(self._backend, name)


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """mmengine's ``CheckpointHook`` (same arguments) with whole-file writes, pruning after a
    successful save, a save that all ranks agree on, and the checkpoints of a run resumed in
    another layout kept apart from its own (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: resumed in another layout with checkpoints named by iteration: a file of a name this run
        #: writes that it did not write itself is another point of training (:meth:`before_train`)
        self._in_layout = False
        self._written: set[str] = set()  # the file names this run wrote (in its layout)

    def before_train(self, runner) -> None:
        """mmengine's, with the kept checkpoints restored here (:meth:`_restore_kept`) and the
        best checkpoints the resumed one records taken as this folder's (:meth:`_best_here`)."""
        keep, self.max_keep_ckpts = self.max_keep_ckpts, 0  # mmengine's restore: not by file name
        try:
            super().before_train(runner)
        finally:
            self.max_keep_ckpts = keep
        self._best_here(runner)
        self._in_layout = getattr(runner, 'resumed_layout', None) is not None and not self.by_epoch
        self._written = set()
        if keep > 0:
            self._restore_kept(runner, self._in_layout)

    def _restore_kept(self, runner, in_layout: bool) -> None:
        """``keep_ckpt_ids`` from the message hub (mmengine's restore): the oldest beyond
        ``max_keep_ckpts`` removed; after a resume in another layout (``in_layout``: iterations
        numbered anew) the saved steps become their file names, which stay right."""
        kept: list[KeptCheckpoint] = list(runner.message_hub.get_info('keep_ckpt_ids') or [])
        if in_layout:
            kept = [self._name(k) for k in kept]
        while len(kept) > self.max_keep_ckpts:
            expired = kept.pop(0)
            if is_main_process():
                self._remove(self._path(expired))
        self.keep_ckpt_ids = deque(kept, self.max_keep_ckpts)
        if in_layout:  # a checkpoint written before the next scheduled one (preemption) holds these
            runner.message_hub.update_info('keep_ckpt_ids', kept)

    def _best_here(self, runner) -> None:
        """The best checkpoints a resumed checkpoint records (mmengine keeps their paths whole:
        the folder the run wrote them to then) as the files of those names in this run's
        ``out_dir``: a run resumed in a copy of a work dir never removes the best checkpoint of
        the original, and one in a moved work dir replaces its own."""

        def here(path: Optional[str]) -> Optional[str]:
            return self.file_backend.join_path(self.out_dir, osp.basename(path)) if path else path

        if getattr(self, 'best_ckpt_path', None):
            self.best_ckpt_path = here(self.best_ckpt_path)
            runner.message_hub.update_info('best_ckpt', self.best_ckpt_path)
        for key, path in getattr(self, 'best_ckpt_path_dict', {}).items():
            if path:
                self.best_ckpt_path_dict[key] = here(path)
                runner.message_hub.update_info(f'best_ckpt_{key}', self.best_ckpt_path_dict[key])

    def _name(self, kept: KeptCheckpoint) -> str:
        """The file name of a kept checkpoint."""
        return kept if isinstance(kept, str) else self.filename_tmpl.format(kept)

    def _path(self, kept: KeptCheckpoint) -> str:
        return self.file_backend.join_path(self.out_dir, self._name(kept))

    def _kept_names(self) -> list[str]:
        """The kept checkpoints saved before a resume in another layout (tracked by file name)."""
        return [k for k in getattr(self, 'keep_ckpt_ids', ()) if isinstance(k, str)]

    def _set_aside_earlier(self, runner, filename: str, step: int) -> None:
        """Before this run writes ``filename`` (main process): a file of that name saved before
        the resume in another layout (a kept one tracked by name, or one this run did not write
        since it resumed in another layout) is another point of training; it is moved to
        :data:`EARLIER_LAYOUT`, and kept as long as it was."""
        path = self.file_backend.join_path(self.out_dir, filename)
        names = self._kept_names()
        if filename in self._written or not (filename in names or self._in_layout):
            return
        aside = earlier_layout_name(self.file_backend, self.out_dir, filename)
        there = self.file_backend.isfile(path) or self.file_backend.isdir(path)
        if there:
            move_checkpoint(self.file_backend, path, self.file_backend.join_path(self.out_dir, aside))
        if filename in names:  # (renamed even when gone: its expiry must not remove this run's file)
            self.keep_ckpt_ids = deque(
                (aside if k == filename else k for k in self.keep_ckpt_ids), self.max_keep_ckpts
            )
            runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))
        if there:
            runner.logger.info(
                set_aside_line(filename, aside, f'{"epoch" if self.by_epoch else "iteration"} {step}')
            )

    def _save_best_checkpoint(self, runner, metrics: dict) -> None:
        """mmengine's, after a check that each ``save_best`` key is among ``metrics``; the previous
        best checkpoint is removed once the new one is written (mmengine: before)."""
        wanted = [k for k in (getattr(self, 'key_indicators', None) or []) if k != 'auto']
        unknown = [k for k in wanted if k not in metrics]
        if self.save_best and unknown and metrics:
            raise ConfigError(
                f'default_hooks.checkpoint.save_best={unknown[0]!r}: the validation reports '
                f"{', '.join(sorted(metrics))} (or 'auto': the first of them); --resume goes on from the "
                f'last checkpoint'
            )
        backend, self.file_backend = self.file_backend, _DeferredRemovals(self.file_backend)
        kept = {k: v for k, v in vars(self).items() if k.startswith('best_ckpt_path')}
        hub = {k: v for k, v in runner.message_hub.runtime_info.items() if k.startswith('best_')}
        try:
            super()._save_best_checkpoint(runner, metrics)
        except BaseException:  # not written: the previous best stays the best (and on disk)
            vars(self).update(copy.deepcopy(kept))
            for key, value in hub.items():
                runner.message_hub.update_info(key, value)
            raise
        finally:
            removals, self.file_backend = self.file_backend.removals, backend
        best = {getattr(self, 'best_ckpt_path', None), *getattr(self, 'best_ckpt_path_dict', {}).values()}
        for path in removals:
            if path not in best:
                self._remove(path)

    def after_train(self, runner) -> None:
        """mmengine's; with ``save_last``, a run stopped early (``train_loop.stop_training``, as
        mmengine's ``EarlyStoppingHook`` stops it) saves where it stopped, unless a checkpoint of
        that point was written (mmengine saves the last one only at ``max_epochs`` /
        ``max_iters``: an iteration-based run stopped between two intervals kept none)."""
        step = runner.epoch if self.by_epoch else runner.iter  # done: the loop counted it
        if self.save_last and getattr(runner.train_loop, 'stop_training', False) and step > 0:
            if self.filename_tmpl.format(step) not in self._written:
                unit = 'epochs' if self.by_epoch else 'iterations'
                runner.logger.info(f'stopped early: saving checkpoint at {step} {unit}')
                self._save_checkpoint_with_step(runner, step, dict(epoch=runner.epoch, iter=runner.iter))
        super().after_train(runner)

    def _save_checkpoint_with_step(self, runner, step: int, meta: dict) -> None:
        filename = self.filename_tmpl.format(step)
        if self._in_layout or self._kept_names():  # (the same on every rank: from the checkpoint)
            save_on_all_ranks(
                lambda: self._set_aside_earlier(runner, filename, step) if is_main_process() else None,
                self.file_backend.join_path(self.out_dir, filename),
            )
        expired = self._keep(runner, step)
        self.last_ckpt = self.file_backend.join_path(self.out_dir, filename)
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        interim = runner.message_hub.get_info(INTERIM_INFO)
        if interim:  # None, not popped: a resumed key left without its value gets mmengine's warning
            runner.message_hub.update_info(INTERIM_INFO, None)
        save_on_all_ranks(
            lambda: runner.save_checkpoint(
                self.out_dir,
                filename,
                self.file_client_args,
                save_optimizer=self.save_optimizer,
                save_param_scheduler=self.save_param_scheduler,
                meta=meta,
                by_epoch=self.by_epoch,
                backend_args=self.backend_args,
                **self.args,
            ),
            self.last_ckpt,
        )
        self._written.add(filename)
        if not is_main_process():
            return
        point_last_checkpoint(runner.work_dir, self.last_ckpt)
        done = [interim] if interim else []
        if expired is not None:
            done.append(self._path(expired))
        for path in done:
            if path != self.last_ckpt:
                self._remove(path)

    def _keep(self, runner, step: int) -> Optional[KeptCheckpoint]:
        """mmengine's ``keep_ckpt_ids`` bookkeeping for ``step`` (recorded before the save, so the
        checkpoint lists itself); the kept checkpoint whose file goes once the save worked, if
        any. A step listed already (its file written again) is listed once, as the newest."""
        if self.max_keep_ckpts <= 0 or (self.keep_ckpt_ids and self.keep_ckpt_ids[-1] == step):
            return None
        if step in self.keep_ckpt_ids:
            self.keep_ckpt_ids.remove(step)
        expired = self.keep_ckpt_ids.popleft() if len(self.keep_ckpt_ids) == self.max_keep_ckpts else None
        self.keep_ckpt_ids.append(step)
        runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))
        return expired

    def _remove(self, path: str) -> None:
        remove_checkpoint(self.file_backend, path)
