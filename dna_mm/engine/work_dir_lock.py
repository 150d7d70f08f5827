"""One training run per work dir: an exclusive ``flock`` on ``<work_dir>/.dna_mm_train.lock``.

A second ``tools/train.py`` into the work dir of a run still going would write over its
checkpoints and ``last_checkpoint``. The run holds ``flock(LOCK_EX | LOCK_NB)`` on the lock file
for as long as it trains and writes its holder (pid, host, start time, command) into the file; a
second run finds the lock taken and stops with :class:`WorkDirBusyError`, one line naming the
holder. The kernel drops a ``flock`` when its process ends in any way (``kill -9`` included), and
a forked child (a data-loader worker, which outlives a killed run by seconds) lets go of its
inherited copy at once, so a dead run never leaves the folder locked: the next run (``--resume``
to continue it) takes it over, and says so when the holder had not released it. The file is
emptied, never deleted, on release (deleting a lock file lets two runs lock two different files).

``flock`` works across machines on NFS (Linux emulates it with NFS byte-range locks) and on
Lustre mounted with ``-o flock``; on a file system without locks the run warns and goes on
unlocked. Only the process of rank 0 locks (every rank learns its answer); ``tools/test.py``
does not lock (testing a checkpoint while training goes on is fine).
"""

from __future__ import annotations

import json
import os
import os.path as osp
import shlex
import socket
import sys
import textwrap
import time

from ..errors import UserError

try:
    import fcntl
except ImportError:  # not POSIX: no lock
    fcntl = None

LOCK_NAME = '.dna_mm_train.lock'
#: characters of the holder's command a message shows (cut between words, ``...`` marking the cut)
COMMAND_SHOWN = 240
#: the lock files this process holds; a forked child (a data-loader worker) closes its copies
_HELD: set = set()
#: seconds :meth:`WorkDirLock.acquire` waits out a lock held by no named run: a probe
#: (:func:`in_use`: another rank's, a ``tools/test.py``'s) holds it for microseconds, and a run
#: writes its name just after it takes it
NAMELESS_WAIT = 2.0


def _close_in_child() -> None:
    """After a fork, in the child: let go of the inherited lock files. A ``flock`` lasts while any
    descriptor of its open file lives; a loader worker that outlives a killed run by a few
    seconds would otherwise keep the work dir locked for them, and refuse its ``--resume``."""
    for f in list(_HELD):
        try:  # the descriptor's number stays valid (the child's file object still names it)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, f.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
    _HELD.clear()


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_close_in_child)


class WorkDirBusyError(UserError, RuntimeError):
    """Another live run holds the work dir."""


def holder_text(holder: dict) -> str:
    """``'pid 4242 on gpu07, started 2026-11-28 04:30:12 UTC (python tools/train.py ...)'``."""
    if not holder:
        return 'a process that has not written its name yet'
    shown = textwrap.shorten(holder.get('command') or '', COMMAND_SHOWN, placeholder=' ...')
    command = f' ({shown})' if shown else ''
    return f'pid {holder.get("pid")} on {holder.get("host")}, started {holder.get("started")}{command}'


class WorkDirLock:
    """The lock of one work dir (module docstring). :meth:`acquire` it, :meth:`release` it."""

    def __init__(self, work_dir: str) -> None:
        self.path = osp.join(work_dir, LOCK_NAME)
        self._file = None

    def _read(self, f) -> dict:
        f.seek(0)
        try:
            return json.loads(f.read() or '{}')
        except ValueError:
            return {}

    def acquire(self) -> tuple[bool, dict]:
        """Take the lock. Returns ``(locked, previous)``: ``locked`` is ``False`` where the file
        system has no locks (the run goes on unlocked); ``previous`` is the holder written by a
        run that ended without releasing it (killed), else ``{}``. A live holder raises
        :class:`WorkDirBusyError`; a holder that has no name after :data:`NAMELESS_WAIT` seconds
        too (before, a probe's shared lock, or a run about to write its name: tried again)."""
        if fcntl is None:
            return False, {}
        f = open(self.path, 'a+')
        deadline = time.monotonic() + NAMELESS_WAIT
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self._read(f)
                if holder or time.monotonic() > deadline:
                    f.close()
                    raise busy_error(osp.dirname(self.path), holder) from None
                time.sleep(0.02)
            except OSError:  # ENOLCK, EINVAL, ENOTSUP: no locks on this file system
                f.close()
                return False, {}
        previous = self._read(f)
        holder = dict(
            pid=os.getpid(),
            host=socket.gethostname(),
            started=time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()),
            command=shlex.join([osp.basename(sys.executable), *sys.argv]),
        )
        f.seek(0)
        f.truncate()
        f.write(json.dumps(holder))
        f.flush()
        os.fsync(f.fileno())
        self._file = f
        _HELD.add(f)
        return True, previous

    def release(self) -> None:
        """Empty the file and drop the lock (nothing if not held)."""
        f, self._file = self._file, None
        if f is None:
            return
        _HELD.discard(f)
        try:
            f.seek(0)
            f.truncate()
            f.flush()
        finally:
            f.close()  # closing drops the flock


def busy_error(work_dir: str, holder: dict) -> WorkDirBusyError:
    """The error for a second run into ``work_dir``, which ``holder`` holds."""
    return WorkDirBusyError(
        f'the work dir {work_dir} is in use by another training run: {holder_text(holder)}; '
        f'wait for it to end, stop it, or choose another --work-dir'
    )


def refuse_if_in_use(work_dir: str) -> None:
    """A :class:`WorkDirBusyError` naming the holder when a live run holds ``work_dir``: asked
    before a training run is built, so that a refused one writes nothing there (not even its
    timestamped log folder)."""
    if in_use(work_dir):
        with open(osp.join(work_dir, LOCK_NAME)) as f:
            text = f.read()
        try:
            holder = json.loads(text or '{}')
        except ValueError:
            holder = {}
        raise busy_error(work_dir, holder)


def in_use(work_dir: str) -> bool:
    """Whether a live run holds ``work_dir`` (a probe: the lock is taken and dropped at once)."""
    if fcntl is None or not osp.isfile(osp.join(work_dir, LOCK_NAME)):
        return False
    with open(osp.join(work_dir, LOCK_NAME)) as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    return False
