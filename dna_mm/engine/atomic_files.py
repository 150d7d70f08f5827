"""Files written whole or not at all: checkpoints and ``last_checkpoint``.

mmengine 0.10.7 writes a checkpoint with ``open(path, 'wb')`` straight to its final name, and
``last_checkpoint`` after it: a kill or a full disk during the write leaves a truncated file
under the final name (and a ``--resume`` that fails on it). Here a file is written as

    path + '.part'  ->  fsync  ->  os.replace(path + '.part', path)  ->  fsync(folder)

``os.replace`` is one ``rename(2)``, atomic on a POSIX file system: a reader sees the old file or
the new one, never part of one. A write that fails removes its ``.part`` file and raises
:class:`CheckpointWriteError` (an ``OSError``, and a :class:`~dna_mm.errors.UserError`: dna_mm's
tools print it as one line), naming the file and the cause; the final name keeps what it had.
A ``.part`` file left by a killed run is never read (no checkpoint search matches the
suffix); :func:`remove_partial_files` clears them once the work dir is held again.
"""

from __future__ import annotations

import errno
import os
import os.path as osp
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from ..errors import UserError

PARTIAL_SUFFIX = '.part'


class CheckpointWriteError(UserError, OSError):
    """A checkpoint (or ``last_checkpoint``) could not be written; the final name was not
    touched."""


def describe_os_error(err: OSError) -> str:
    """``'[Errno 27] File too large'`` as ``'File too large (EFBIG)'``."""
    name = errno.errorcode.get(err.errno, '') if err.errno is not None else ''
    reason = err.strerror or str(err)
    return f'{reason} ({name})' if name else reason


def _fsync(path: str, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yield the temporary name to write ``path`` under; when the block ends without an error,
    the file is synced and renamed to ``path``. On an error the temporary file is removed and
    the error passes on (``path`` is as it was)."""
    part = path + PARTIAL_SUFFIX
    try:
        yield part
        _fsync(part)
        os.replace(part, path)
    except BaseException:
        with suppress(OSError):
            os.remove(part)
        raise
    with suppress(OSError):  # the rename itself durable (not every file system syncs a folder)
        _fsync(osp.dirname(osp.abspath(path)) or '.', os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0))


def write_text_atomically(path: str, text: str) -> None:
    """``text`` to ``path``, whole or not at all; a failure is a :class:`CheckpointWriteError`
    naming ``path``."""
    try:
        with atomic_path(path) as part, open(part, 'w') as f:
            f.write(text)
    except OSError as err:
        raise CheckpointWriteError(f'could not write {path}: {describe_os_error(err)}') from err


def remove_partial_files(folder: str) -> list[str]:
    """Remove the partial checkpoints (``*.pth.part``, ``last_checkpoint.part``) in ``folder``,
    left by a run killed while writing; the names removed."""
    removed = []
    with suppress(OSError):
        for name in sorted(os.listdir(folder)):
            partial = name.endswith('.pth' + PARTIAL_SUFFIX) or name == 'last_checkpoint' + PARTIAL_SUFFIX
            if partial and osp.isfile(osp.join(folder, name)):
                with suppress(OSError):
                    os.remove(osp.join(folder, name))
                    removed.append(name)
    return removed
