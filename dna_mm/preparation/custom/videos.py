"""Check every video once, the way training reads it, and remember the answers.

:func:`check_video` opens a file with dna_mm's reader
(:class:`~dna_mm.datasets.video_reader.KeyframeReader`, what the configs' ``ScaledPyAVInit``
decodes with) and decodes its first and last frame; the answer is a :class:`VideoCheck`: the
problem, or the frame count (what the clip sampling is chosen from). :func:`check_videos` runs
it over many processes with mmengine's progress bar and appends each answer to a JSON-lines
cache as it arrives; a second run (after a kill, or with new videos) checks only the files that
are not in the cache with the same size and modification time (and a frame count).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Iterable, NamedTuple, Optional

from mmengine.utils import track_iter_progress


class VideoCheck(NamedTuple):
    """What :func:`check_video` found: ``problem`` (one line) or ``None``, and the frame count
    and average frame rate of a readable video (``None`` for an unreadable one)."""

    problem: Optional[str]
    frames: Optional[int] = None
    fps: Optional[float] = None


def check_video(path: str) -> VideoCheck:
    """Whether ``path`` opens and its first and last frames decode (else why not, one line), and
    its frame count and average frame rate."""
    from ...datasets.video_reader import KeyframeReader
    from ..runner import describe

    if not os.path.isfile(path):
        return VideoCheck('file not found')
    try:
        reader = KeyframeReader(path, name=path)
        if len(reader) == 0:
            return VideoCheck('no frame')
        reader.get_batch([0, len(reader) - 1])
    except Exception as err:  # FFmpeg, container or index errors: the reason, not the traceback
        return VideoCheck(describe(err))
    return VideoCheck(None, len(reader), reader.get_avg_fps())


def _stamp(path: str) -> Optional[list[int]]:
    """``[size, mtime_ns]`` of ``path``, or ``None`` if it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _job(path: str) -> tuple[str, Optional[list[int]], VideoCheck]:
    return path, _stamp(path), check_video(path)


def load_cache(cache: Path) -> dict[str, tuple[list[int], VideoCheck]]:
    """``path -> (stamp, check)`` from a cache file (lines that do not parse, e.g. the last one of
    a killed run, and readable videos without a frame count, written by an older version, are
    left out: they are checked again)."""
    known: dict[str, tuple[list[int], VideoCheck]] = {}
    if not cache.is_file():
        return known
    for line in cache.read_text(encoding='utf-8').splitlines():
        try:
            entry = json.loads(line)
            check = VideoCheck(entry['problem'], entry.get('frames'), entry.get('fps'))
        except (ValueError, KeyError, TypeError):
            continue
        if check.problem is None and not isinstance(check.frames, int):
            continue
        known[entry['path']] = (entry['stamp'], check)
    return known


def check_videos(paths: Iterable[str], cache: Path, workers: int = 1) -> tuple[dict[str, VideoCheck], int]:
    """``path -> VideoCheck`` for every path, and how many came from ``cache``; new answers are
    appended to ``cache`` as they arrive (progress on stderr)."""
    paths = list(dict.fromkeys(paths))
    known = load_cache(cache)
    results: dict[str, VideoCheck] = {}
    todo = []
    for path in paths:
        entry = known.get(path)
        if entry is not None and entry[0] is not None and entry[0] == _stamp(path):
            results[path] = entry[1]
        else:
            todo.append(path)
    reused = len(results)
    if not todo:
        return results, reused
    cache.parent.mkdir(parents=True, exist_ok=True)
    pool = multiprocessing.Pool(min(workers, len(todo))) if workers > 1 and len(todo) > 1 else None
    answers = pool.imap_unordered(_job, todo) if pool is not None else map(_job, todo)
    try:
        with open(cache, 'a', encoding='utf-8') as f:
            for path, stamp, check in track_iter_progress((answers, len(todo)), file=sys.stderr):
                results[path] = check
                entry = dict(path=path, stamp=stamp, problem=check.problem, frames=check.frames)
                entry['fps'] = check.fps
                f.write(json.dumps(entry, ensure_ascii=False) + '\n')
                f.flush()
    finally:
        if pool is not None:
            pool.terminate()
    return results, reused
