"""``tools/data/resize_videos.py``: re-encode a video tree to H.264 with short side N pixels.

Kinetics-400 as the paper's authors prepared it (short side 256); also usable for Smarthome or
NTU. ``OUT_DIR`` keeps the relative layout, each file in the ``--ext`` container (``a/b.webm``
becomes ``a/b.mp4`` by default), at :func:`~.encoding.short_side_size`. Resume, atomic
rename, verification, failure list and exit status: :mod:`.runner`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...apis.cli import cli_main
from ...errors import ConfigError, DataError, MissingFileError
from ..video_reader import VIDEO_SUFFIXES
from .encoding import encode, probe, resize_to, short_side_size
from .runner import FAILED, Outcome, describe, parse_args, prepare_all, produce, source_videos
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
    for src in source_videos(src_dir, VIDEO_SUFFIXES, out_dir):
        rel = src.relative_to(src_dir)
        dst = out_dir / rel.with_suffix(ext)
        if dst in jobs:
            raise DataError(f'{jobs[dst].name} and {rel} would both be written to {dst}')
        jobs[dst] = ResizeJob(str(rel), src, dst, short_side, keyint, threads)
    if not jobs:
        raise DataError(f'no video files ({" ".join(VIDEO_SUFFIXES)}) under {src_dir}')
    return list(jobs.values())


@cli_main('resize_videos.py')
def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(
        description='Re-encode a video tree (H.264) so that the short side is --short-side pixels; '
        'resumable, verified with decord, failures in OUT_DIR/failed.txt.'
    )
    p.add_argument('src_dir', metavar='SRC_DIR', type=Path)
    p.add_argument('out_dir', metavar='OUT_DIR', type=Path)
    p.add_argument('--short-side', type=int, default=256, help='short side of the output (default 256)')
    p.add_argument('--ext', default='.mp4', choices=('.mp4', '.mkv'), help='output container (default .mp4)')
    args = parse_args(p, argv)
    if args.short_side < 2 or args.short_side % 2:
        p.error(f'--short-side must be an even number >= 2, got {args.short_side}')
    return prepare_all(
        'resize_videos',
        args.out_dir,
        lambda threads: plan(args.src_dir, args.out_dir, args.ext, args.short_side, args.keyint, threads),
        resize_one,
        args.workers,
        f'videos under {args.src_dir} -> {args.out_dir} (short side {args.short_side})',
    )
