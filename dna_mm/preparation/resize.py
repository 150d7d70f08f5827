"""``tools/data/resize_videos.py``: re-encode a video tree to H.264 with short side N pixels.

Kinetics-400 as the paper's authors prepared it (short side 256); also usable for Smarthome or
NTU. ``OUT_DIR`` keeps the relative layout, each file in the ``--ext`` container (``a/b.webm``
becomes ``a/b.mp4`` by default), at :func:`~.encoding.short_side_size`. Resume, atomic
rename, verification, failure list and exit status: :mod:`.runner`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..datasets.video_files import VIDEO_SUFFIXES, list_videos
from ..errors import ConfigError, DataError, MissingFileError
from .encoding import encode, probe, resize_to, short_side_size
from .runner import FAILED, Echo, Outcome, describe, prepare_all, produce
from .verification import verify_video


@dataclass(frozen=True)
class ResizeJob:
    name: str  # path relative to SRC_DIR, for the reports
    src: Path
    dst: Path
    short_side: int
    keyint: int
    threads: int


def resize_one(job: ResizeJob) -> Outcome:
    """Resize ``job.src`` into ``job.dst`` unless a verified ``job.dst`` is already there."""
    try:
        info = probe(job.src)
    except Exception as err:
        return Outcome(job.name, FAILED, f'source unreadable: {describe(err)}')
    size = short_side_size(info.width, info.height, job.short_side)
    return produce(
        job.name,
        job.dst,
        lambda tmp: encode(job.src, tmp, size, resize_to(*size), job.keyint, job.threads),
        lambda path: verify_video(path, size, info.frames),
    )


def plan(
    src_dir: Path, out_dir: Path, ext: str, short_side: int, keyint: int, threads: int
) -> list[ResizeJob]:
    """Jobs for every video under ``src_dir`` (outside ``out_dir``); refuses two sources with one output."""
    if not src_dir.is_dir():
        raise MissingFileError(f'SRC_DIR {src_dir} is not a folder')
    if src_dir.resolve() == out_dir.resolve():
        raise ConfigError('OUT_DIR must differ from SRC_DIR (the sources would be overwritten)')
    jobs: dict[Path, ResizeJob] = {}
    for src in list_videos(src_dir, skip=out_dir):
        rel = src.relative_to(src_dir)
        dst = out_dir / rel.with_suffix(ext)
        if dst in jobs:
            raise DataError(f'{jobs[dst].name} and {rel} would both be written to {dst}')
        jobs[dst] = ResizeJob(str(rel), src, dst, short_side, keyint, threads)
    if not jobs:
        raise DataError(f'no video files ({" ".join(VIDEO_SUFFIXES)}) under {src_dir}')
    return list(jobs.values())


def resize_videos(
    src_dir: Path, out_dir: Path, short_side: int, ext: str, keyint: int, workers: int, echo: Echo
) -> int:
    """What ``tools/data/resize_videos.py`` does with its arguments: every video under ``src_dir``
    re-encoded into ``out_dir`` (``ext`` container, short side ``short_side``, a keyframe at most
    every ``keyint`` frames) on ``workers`` processes; the summary said with ``echo``, the exit
    status returned (:func:`~.runner.prepare_all`)."""
    return prepare_all(
        'resize_videos',
        out_dir,
        lambda threads: plan(src_dir, out_dir, ext, short_side, keyint, threads),
        resize_one,
        workers,
        f'videos under {src_dir} -> {out_dir} (short side {short_side})',
        echo,
    )
