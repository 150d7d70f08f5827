"""One run per work dir: a second ``tools/train.py`` into the work dir of a run still going is
refused with one line naming the holder and writes nothing there; once the holder is killed
(``kill -9``: no clean-up), ``--resume`` takes the folder over and continues."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import DEMO_CONFIG, REPO, run_main, tiny_run_options
from processes import steps


@pytest.mark.integration
def test_a_second_run_is_refused_and_resume_takes_over_from_a_killed_one(tiny_video_set, tmp_path) -> None:
    work = tmp_path / 'work'
    opts = [*tiny_run_options(tiny_video_set, epochs=12), 'default_hooks.checkpoint.interval=1']
    train = ['tools/train.py', DEMO_CONFIG, '--seed', '0', '--work-dir', str(work)]
    log = open(tmp_path / 'holder.out', 'w')
    holder = subprocess.Popen(
        [sys.executable, *train, '--cfg-options', *opts],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        start = time.time()
        while steps(work) < 5 and holder.poll() is None and time.time() - start < 300:
            time.sleep(0.05)
        assert holder.poll() is None, (tmp_path / 'holder.out').read_text()[-3000:]
        dump = work / 'timesformer_dna_demo.py'
        dumped = (dump.stat().st_mtime_ns, dump.read_text())
        folders = sorted(p.name for p in work.iterdir() if p.is_dir())  # the holder's log folder

        second = run_main([*train, '--cfg-options', *opts], check=False)
        errors = [ln for ln in second.stderr.splitlines() if ln.startswith('train.py: error:')]
        assert second.returncode == 2 and len(errors) == 1, second.stderr[-3000:]
        holder_is = f'pid {holder.pid} on {socket.gethostname()}, started '
        assert f'the work dir {work} is in use by another training run: {holder_is}' in errors[0]
        assert 'tools/train.py' in errors[0] and 'Traceback' not in second.stderr
        # the holder's command, shortened between words: each word shown is one of its words
        shown = errors[0].split(', started ', 1)[1].split(' (', 1)[1].rsplit('); wait for it', 1)[0]
        words = set(holder.args[1:]) | {os.path.basename(sys.executable)}
        assert shown.endswith(' ...') and {w.strip("'") for w in shown[: -len(' ...')].split()} <= words, (
            shown
        )
        assert (dump.stat().st_mtime_ns, dump.read_text()) == dumped  # its config copy untouched
        # no log folder of its own (the holder writes its checkpoints meanwhile: files, not folders)
        assert sorted(p.name for p in work.iterdir() if p.is_dir()) == folders
        assert holder.poll() is None  # and it trains on
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        log.close()

    # one epoch more than the killed run saved (its own experiment name: the refused run of this
    # process may have started in the same second)
    last = int(re.search(r'epoch_(\d+)\.pth', (work / 'last_checkpoint').read_text())[1])
    more = [f'train_cfg.max_epochs={last + 1}', 'experiment_name=takeover']
    out = run_main([*train, '--resume', '--cfg-options', *opts, *more]).stdout
    taken = [
        ln for ln in out.splitlines() if 'taking it over from a run that ended without releasing it' in ln
    ]
    assert len(taken) == 1 and f'pid {holder.pid} on {socket.gethostname()}' in taken[0], out[-3000:]
    assert f'resume: continuing from {work / f"epoch_{last}.pth"}' in out
    assert (work / f'epoch_{last + 1}.pth').is_file()
    assert (work / '.dna_mm_train.lock').read_text() == ''  # released at the end


def test_the_lock_refuses_a_second_holder_until_released(tmp_path) -> None:
    from dna_mm.engine import WorkDirBusyError, WorkDirLock

    first = WorkDirLock(str(tmp_path))
    assert first.acquire() == (True, {})
    with pytest.raises(WorkDirBusyError, match=f'pid {os.getpid()} on '):
        WorkDirLock(str(tmp_path)).acquire()
    first.release()
    again = WorkDirLock(str(tmp_path))
    assert again.acquire() == (True, {})  # released cleanly: nothing to take over
    again.release()


def test_a_child_of_a_killed_holder_does_not_keep_the_work_dir(tmp_path) -> None:
    """A data-loader worker outlives a ``kill -9``-ed run by seconds; it inherited the lock's
    descriptor, and must not hold the work dir for them (``--resume`` at once is taken)."""
    from dna_mm.engine.work_dir_lock import WorkDirLock, in_use

    holder = os.fork()
    if holder == 0:  # the run: lock, start a worker that lives on, die by SIGKILL
        lock = WorkDirLock(str(tmp_path))
        lock.acquire()
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(holder, 0)
    time.sleep(0.2)
    assert (tmp_path / '.dna_mm_train.lock').is_file()
    assert not in_use(str(tmp_path))


def test_a_probe_of_the_lock_does_not_refuse_the_run_taking_it(tmp_path) -> None:
    """Another process's probe (``in_use``: another rank building its runner, a ``tools/test.py``)
    holds a shared lock for an instant; a run taking the lock just then waits it out instead of
    reporting a run 'that has not written its name yet' (seen with two gloo ranks). A holder that
    has written its name is refused at once."""
    import fcntl
    import threading

    from dna_mm.engine.work_dir_lock import LOCK_NAME, WorkDirBusyError, WorkDirLock

    probe = open(tmp_path / LOCK_NAME, 'a+')
    fcntl.flock(probe.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
    threading.Timer(0.3, probe.close).start()  # the probe lets go (closing drops the flock)
    lock = WorkDirLock(str(tmp_path))
    assert lock.acquire()[0]
    named = time.monotonic()
    with pytest.raises(WorkDirBusyError, match=f'pid {os.getpid()} on'):
        WorkDirLock(str(tmp_path)).acquire()
    assert time.monotonic() - named < 1.0  # a named holder: no wait
    lock.release()
