"""A new training run into a work dir that holds an earlier run's checkpoints: the earlier run's
files are moved into a folder of their own there, ``earlier_run_<time of its last file>/``,
before the new run writes any, so that none is overwritten and the work dir holds one run's
checkpoints (``--resume`` continues a run instead of starting one; its log folders stay where
they are: their names are their start times).

The earlier run's files are those at the top of the work dir: its checkpoints (``*.pth``),
``last_checkpoint`` (rewritten to name the moved file) and its config copy (``*.py``). A work
dir without a checkpoint is left as it is. The move is a rename within the work dir.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from .checkpoint_hook import LAST_CHECKPOINT

#: the start of the name of the folder an earlier run's files are moved to
EARLIER_RUN = 'earlier_run_'


def earlier_run_files(work_dir: str) -> list[Path]:
    """The files of an earlier training run at the top of ``work_dir`` (module docstring), ``[]``
    when it holds no checkpoint."""
    root = Path(work_dir)
    if not root.is_dir() or not any(p.is_file() for p in root.glob('*.pth')):
        return []
    last = root / LAST_CHECKPOINT
    files = [p for pattern in ('*.pth', '*.py') for p in root.glob(pattern) if p.is_file()]
    return sorted(files + ([last] if last.is_file() else []))


def set_aside_earlier_run(work_dir: str) -> Optional[tuple[Path, list[str]]]:
    """Move the files of an earlier run in ``work_dir`` (:func:`earlier_run_files`) into
    ``earlier_run_<time>/`` there; ``(that folder, the names moved)``, or ``None`` when there was
    none."""
    files = earlier_run_files(work_dir)
    if not files:
        return None
    stamp = time.strftime('%Y%m%d_%H%M%S', time.localtime(max(p.stat().st_mtime for p in files)))
    folder, n = Path(work_dir) / f'{EARLIER_RUN}{stamp}', 1
    while folder.exists():  # two earlier runs whose last files share a second
        folder, n = Path(work_dir) / f'{EARLIER_RUN}{stamp}_{n}', n + 1
    folder.mkdir()
    for path in files:
        path.rename(folder / path.name)
    last = folder / LAST_CHECKPOINT
    if last.is_file():  # it named the checkpoint where it was
        named = folder / Path(last.read_text().strip()).name
        if named.is_file():
            last.write_text(str(named))
    return folder, [p.name for p in files]
