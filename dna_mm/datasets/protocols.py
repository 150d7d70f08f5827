"""Split rules of Toyota Smarthome and NTU RGB+D 60 (their published protocols), as pure
functions of file names (paths relative to the video directory), the lists they write
(:func:`build_annotations`, behind ``tools/data/{smarthome,ntu60}/build_annotations.py``), and a
check of MMAction2 lists.
"""

from __future__ import annotations

import os.path as osp
import re
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePath
from typing import Callable, Iterable, Iterator, Optional

from ..errors import DataError
from .robust_samples import list_label, read_list_lines
from .video_dataset import split_list_line
from .video_files import VIDEO_SUFFIXES, list_videos


def label_map(name: str) -> list[str]:
    """Class names of a shipped label map (``smarthome_cs_classes``, ``label_map_ntu60``, ...)."""
    text = resources.files(__package__).joinpath('label_maps', f'{name}.txt').read_text()
    return [line.strip() for line in text.splitlines() if line.strip()]


def read_label_map(source: str) -> list[str]:
    """Class names from a text file (one per line, blank lines skipped; MMAction2's
    ``label_map_k400.txt`` layout) or the name of a label map shipped with dna_mm
    (``label_map_k400``, ``label_map_ntu60``, ``smarthome_cs_classes``, ``smarthome_cv_classes``)."""
    if osp.isfile(source):
        text = Path(source).read_text(encoding='utf-8')
        return [ln.strip() for ln in text.splitlines() if ln.strip()]
    try:
        return label_map(source)
    except FileNotFoundError:
        raise FileNotFoundError(
            f'label map {source}: neither a file nor a label map shipped with dna_mm'
        ) from None


class ProtocolError(DataError):
    """A file name or annotation that does not fit the protocol."""


@dataclass
class SplitResult:
    """Annotation entries per split, plus what was left out and why."""

    splits: dict[str, list[tuple[str, int]]]
    classes: list[str]
    dropped: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        lines = []
        for split, items in self.splits.items():
            present = {label for _, label in items}
            missing = [name for i, name in enumerate(self.classes) if i not in present]
            lines.append(
                f'{split:5s}: {len(items):6d} videos, {len(present)}/{len(self.classes)} '
                f'classes' + (f' (missing: {", ".join(missing)})' if missing else '')
            )
        for reason, n in sorted(self.dropped.items()):
            lines.append(f'left out: {n} videos ({reason})')
        return '\n'.join(lines)


#: a video file's suffix, in any case (``.mp4``, ``.MP4``, a re-encoded ``.mkv``: :data:`VIDEO_SUFFIXES`)
_VIDEO_SUFFIX = r'\.(?i:' + '|'.join(re.escape(s[1:]) for s in VIDEO_SUFFIXES) + ')'


def _one_path_each(paths: Iterable[str], parse: Callable[[str], dict]) -> Iterator[tuple[str, dict]]:
    """``(path, parse(path))`` for each of ``paths``, sorted; a sample (``parse(path)['sample']``)
    given by two paths is a :class:`ProtocolError` naming both: a re-encoded copy in a sub-folder of
    the video folder, ``videos/`` and ``videos_256/`` side by side under it, one clip as ``.avi``
    and ``.mp4``. Listed twice, a clip would be trained on, or scored, twice."""
    seen: dict[str, str] = {}
    for path in sorted(paths):
        meta = parse(path)
        sample = meta['sample']
        if sample in seen:
            raise ProtocolError(
                f'{path}: sample {sample} also given as {seen[sample]} (two copies of one video: give a '
                'video folder that holds one copy of each)'
            )
        seen[sample] = path
        yield path, meta


# ---- Toyota Smarthome --------------------------------------------------------------------
SMARTHOME_RE = re.compile(
    r'(?P<activity>.+)_p(?P<subject>\d{2})_r(?P<rep>\d{2})'
    r'_v(?P<video>\d{2})_c(?P<camera>\d{2})' + _VIDEO_SUFFIX
)
SMARTHOME_STRAY = 'Pour.Fromcup'
#: per protocol: the name field that splits, and its ids per split (any other id is left out)
SMARTHOME_SPLITS = {
    'CS': (
        'subject',
        {'train': {3, 4, 6, 7, 9, 12, 13, 15, 17}, 'val': {19, 25}, 'test': {2, 10, 11, 14, 16, 18, 20}},
    ),
    'CV1': ('camera', {'train': {1}, 'val': {5}, 'test': {2}}),
    'CV2': ('camera', {'train': {1, 3, 4, 6, 7}, 'val': {5}, 'test': {2}}),
}


def _fields(pattern: re.Pattern, path: str, what: str) -> dict[str, str]:
    """The named groups of ``pattern`` in the file name of ``path``; else a :class:`ProtocolError`."""
    m = pattern.fullmatch(PurePath(path).name)
    if not m:
        raise ProtocolError(f'{path}: not {what}')
    return m.groupdict()


def parse_smarthome(path: str) -> dict:
    """``Cook.Cleandishes_p02_r00_v02_c03.mp4`` (any video suffix, any case: a re-encoded copy)
    → activity, subject, rep, video, camera and sample (the name without its suffix)."""
    what = 'a Toyota Smarthome file name (expected <Activity>_pNN_rNN_vNN_cNN.mp4, or another video suffix)'
    d = _fields(SMARTHOME_RE, path, what)
    sample = PurePath(path).name.rsplit('.', 1)[0]
    return dict(d, sample=sample, **{k: int(d[k]) for k in ('subject', 'rep', 'video', 'camera')})


def smarthome_splits(paths: Iterable[str], protocol: str) -> SplitResult:
    """Toyota Smarthome CS (31 classes, by subject) or CV1 / CV2 (19 classes, by camera). A clip
    given twice (two copies under the video folder) is a :class:`ProtocolError` naming both."""
    protocol = protocol.upper()
    if protocol not in SMARTHOME_SPLITS:
        raise ProtocolError(f'unknown Smarthome protocol {protocol!r}; expected CS, CV1 or CV2')
    all_classes = label_map('smarthome_cs_classes')
    classes = all_classes if protocol == 'CS' else label_map('smarthome_cv_classes')
    index = {name: i for i, name in enumerate(classes)}
    key, rules = SMARTHOME_SPLITS[protocol]
    result = SplitResult({s: [] for s in ('train', 'val', 'test')}, classes)
    for path, meta in _one_path_each(paths, parse_smarthome):
        activity = meta['activity']
        if activity == SMARTHOME_STRAY:
            result.dropped[f'{SMARTHOME_STRAY} is not one of the classes'] += 1
            continue
        if activity not in all_classes:
            raise ProtocolError(f'{path}: unknown Smarthome activity {activity!r}')
        if activity not in index:
            result.dropped[f'activity outside the {len(classes)} {protocol} classes'] += 1
            continue
        split = next((s for s, ids in rules.items() if meta[key] in ids), None)
        if split is None:
            result.dropped[f'{key} not in any {protocol} split'] += 1
            continue
        result.splits[split].append((path, index[activity]))
    return result


# ---- NTU RGB+D 60 ------------------------------------------------------------------------
NTU_RE = re.compile(
    r'S(?P<setup>\d{3})C(?P<camera>\d{3})P(?P<performer>\d{3})'
    r'R(?P<replication>\d{3})A(?P<action>\d{3})(?:_rgb)?' + _VIDEO_SUFFIX
)
#: per protocol: the name field that splits, and its ids in the training split (the others: test)
NTU_TRAIN = {
    'xsub': ('performer', {1, 2, 4, 5, 8, 9, 13, 14, 15, 16, 17, 18, 19, 25, 27, 28, 31, 34, 35, 38}),
    'xview': ('camera', {2, 3}),
}


def parse_ntu(path: str) -> dict:
    """``S001C002P003R002A013_rgb.avi`` (or a re-encoded ``.mp4``; any video suffix, any case) → ids
    and sample name."""
    what = 'an NTU RGB+D file name (expected SsssCcccPpppRrrrAaaa_rgb.avi, .mp4 or another video suffix)'
    d = {k: int(v) for k, v in _fields(NTU_RE, path, what).items()}
    d['sample'] = PurePath(path).name[:20]
    if not 1 <= d['action'] <= 60:
        raise ProtocolError(
            f'{path}: action A{d["action"]:03d} is not one of NTU RGB+D 60\'s 60 actions (an NTU-120 file?)'
        )
    return d


def ntu60_splits(paths: Iterable[str], protocol: str, exclude: Optional[set[str]] = None) -> SplitResult:
    """NTU RGB+D 60 X-Sub (by performer) or X-View (train cameras 2, 3; test camera 1). A sample
    given twice (``_rgb.avi`` and a crop's ``.mp4``) is a :class:`ProtocolError` naming both."""
    protocol = protocol.lower()
    if protocol not in NTU_TRAIN:
        raise ProtocolError(f'unknown NTU60 protocol {protocol!r}; expected xsub or xview')
    key, train_ids = NTU_TRAIN[protocol]
    result = SplitResult({'train': [], 'test': []}, label_map('label_map_ntu60'))
    for path, meta in _one_path_each(paths, parse_ntu):
        if exclude and meta['sample'] in exclude:
            result.dropped['listed in ntu60_samples_with_missing_skeletons'] += 1
            continue
        result.splits['train' if meta[key] in train_ids else 'test'].append((path, meta['action'] - 1))
    return result


def write_lists(result: SplitResult, out_dir: str) -> list[str]:
    """``<out_dir>/<split>.txt`` with ``path label`` lines and ``classes.txt``; returns the lists."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for split, items in result.splits.items():
        f = out / f'{split}.txt'
        f.write_text(''.join(f'{p} {label}\n' for p, label in items))
        written.append(str(f))
    (out / 'classes.txt').write_text('\n'.join(result.classes) + '\n')
    return written


def find_videos(video_dir: str, suffixes: tuple[str, ...] = VIDEO_SUFFIXES) -> list[str]:
    """Video files under ``video_dir`` (recursive; ``suffixes`` in any case), as sorted paths
    relative to it."""
    root = Path(video_dir)
    if not root.is_dir():
        raise FileNotFoundError(f'video directory {video_dir} does not exist')
    found = sorted(str(p.relative_to(root)) for p in list_videos(root, suffixes))
    if not found:
        raise FileNotFoundError(f'no video files ({" ".join(suffixes)}) under {video_dir}')
    return found


def _kinds(paths: list[str]) -> str:
    """``' (.mp4: 2, .mkv: 1)'``: how many of ``paths`` have each suffix (lower case; the most
    first), when they have more than one; else ``''``."""
    kinds = sorted(Counter(PurePath(p).suffix.lower() for p in paths).items(), key=lambda kn: (-kn[1], kn[0]))
    return f' ({", ".join(f"{k}: {n}" for k, n in kinds)})' if len(kinds) > 1 else ''


def build_annotations(
    dataset: str,
    video_dir: str,
    out_dir: str,
    protocol: str,
    echo: Callable[[str], object],
    exclude_missing_skeletons: Optional[bool] = None,
    make_out_dir: Optional[Callable[[str], object]] = None,
) -> int:
    """The annotation builders' work (``dataset``: ``'ntu60'`` or ``'smarthome'``): scan
    ``video_dir`` (every video suffix, any case: a re-encoded copy is taken; the found line
    counts each suffix when they mix), split by ``protocol``, write the lists to ``out_dir`` and
    say what was found and written with ``echo`` (a warning for each split left empty); returns
    the exit status (0). A folder with no video of any split is a :class:`ProtocolError`, and
    nothing is written.
    ``exclude_missing_skeletons`` (NTU only) drops the samples without skeletons. ``make_out_dir``
    makes ``out_dir`` once the split is made, before anything is written (a tool's
    ``output_folder``, which names its flag when the path cannot be a folder); by default
    ``mkdir -p``."""
    paths = find_videos(video_dir)
    if dataset == 'smarthome':
        result = smarthome_splits(paths, protocol)
    else:
        missing = label_map('ntu60_samples_with_missing_skeletons')
        result = ntu60_splits(paths, protocol, set(missing) if exclude_missing_skeletons else None)
    videos = f'{len(paths)} video{"s" if len(paths) != 1 else ""}'
    found = f'{dataset} {protocol}: {videos} found in {video_dir}{_kinds(paths)}'
    if not any(result.splits.values()):
        dropped = sorted(result.dropped.items())
        why = '; '.join(f'{n} video{"s" if n != 1 else ""}: {reason}' for reason, n in dropped)
        raise ProtocolError(f'{found}, none of them in a {protocol} split ({why}): nothing written')
    if make_out_dir is not None:
        make_out_dir(out_dir)
    files = write_lists(result, out_dir)
    echo(found)
    echo(result.summary())
    echo('wrote ' + ', '.join(files))
    empty = [split for split, items in result.splits.items() if not items]
    if empty:
        echo(
            f'warning: {" and ".join(empty)} {"is" if len(empty) == 1 else "are"} empty (no video of '
            f'{"its" if len(empty) == 1 else "their"} {protocol} split in {video_dir}): training and '
            'testing refuse an empty list'
        )
    return 0


@dataclass
class ListReport:
    """What :func:`check_video_list` found in an annotation list."""

    entries: int = 0
    missing: list[str] = field(default_factory=list)
    bad_labels: list[tuple[int, str]] = field(default_factory=list)  # (line, text)
    malformed: list[tuple[int, str]] = field(default_factory=list)  # (line, text)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.bad_labels or self.malformed)


def check_video_list(ann_file: str, video_dir: str, num_classes: int) -> ListReport:
    """Check an MMAction2 ``path label`` list: files on disk, labels in ``[0, num_classes)``. Each
    line is read as training reads it (:func:`~.video_dataset.split_list_line`: a path may hold
    blanks, the label is the last field); a line of a path alone is malformed, and its path is
    checked on disk too. A line that is not UTF-8 is a :class:`~dna_mm.errors.DataError`, as in
    training."""
    report = ListReport()
    for lineno, line in read_list_lines(ann_file):
        try:
            path, labels = split_list_line(line)
        except ValueError:
            report.malformed.append((lineno, line))
            continue
        if not osp.isfile(osp.join(video_dir, path)):
            report.missing.append(path)
        if not labels:
            report.malformed.append((lineno, line))
            continue
        report.entries += 1
        try:
            list_label(labels[0], num_classes)
        except ValueError:
            report.bad_labels.append((lineno, labels[0]))
    return report
