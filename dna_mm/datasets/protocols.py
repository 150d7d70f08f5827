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
from typing import Callable, Iterable, Optional

from ..errors import DataError
from .video_files import list_videos


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


# ---- Toyota Smarthome --------------------------------------------------------------------
SMARTHOME_RE = re.compile(
    r'(?P<activity>.+)_p(?P<subject>\d{2})_r(?P<rep>\d{2})'
    r'_v(?P<video>\d{2})_c(?P<camera>\d{2})\.mp4'
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
    """``Cook.Cleandishes_p02_r00_v02_c03.mp4`` → activity, subject, rep, video, camera."""
    d = _fields(SMARTHOME_RE, path, 'a Toyota Smarthome file name (expected <Activity>_pNN_rNN_vNN_cNN.mp4)')
    return dict(d, **{k: int(d[k]) for k in ('subject', 'rep', 'video', 'camera')})


def smarthome_splits(paths: Iterable[str], protocol: str) -> SplitResult:
    """Toyota Smarthome CS (31 classes, by subject) or CV1 / CV2 (19 classes, by camera)."""
    protocol = protocol.upper()
    if protocol not in SMARTHOME_SPLITS:
        raise ProtocolError(f'unknown Smarthome protocol {protocol!r}; expected CS, CV1 or CV2')
    all_classes = label_map('smarthome_cs_classes')
    classes = all_classes if protocol == 'CS' else label_map('smarthome_cv_classes')
    index = {name: i for i, name in enumerate(classes)}
    key, rules = SMARTHOME_SPLITS[protocol]
    result = SplitResult({s: [] for s in ('train', 'val', 'test')}, classes)
    for path in sorted(paths):
        meta = parse_smarthome(path)
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
    r'R(?P<replication>\d{3})A(?P<action>\d{3})(?:_rgb)?\.(?:avi|mp4)'
)
#: per protocol: the name field that splits, and its ids in the training split (the others: test)
NTU_TRAIN = {
    'xsub': ('performer', {1, 2, 4, 5, 8, 9, 13, 14, 15, 16, 17, 18, 19, 25, 27, 28, 31, 34, 35, 38}),
    'xview': ('camera', {2, 3}),
}


def parse_ntu(path: str) -> dict:
    """``S001C002P003R002A013_rgb.avi`` (or a re-encoded ``.mp4``) → ids and sample name."""
    what = 'an NTU RGB+D file name (expected SsssCcccPpppRrrrAaaa_rgb.avi or .mp4)'
    d = {k: int(v) for k, v in _fields(NTU_RE, path, what).items()}
    d['sample'] = PurePath(path).name[:20]
    if not 1 <= d['action'] <= 60:
        raise ProtocolError(
            f'{path}: action A{d["action"]:03d} is not one of NTU RGB+D 60\'s 60 actions (an NTU-120 file?)'
        )
    return d


def ntu60_splits(paths: Iterable[str], protocol: str, exclude: Optional[set[str]] = None) -> SplitResult:
    """NTU RGB+D 60 X-Sub (by performer) or X-View (train cameras 2, 3; test camera 1)."""
    protocol = protocol.lower()
    if protocol not in NTU_TRAIN:
        raise ProtocolError(f'unknown NTU60 protocol {protocol!r}; expected xsub or xview')
    key, train_ids = NTU_TRAIN[protocol]
    result = SplitResult({'train': [], 'test': []}, label_map('label_map_ntu60'))
    seen: dict[str, str] = {}
    for path in sorted(paths):
        meta = parse_ntu(path)
        if meta['sample'] in seen:
            raise ProtocolError(f'{path}: sample {meta["sample"]} also given as {seen[meta["sample"]]}')
        seen[meta['sample']] = path
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


def find_videos(video_dir: str, suffixes: tuple[str, ...]) -> list[str]:
    """Video files under ``video_dir`` (recursive), as sorted paths relative to it."""
    root = Path(video_dir)
    if not root.is_dir():
        raise FileNotFoundError(f'video directory {video_dir} does not exist')
    found = sorted(str(p.relative_to(root)) for p in list_videos(root, suffixes))
    if not found:
        raise FileNotFoundError(f'no {"/".join(suffixes)} files under {video_dir}')
    return found


def build_annotations(
    dataset: str,
    video_dir: str,
    out_dir: str,
    protocol: str,
    echo: Callable[[str], object],
    exclude_missing_skeletons: Optional[bool] = None,
) -> int:
    """The annotation builders' work (``dataset``: ``'ntu60'`` or ``'smarthome'``): scan
    ``video_dir``, split by ``protocol``, write the lists to ``out_dir`` and say what was found
    and written with ``echo``; returns the exit status (0). ``exclude_missing_skeletons`` (NTU
    only) drops the samples without skeletons."""
    smarthome = dataset == 'smarthome'
    paths = find_videos(video_dir, ('.mp4',) if smarthome else ('.avi', '.mp4'))
    if smarthome:
        result = smarthome_splits(paths, protocol)
    else:
        missing = label_map('ntu60_samples_with_missing_skeletons')
        result = ntu60_splits(paths, protocol, set(missing) if exclude_missing_skeletons else None)
    files = write_lists(result, out_dir)
    echo(f'{dataset} {protocol}: {len(paths)} videos found in {video_dir}')
    echo(result.summary())
    echo('wrote ' + ', '.join(files))
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
    """Check an MMAction2 ``path label`` list: files on disk, labels in ``[0, num_classes)``."""
    report = ListReport()
    with open(ann_file) as f:
        for lineno, line in enumerate(f, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 2:
                report.malformed.append((lineno, line.rstrip('\n')))
                continue
            report.entries += 1
            path, label = fields
            if not (label.isdigit() and int(label) < num_classes):
                report.bad_labels.append((lineno, label))
            if not osp.isfile(osp.join(video_dir, path)):
                report.missing.append(path)
    return report
