"""Which files in a folder are videos: one suffix list and one hidden-file rule for every tool
and dataset builder that takes a folder (``tools/infer.py``, ``tools/extract_features.py``,
custom datasets, the annotation builders, ``tools/data/resize_videos.py``,
``tools/data/ntu60/person_crops.py``).

A file is a video when its suffix, in any case, is one of the suffixes asked for (default
:data:`VIDEO_SUFFIXES`) and it is not hidden: a name that starts with ``.`` (macOS's ``._clip.mp4``
resource forks, an editor's or a sync tool's files) is left out, and so is everything in a
folder whose name starts with ``.``. Folders are searched recursively, without following links
to folders.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

#: the suffixes (case-insensitive) of the files taken as videos in a folder
VIDEO_SUFFIXES = (
    *('.mp4', '.m4v', '.mov', '.3gp', '.mkv', '.webm', '.avi', '.flv'),
    *('.mpg', '.mpeg', '.ts', '.mts', '.m2ts'),
)


def hidden(name: str) -> bool:
    """Whether a file or folder called ``name`` is hidden (left out of every listing)."""
    return name.startswith('.')


def is_video(path: Path, suffixes: Iterable[str] = VIDEO_SUFFIXES) -> bool:
    """``path`` is a file, not hidden, with one of ``suffixes`` (any case)."""
    return path.suffix.lower() in suffixes and not hidden(path.name) and path.is_file()


def list_videos(
    root: Path, suffixes: Iterable[str] = VIDEO_SUFFIXES, skip: Optional[Path] = None
) -> list[Path]:
    """The videos (:func:`is_video`) under ``root``, recursively, sorted, leaving out hidden
    folders and what lies under ``skip`` (an output folder inside the source tree)."""
    suffixes = tuple(suffixes)
    skip = skip.resolve() if skip is not None else None
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not hidden(d)]
        found += [p for p in (Path(folder, f) for f in files) if is_video(p, suffixes)]
    return sorted(p for p in found if skip is None or skip not in p.resolve().parents)
