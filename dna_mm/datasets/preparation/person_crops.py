"""``tools/data/ntu60/person_crops.py``: NTU RGB+D person-centric crops, as the paper's authors trained on.

Per ``SsssCcccPpppRrrrAaaa_rgb.avi`` under ``--video-dir``: the box of the colour-frame joints
of its ``.skeleton`` (anywhere under ``--skeleton-dir``; :func:`~.skeleton.joint_box`, scaled
from 1920x1080 to the video's size), enlarged by ``--margin``, squared and kept inside the
frame (:func:`~.geometry.square_window`); every frame is cut to it, resized to ``--size``² and
written to ``--out-dir/SsssCcccPpppRrrrAaaa.mp4`` (the name ``ntu60/build_annotations.py``
reads). Without a usable skeleton (missing, empty, no valid joint) the whole frame is resized
(``--missing full``, listed in ``full_frame.txt``) or the sample left out (``--missing skip``,
``left_out.txt``); a malformed skeleton fails the sample, naming file and line. Resume, atomic
rename, verification, exit status: :mod:`.runner`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...apis.cli import cli_main
from ...errors import MissingFileError
from ..protocols import ProtocolError, parse_ntu
from .encoding import crop_and_resize, encode, probe
from .geometry import square_window
from .runner import FAILED, LEFT_OUT, Outcome, describe, parse_args, prepare_all, produce, source_videos
from .skeleton import COLOR_FRAME, SkeletonError, joint_box
from .verification import verify_video

FULL_FRAME = 'full frame'


@dataclass(frozen=True)
class CropJob:
    name: str  # the sample, SsssCcccPpppRrrrAaaa
    video: Path
    skeleton: Path  # may not exist
    dst: Path
    size: int
    margin: float
    missing: str  # 'full' or 'skip'
    keyint: int
    threads: int


def _no_box_reason(path: Path) -> str:
    if not path.is_file():
        return f'no skeleton file {path.name}'
    if not path.read_bytes().strip():
        return f'empty skeleton file {path.name}'
    return f'no valid joint in {path.name}'


def crop_one(job: CropJob) -> Outcome:
    """Write the person-centric crop of one sample (or its full frame), unless a verified one exists."""
    try:
        box = joint_box(job.skeleton)
    except SkeletonError as err:
        return Outcome(job.name, FAILED, f'malformed skeleton: {err}')
    note = why = ''
    if box is None:
        why = _no_box_reason(job.skeleton)
        if job.missing == 'skip':
            return Outcome(job.name, LEFT_OUT, why)
        note = FULL_FRAME
    try:
        info = probe(job.video)
    except Exception as err:
        return Outcome(job.name, FAILED, f'video unreadable: {describe(err)}', note)
    frame = (info.width, info.height)
    if box is None:
        window = (0, 0, *frame)
    else:  # skeleton pixels of 1920x1080 -> the video's
        sx, sy = info.width / COLOR_FRAME[0], info.height / COLOR_FRAME[1]
        window = square_window((box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy), frame, job.margin)
    size = (job.size, job.size)
    return produce(
        job.name,
        job.dst,
        lambda tmp: encode(job.video, tmp, size, crop_and_resize(window, job.size), job.keyint, job.threads),
        lambda path: verify_video(path, size, info.frames),
        note,
        why,
    )


def plan(args: argparse.Namespace, threads: int) -> list[CropJob]:
    """One job per NTU video under ``args.video_dir``; a file name that is not NTU's stops the plan."""
    for flag, folder in (('--video-dir', args.video_dir), ('--skeleton-dir', args.skeleton_dir)):
        if not folder.is_dir():
            raise MissingFileError(f'{flag} {folder} is not a folder')
    skeletons = {p.stem: p for p in args.skeleton_dir.rglob('*.skeleton')}
    jobs: dict[str, CropJob] = {}
    for video in source_videos(args.video_dir, ('.avi', '.mp4'), args.out_dir):
        sample = parse_ntu(str(video.relative_to(args.video_dir)))['sample']
        if sample in jobs:
            raise ProtocolError(f'{video}: sample {sample} also given as {jobs[sample].video}')
        skeleton = skeletons.get(sample, args.skeleton_dir / f'{sample}.skeleton')
        dst = args.out_dir / f'{sample}.mp4'
        jobs[sample] = CropJob(
            sample, video, skeleton, dst, args.size, args.margin, args.missing, args.keyint, threads
        )
    if not jobs:
        raise ProtocolError(f'no NTU videos (SsssCcccPpppRrrrAaaa_rgb.avi) under {args.video_dir}')
    return list(jobs.values())


@cli_main('person_crops.py')
def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(
        description='NTU RGB+D person-centric crops from the skeleton files: square box of all joints '
        '(+ margin), every frame cut to it and resized; resumable, verified with decord.'
    )
    p.add_argument('--video-dir', required=True, type=Path, help='the *_rgb.avi files (searched recursively)')
    p.add_argument(
        '--skeleton-dir', required=True, type=Path, help='the .skeleton files (searched recursively)'
    )
    p.add_argument('--out-dir', required=True, type=Path, help='where SsssCcccPpppRrrrAaaa.mp4 go')
    p.add_argument('--size', type=int, default=224, help='side of the square output (default 224)')
    p.add_argument(
        '--margin', type=float, default=0.1, help='added on each side, fraction of the box (default 0.1)'
    )
    p.add_argument(
        '--missing',
        choices=('full', 'skip'),
        default='full',
        help='sample without a usable skeleton: whole frame resized (full, default) or left out (skip)',
    )
    args = parse_args(p, argv)
    if args.size < 2 or args.size % 2:
        p.error(f'--size must be an even number >= 2, got {args.size}')
    if args.margin < 0:
        p.error(f'--margin must be >= 0, got {args.margin}')
    return prepare_all(
        'person_crops',
        args.out_dir,
        lambda threads: plan(args, threads),
        crop_one,
        args.workers,
        f'NTU videos under {args.video_dir} -> {args.out_dir} ({args.size}x{args.size})',
        [
            (FULL_FRAME, 'full_frame.txt', 'full frame (no usable skeleton)'),
            (LEFT_OUT, 'left_out.txt', 'left out (no usable skeleton, --missing skip)'),
        ],
    )
