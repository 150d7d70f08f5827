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
from typing import Callable, Optional

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook
from mmengine.registry import HOOKS

from ..errors import ConfigError
from .atomic_files import CheckpointWriteError, write_text_atomically
from .ranks import any_rank

#: the message-hub key naming a checkpoint written out of schedule (removed by the next one)
INTERIM_INFO = 'interim_ckpt'
#: the training checkpoints of a work dir that ``--resume`` may fall back to
CHECKPOINT_NAME = re.compile(r'(epoch|iter|preempted_iter)_\d+\.pth')
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


def resume_candidates(work_dir: str) -> list[str]:
    """The checkpoints ``--resume`` tries, in order: the one ``last_checkpoint`` names
    (:func:`named_checkpoint`), then the other training checkpoints (:data:`CHECKPOINT_NAME`) of
    its folder, then of the work dir (a work dir moved since, whose ``last_checkpoint`` names the
    old folder), each folder's newest first."""
    named = named_checkpoint(work_dir)
    folders = dict.fromkeys(
        f for f in (osp.dirname(named), work_dir) if f and '://' not in f and osp.isdir(f)
    )
    found = []
    for folder in folders:
        here = [osp.join(folder, n) for n in os.listdir(folder) if CHECKPOINT_NAME.fullmatch(n)]
        found += sorted((p for p in here if osp.isfile(p)), key=lambda p: (osp.getmtime(p), p), reverse=True)
    return list(dict.fromkeys([named] if named else [])) + [p for p in dict.fromkeys(found) if p != named]


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
    successful save, and a save that all ranks agree on (module docstring)."""

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

    def _save_checkpoint_with_step(self, runner, step: int, meta: dict) -> None:
        expired = self._keep(runner, step)
        filename = self.filename_tmpl.format(step)
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
        if not is_main_process():
            return
        point_last_checkpoint(runner.work_dir, self.last_ckpt)
        done = [interim] if interim else []
        if expired is not None:
            done.append(self.file_backend.join_path(self.out_dir, self.filename_tmpl.format(expired)))
        for path in done:
            if path != self.last_ckpt:
                self._remove(path)

    def _keep(self, runner, step: int) -> Optional[int]:
        """mmengine's ``keep_ckpt_ids`` bookkeeping for ``step`` (recorded before the save, so the
        checkpoint lists itself); the step whose file goes once the save worked, if any."""
        if self.max_keep_ckpts <= 0 or (self.keep_ckpt_ids and self.keep_ckpt_ids[-1] == step):
            return None
        expired = self.keep_ckpt_ids.popleft() if len(self.keep_ckpt_ids) == self.max_keep_ckpts else None
        self.keep_ckpt_ids.append(step)
        runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))
        return expired

    def _remove(self, path: str) -> None:
        if self.file_backend.isfile(path):
            self.file_backend.remove(path)
        elif self.file_backend.isdir(path):  # deepspeed saves folders
            self.file_backend.rmtree(path)
