"""Files a tool writes: whole or not at all (the one atomic write of the package), and never
over one of its inputs (:func:`not_an_input`).

A file is written under a temporary name beside its target (same folder, so same file system)
and renamed over the target with :func:`os.replace`, which is atomic there: a reader, a resumed
run or a killed job sees the previous file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Optional, Union

from ..errors import UserError

PathLike = Union[str, os.PathLike]


def part_path(path: PathLike, unique: bool = False) -> Path:
    """The temporary name of ``path`` while it is written: ``<name>.part`` beside it, or
    ``<name>.<pid>.part`` when several processes (the ranks of a distributed run) may write it."""
    path = Path(path)
    return path.with_name(f'{path.name}.{os.getpid()}.part' if unique else f'{path.name}.part')


def _fsync(path: PathLike, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: PathLike, unique: bool = False, durable: bool = False) -> Iterator[Path]:
    """Yields :func:`part_path` of ``path`` (its folder created) to write to; on a clean exit the
    part replaces ``path``; on an exception it is removed and the exception goes on, ``path``
    untouched. ``durable``: the part is synced to the disk before the rename, and the folder
    after it (a checkpoint: the new file survives a power cut, not only a kill).

    Example::

        with atomic_path(out / 'features.npy') as tmp, open(tmp, 'wb') as f:
            np.save(f, array)
    """
    path = Path(path)
    tmp = part_path(path, unique)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield tmp
        if durable:
            _fsync(tmp)
        os.replace(tmp, path)
    finally:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
    if durable:
        with suppress(OSError):  # not every file system syncs a folder
            _fsync(path.parent, os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0))


def write_text_atomic(path: PathLike, text: str, unique: bool = False) -> Path:
    """``text`` (UTF-8) to ``path`` through :func:`atomic_path`; returns ``path``."""
    with atomic_path(path, unique) as tmp:
        tmp.write_text(text, encoding='utf-8')
    return Path(path)


def write_json_atomic(path: PathLike, data: Any, unique: bool = False, indent: int = 1) -> Path:
    """``data`` as JSON to ``path`` through :func:`atomic_path`; returns ``path``."""
    return write_text_atomic(path, json.dumps(data, indent=indent), unique)


def recorded_path(source: str) -> str:
    """``source`` (a tool's input) as a file a run writes records it, for a reader in any folder:
    a file or folder that exists by its absolute path; anything else (a URL, a ``package::``
    config, a ``timm:`` model, a stream) as given."""
    return os.path.abspath(source) if os.path.exists(source) else source


def _same_file(a: str, b: str) -> bool:
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)  # a link or another spelling of the same file too
    return os.path.realpath(a) == os.path.realpath(b)


def not_an_input(output: Optional[str], flag: str, inputs: dict[str, Optional[str]]) -> None:
    """Refuse an ``output`` path (the tool's ``flag``) that names one of its ``inputs``
    (``{what: path}``; ``None`` and URLs are skipped) by any spelling or link: writing it would
    destroy the file the run reads. A :class:`~dna_mm.errors.UserError`, before any work."""
    if output is None:
        return
    for what, source in inputs.items():
        if source is not None and '://' not in str(source) and _same_file(str(output), str(source)):
            raise UserError(
                f'{flag} {output} is the {what} {source}: it would be overwritten; give another path'
            )
