"""Checkpoint writes a fault cannot spoil: a write over a real file-size limit (``RLIMIT_FSIZE``,
what a full disk does to a write) is one line naming the file and the cause, leaves no partial
file under a final name and deletes nothing (``max_keep_ckpts=1``: mmengine would have removed
the only checkpoint first); ``--resume`` skips a checkpoint that does not load and takes the one
before."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, run_main, tiny_run_options
from mmengine.hooks import Hook
from toy_runner import toy_runner

from dna_mm.checkpoint import read_checkpoint


def _file_size_limit(limit: int):
    """``preexec_fn``: files of the child may not grow past ``limit`` bytes; ``SIGXFSZ`` ignored,
    so a write past it fails with ``OSError: [Errno 27] File too large`` (as Python does)."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.integration
def test_a_write_past_the_file_size_limit_is_one_line_and_the_last_checkpoint_stays(
    tiny_video_set, tmp_path
) -> None:
    work = tmp_path / 'run'
    train = ['tools/train.py', DEMO_CONFIG, '--seed', '0', '--work-dir', str(work)]
    opts = [*tiny_run_options(tiny_video_set), 'default_hooks.checkpoint.max_keep_ckpts=1']
    run_main([*train, '--cfg-options', *opts])  # epoch_1.pth
    first = work / 'epoch_1.pth'
    size = first.stat().st_size

    # epoch 2 from epoch_1, in a process whose files may not grow past epoch_1's size: epoch_2.pth
    # holds two epochs of log history, so it is larger and its write fails
    two = [*opts, 'train_cfg.max_epochs=2', 'train_cfg.val_interval=2']
    proc = subprocess.run(
        [sys.executable, *train, '--resume', '--cfg-options', *two],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_file_size_limit(size),
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py: error:')]
    assert errors == [
        f'train.py: error: could not write the checkpoint {work / "epoch_2.pth"}: File too large '
        f'(EFBIG); nothing was written under that name; last_checkpoint still names {first}'
    ], proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr
    assert sorted(p.name for p in work.glob('*.pth*')) == ['epoch_1.pth']  # kept; no partial file
    assert (work / 'last_checkpoint').read_text() == str(first)
    assert read_checkpoint(str(first))['meta']['epoch'] == 1  # loads

    # a checkpoint that does not load (cut short, as a write without a temporary name leaves it)
    # named by last_checkpoint: --resume says so in one line and takes the one before
    cut = work / 'epoch_2.pth'
    cut.write_bytes(first.read_bytes()[: size // 2])
    (work / 'last_checkpoint').write_text(str(cut))
    out = run_main([*train, '--resume', '--cfg-options', *two]).stdout
    skipped = [ln for ln in out.splitlines() if 'resume: skipping' in ln]
    assert len(skipped) == 1 and f'{cut}, which does not load' in skipped[0], out[-3000:]
    assert f'trying the one before, {first}' in skipped[0]
    assert f'resume: continuing from {first}' in out
    written = read_checkpoint(str(cut))  # trained again and written whole over the cut file
    assert written['meta']['epoch'] == 2
    assert not first.exists()  # max_keep_ckpts=1, once epoch_2.pth was written


def test_pruning_waits_for_the_new_checkpoint_and_resume_falls_back(tmp_path) -> None:
    """``max_keep_ckpts=2``: the oldest goes after the new one is written; a damaged newest
    checkpoint and a missing one are skipped for the one before, an explicit one is not."""
    from dna_mm.engine.checkpoint_hook import resume_candidates
    from dna_mm.errors import UnreadableCheckpointError

    values = [2.0, 3.0, 0.5, 4.0, 1.5, 2.5, 3.5, 1.2]
    hooks = dict(checkpoint=dict(type='CheckpointHook', interval=2, by_epoch=False, max_keep_ckpts=2))
    toy_runner(tmp_path, values, max_iters=6, default_hooks=hooks).train()
    assert sorted(p.name for p in tmp_path.glob('*.pth*')) == ['iter_4.pth', 'iter_6.pth']
    assert resume_candidates(str(tmp_path)) == [str(tmp_path / 'iter_6.pth'), str(tmp_path / 'iter_4.pth')]

    (tmp_path / 'iter_6.pth').write_bytes(b'not a checkpoint')
    runner = toy_runner(tmp_path, values, resume=True, default_hooks=hooks)
    runner.train()  # from iter_4.pth: iterations 5 .. 8
    assert runner.iter == 8 and read_checkpoint(str(tmp_path / 'iter_8.pth'))['meta']['iter'] == 8
    assert torch.isfinite(runner.model.w).all()

    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'gone.pth'))
    runner = toy_runner(tmp_path, values, max_iters=9, resume=True, default_hooks=hooks)
    runner.train()  # gone.pth skipped: the newest file, iter_8.pth
    assert runner.iter == 9

    bad = tmp_path / 'bad.pth'
    bad.write_bytes(b'')
    runner = toy_runner(tmp_path, values, resume=True, default_hooks=hooks)
    runner._load_from = str(bad)  # --resume bad.pth: the user named it, so it is an error
    with pytest.raises(UnreadableCheckpointError, match='bad.pth'):
        runner.train()


def test_a_failed_write_leaves_the_final_name_as_it_was(tmp_path: Path) -> None:
    from dna_mm.engine.atomic_files import CheckpointWriteError, write_text_atomically
    from dna_mm.utils.files import atomic_path

    target = tmp_path / 'epoch_1.pth'
    target.write_bytes(b'old')
    with pytest.raises(RuntimeError), atomic_path(str(target), durable=True) as part:
        Path(part).write_bytes(b'half of a new fi')
        raise RuntimeError('killed while writing')
    assert target.read_bytes() == b'old' and not Path(part).exists()
    write_text_atomically(str(tmp_path / 'last_checkpoint'), str(target))
    assert (tmp_path / 'last_checkpoint').read_text() == str(target)
    (tmp_path / 'a_file').write_text('')
    with pytest.raises(CheckpointWriteError, match='could not write .*a_file/last_checkpoint'):
        write_text_atomically(str(tmp_path / 'a_file' / 'last_checkpoint'), 'x')


def test_the_previous_best_checkpoint_goes_only_once_the_new_one_is_written(tmp_path) -> None:
    """``save_best``: mmengine removes the previous best before writing the new one, so a write
    that fails (here past a real file-size limit) would leave no best checkpoint."""
    from dna_mm.engine.atomic_files import CheckpointWriteError
    from dna_mm.engine.checkpoint_hook import AtomicCheckpointHook

    runner = toy_runner(tmp_path, [2.0, 3.0], max_iters=2)
    runner.train()
    hook = AtomicCheckpointHook(interval=100, by_epoch=False, save_best='acc', filename_tmpl='a_{}.pth')
    hook.before_train(runner)
    hook.after_val_epoch(runner, {'acc': 0.5})
    first = tmp_path / 'best_acc_a_2.pth'
    assert first.is_file()

    hook.filename_tmpl = 'b_{}.pth'  # another name for the next best (as a later epoch's)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (first.stat().st_size // 2, limit[1]))
    try:
        with pytest.raises(CheckpointWriteError, match='best_acc_b_2.pth'):
            hook.after_val_epoch(runner, {'acc': 0.9})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
        signal.signal(signal.SIGXFSZ, handler)
    assert sorted(p.name for p in tmp_path.glob('best_*')) == [first.name]  # kept, nothing partial

    hook.filename_tmpl = 'c_{}.pth'
    hook.after_val_epoch(runner, {'acc': 0.95})
    assert sorted(p.name for p in tmp_path.glob('best_*')) == ['best_acc_c_2.pth']


def test_resume_finds_the_checkpoints_of_a_work_dir_moved_or_with_a_damaged_pointer(tmp_path) -> None:
    """``last_checkpoint`` holds the absolute path it was written with: after ``mv run run2`` it
    names a folder that is gone, and the work dir's own checkpoints are the ones to try; a pointer
    that is relative, empty, binary or of NUL bytes names nothing (no traceback)."""
    from dna_mm.engine.checkpoint_hook import resume_candidates

    values = [2.0, 3.0, 0.5, 4.0]
    toy_runner(tmp_path / 'run', values, checkpoint_interval=2).train()
    moved = tmp_path / 'run2'
    (tmp_path / 'run').rename(moved)
    assert (moved / 'last_checkpoint').read_text() == str(tmp_path / 'run' / 'iter_4.pth')
    own = [str(moved / 'iter_4.pth'), str(moved / 'iter_2.pth')]
    assert resume_candidates(str(moved)) == [str(tmp_path / 'run' / 'iter_4.pth'), *own]
    runner = toy_runner(moved, values, max_iters=6, checkpoint_interval=2, resume=True)
    runner.train()  # the missing file skipped: from run2/iter_4.pth
    assert runner.iter == 6

    for pointer, named in (
        (b'iter_2.pth', [own[1]]),
        (b'', []),
        (b'\x00' * 39, []),
        (bytes(range(128, 256)), []),
    ):
        (moved / 'last_checkpoint').write_bytes(pointer)
        found = resume_candidates(str(moved))
        assert found[: len(named)] == named and set(found) == {*own, str(moved / 'iter_6.pth')}, pointer


@pytest.mark.integration
def test_a_write_the_storage_refuses_outside_a_checkpoint_is_one_line(tiny_video_set, tmp_path) -> None:
    """A file-size limit (what a full disk or a quota does to a write) met by a log or the config's
    copy, not a checkpoint: one line saying what the storage refused, exit status 2."""
    train = ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path / 'run')]
    proc = subprocess.run(
        [sys.executable, *train, '--cfg-options', *tiny_run_options(tiny_video_set)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_file_size_limit(2000),
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py: error:')]
    assert len(errors) == 1 and 'the storage refused ' in errors[0], proc.stderr[-3000:]
    assert 'File too large (EFBIG); free space (or write elsewhere) and run again' in errors[0]
    assert 'Traceback' not in proc.stderr


def test_an_existing_work_dir_that_cannot_be_written_is_one_line(tmp_path) -> None:
    """A read-only file system (a bind mount remounted read-only, which root cannot write either;
    for another user a read-only folder): refused before the runner makes its folders in it."""
    import os

    from dna_mm.config.prepare import make_work_dir
    from dna_mm.errors import ConfigError

    folder = tmp_path / 'ro'
    folder.mkdir()
    mounted = False
    if os.geteuid() == 0:
        steps = (
            ['mount', '--bind', str(folder), str(folder)],
            ['mount', '-o', 'remount,bind,ro', str(folder)],
        )
        for step in steps:
            if subprocess.run(step, capture_output=True).returncode != 0:
                break
            mounted = True
        if not mounted or os.access(folder, os.W_OK):
            if mounted:
                subprocess.run(['umount', str(folder)], check=True)
            pytest.skip('no read-only mount here (mount needs CAP_SYS_ADMIN)')
    else:
        folder.chmod(0o555)
    try:
        with pytest.raises(ConfigError, match=r'work dir .*/ro .* cannot be written \(a read-only'):
            make_work_dir(str(folder))
    finally:
        if mounted:
            subprocess.run(['umount', str(folder)], check=True)
        folder.chmod(0o755)


def test_a_run_resumed_in_a_copy_replaces_its_own_best_not_the_originals(tmp_path) -> None:
    """mmengine keeps the best checkpoint's whole path in the message hub: a run resumed in a
    copy of a work dir removed the original's best file (and kept two of its own); one in a moved
    work dir removed none (and kept two)."""
    import shutil

    from dna_mm.engine.checkpoint_hook import AtomicCheckpointHook

    original = tmp_path / 'run'
    runner = toy_runner(original, [2.0, 3.0], max_iters=2)
    runner.train()
    hook = AtomicCheckpointHook(interval=100, by_epoch=False, save_best='acc', filename_tmpl='a_{}.pth')
    hook.before_train(runner)
    hook.after_val_epoch(runner, {'acc': 0.5})
    recorded = runner.message_hub.get_info('best_ckpt')
    assert recorded == str(original / 'best_acc_a_2.pth')
    for name, make in (('copy', shutil.copytree), ('moved', shutil.move)):
        there = tmp_path / name
        make(original, there)
        resumed = toy_runner(there, [2.0, 3.0], max_iters=2)
        resumed.message_hub.update_info('best_ckpt', recorded)  # as the resume restores it
        resumed.message_hub.update_info('best_score', 0.5)
        again = AtomicCheckpointHook(interval=100, by_epoch=False, save_best='acc', filename_tmpl='b_{}.pth')
        again.before_train(resumed)
        again.after_val_epoch(resumed, {'acc': 0.9})
        assert sorted(p.name for p in there.glob('best_*')) == ['best_acc_b_0.pth'], name
        if name == 'copy':
            assert sorted(p.name for p in original.glob('best_*')) == ['best_acc_a_2.pth']


def test_a_checkpoint_out_dir_is_where_resume_looks_and_an_earlier_run_is_set_aside(tmp_path) -> None:
    """``default_hooks.checkpoint.out_dir``: the checkpoints are in ``out_dir/<work dir name>``.
    A ``last_checkpoint`` lost with the work dir (node-local) still resumes from there, and a new
    run into the work dir moves the earlier run's checkpoints aside there (as in a work dir)."""
    from dna_mm.engine.checkpoint_hook import checkpoint_folder, resume_candidates

    values, work, out = [2.0, 3.0, 0.5, 4.0], tmp_path / 'run', tmp_path / 'shared'
    hooks = dict(checkpoint=dict(type='CheckpointHook', interval=2, by_epoch=False, out_dir=str(out)))
    toy_runner(work, values, default_hooks=hooks).train()
    folder = out / 'run'
    assert checkpoint_folder(str(work), str(out)) == str(folder)
    assert sorted(p.name for p in folder.glob('*.pth')) == ['iter_2.pth', 'iter_4.pth']
    (work / 'last_checkpoint').unlink()
    assert resume_candidates(str(work), str(folder))[0] == str(folder / 'iter_4.pth')
    before = (folder / 'iter_4.pth').stat().st_mtime_ns
    resumed = toy_runner(work, values, max_iters=6, default_hooks=hooks, resume=True)
    resumed.train()
    assert (folder / 'iter_4.pth').stat().st_mtime_ns == before and (folder / 'iter_6.pth').is_file()
    toy_runner(work, values, default_hooks=hooks).train()  # a new run, not a resume
    (aside,) = folder.glob('earlier_run_*')
    assert sorted(p.name for p in aside.glob('*.pth')) == ['iter_2.pth', 'iter_4.pth', 'iter_6.pth']
    assert sorted(p.name for p in folder.glob('*.pth')) == ['iter_2.pth', 'iter_4.pth']


class StopAt(Hook):
    """Stop the run after iteration ``at`` (1-based) as mmengine's ``EarlyStoppingHook`` does:
    ``train_loop.stop_training = True``, which the loop reads before its next iteration / epoch."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 == self.at:
            runner.train_loop.stop_training = True


@pytest.mark.parametrize('loop', ['iterations', 'epochs'])
def test_a_run_stopped_early_saves_where_it_stopped(tmp_path, loop: str) -> None:
    """An iteration-based run stopped at iteration 3 with checkpoints every 100 (mmengine saves
    the last one only at max_iters: none was kept); an epoch-based one stopped in epoch 2 of 4
    with checkpoints every 3 epochs: the point where it stopped is saved and resumes there."""
    values = [2.0, 3.0, 0.5, 4.0]
    if loop == 'iterations':
        run = dict(max_iters=8, checkpoint_interval=100)
        saved, meta = 'iter_3.pth', dict(iter=3)
    else:
        run = dict(
            train_cfg=dict(type='ResumableEpochBasedTrainLoop', max_epochs=4),
            default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=3, by_epoch=True)),
        )
        saved, meta = 'epoch_2.pth', dict(epoch=2, iter=8)
    toy_runner(tmp_path, values, hooks=[StopAt(3 if loop == 'iterations' else 6)], **run).train()
    assert (tmp_path / 'last_checkpoint').read_text() == str(tmp_path / saved)
    checkpoint = read_checkpoint(str(tmp_path / saved))
    assert {k: checkpoint['meta'][k] for k in meta} == meta
    resumed = toy_runner(tmp_path, values, resume=True, **run)
    resumed.train()
    assert resumed.iter == (8 if loop == 'iterations' else 16)
