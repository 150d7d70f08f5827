"""Files written whole or not at all: the one atomic write of the package.

A file is written under a temporary name beside its target (same folder, so same file system)
and renamed over the target with :func:`os.replace`, which is atomic there: a reader, a resumed
run or a killed job sees the previous file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Union

PathLike = Union[str, os.PathLike]


def part_path(path: PathLike, unique: bool = False) -> Path:
    """The temporary name of ``path`` while it is written: ``<name>.part`` beside it, or
    ``<name>.<pid>.part`` when several processes (the ranks of a distributed run) may write it."""
    path = Path(path)
    return path.with_name(f'{path.name}.{os.getpid()}.part' if unique else f'{path.name}.part')


@contextmanager
def atomic_path(path: PathLike, unique: bool = False) -> Iterator[Path]:
    """Yields :func:`part_path` of ``path`` (its folder created) to write to; on a clean exit the
    part replaces ``path``; on an exception it is removed and the exception goes on, ``path``
    untouched.

    Example::

        with atomic_path(out / 'features.npy') as tmp, open(tmp, 'wb') as f:
            np.save(f, array)
    """
    path = Path(path)
    tmp = part_path(path, unique)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: PathLike, text: str, unique: bool = False) -> Path:
    """``text`` (UTF-8) to ``path`` through :func:`atomic_path`; returns ``path``."""
    with atomic_path(path, unique) as tmp:
        tmp.write_text(text, encoding='utf-8')
    return Path(path)


def write_json_atomic(path: PathLike, data: Any, unique: bool = False, indent: int = 1) -> Path:
    """``data`` as JSON to ``path`` through :func:`atomic_path`; returns ``path``."""
    return write_text_atomic(path, json.dumps(data, indent=indent), unique)
