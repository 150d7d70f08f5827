"""Files written whole or not at all: checkpoints and ``last_checkpoint``.

mmengine 0.10.7 writes a checkpoint with ``open(path, 'wb')`` straight to its final name, and
``last_checkpoint`` after it: a kill or a full disk during the write leaves a truncated file
under the final name (and a ``--resume`` that fails on it). Here a file is written as

    path + '.part'  ->  fsync  ->  os.replace(path + '.part', path)  ->  fsync(folder)

``os.replace`` is one ``rename(2)``, atomic on a POSIX file system: a reader sees the old file or
the new one, never part of one (:func:`dna_mm.utils.files.atomic_path` with ``durable=True``, the
package's one atomic write). A write that fails removes its ``.part`` file and raises
:class:`CheckpointWriteError` (an ``OSError``, and a :class:`~dna_mm.errors.UserError`: dna_mm's
tools print it as one line), naming the file and the cause; the final name keeps what it had.
A ``.part`` file left by a killed run is never read (no checkpoint search matches the
suffix); :func:`remove_partial_files` clears them once the work dir is held again.
"""

from __future__ import annotations

import errno
import os
import os.path as osp
from contextlib import suppress

from ..errors import UserError
from ..utils.files import atomic_path

PARTIAL_SUFFIX = '.part'


class CheckpointWriteError(UserError, OSError):
    """A checkpoint (or ``last_checkpoint``) could not be written; the final name was not
    touched."""


def describe_os_error(err: OSError) -> str:
    """``'[Errno 27] File too large'`` as ``'File too large (EFBIG)'``."""
    name = errno.errorcode.get(err.errno, '') if err.errno is not None else ''
    reason = err.strerror or str(err)
    return f'{reason} ({name})' if name else reason


def write_text_atomically(path: str, text: str) -> None:
    """``text`` to ``path``, whole or not at all; a failure is a :class:`CheckpointWriteError`
    naming ``path``."""
    try:
        with atomic_path(path, durable=True) as part, open(part, 'w') as f:
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
