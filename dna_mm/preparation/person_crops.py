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

from dataclasses import dataclass
from pathlib import Path

from ..datasets.protocols import ProtocolError, parse_ntu
from ..datasets.video_files import list_videos
from ..errors import MissingFileError
from .encoding import crop_and_resize, encode, probe
from .geometry import square_window
from .runner import FAILED, LEFT_OUT, Echo, Outcome, describe, prepare_all, produce
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


def plan(
    video_dir: Path,
    skeleton_dir: Path,
    out_dir: Path,
    size: int,
    margin: float,
    missing: str,
    keyint: int,
    threads: int,
) -> list[CropJob]:
    """One job per NTU video under ``video_dir``; a file name that is not NTU's stops the plan."""
    for flag, folder in (('--video-dir', video_dir), ('--skeleton-dir', skeleton_dir)):
        if not folder.is_dir():
            raise MissingFileError(f'{flag} {folder} is not a folder')
    skeletons = {p.stem: p for p in skeleton_dir.rglob('*.skeleton')}
    jobs: dict[str, CropJob] = {}
    for video in list_videos(video_dir, ('.avi', '.mp4'), out_dir):
        sample = parse_ntu(str(video.relative_to(video_dir)))['sample']
        if sample in jobs:
            raise ProtocolError(f'{video}: sample {sample} also given as {jobs[sample].video}')
        skeleton = skeletons.get(sample, skeleton_dir / f'{sample}.skeleton')
        dst = out_dir / f'{sample}.mp4'
        jobs[sample] = CropJob(sample, video, skeleton, dst, size, margin, missing, keyint, threads)
    if not jobs:
        raise ProtocolError(f'no NTU videos (SsssCcccPpppRrrrAaaa_rgb.avi) under {video_dir}')
    return list(jobs.values())


def make_person_crops(
    video_dir: Path,
    skeleton_dir: Path,
    out_dir: Path,
    size: int,
    margin: float,
    missing: str,
    keyint: int,
    workers: int,
    echo: Echo,
) -> int:
    """What ``tools/data/ntu60/person_crops.py`` does with its arguments: the crops of every NTU
    video under ``video_dir`` (skeletons under ``skeleton_dir``) written to ``out_dir`` on
    ``workers`` processes; the summary said with ``echo``, the exit status returned
    (:func:`~.runner.prepare_all`)."""
    return prepare_all(
        'person_crops',
        out_dir,
        lambda threads: plan(video_dir, skeleton_dir, out_dir, size, margin, missing, keyint, threads),
        crop_one,
        workers,
        f'NTU videos under {video_dir} -> {out_dir} ({size}x{size})',
        echo,
        [
            (FULL_FRAME, 'full_frame.txt', 'full frame (no usable skeleton)'),
            (LEFT_OUT, 'left_out.txt', 'left out (no usable skeleton, --missing skip)'),
        ],
    )
