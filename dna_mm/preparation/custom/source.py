"""A user's videos as classes and samples: a folder of class folders, or a ``path,label`` list;
and the stratified split (:func:`stratified_split`).

Folder layouts (video files and hidden names as :mod:`dna_mm.datasets.video_files` tells them;
hidden class or split folders are skipped too)::

    SRC/<class>/**/<video>                one set: split by the tool
    SRC/{train,val,test}/<class>/**/...   split already (any of the three folders)

List files: one ``path,label`` per line (``.csv`` read as CSV, so quoted paths may hold
commas; other files take the text after the last comma, or after the last blank when there is
no comma), an optional third field ``train`` / ``val`` / ``test``, an optional header line
``path,label``. Labels are class names, or class indices ``0 .. K-1`` (classes then named by
their index). Relative paths are relative to the list's folder.
"""

from __future__ import annotations

import csv
import io
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ...datasets.video_files import VIDEO_SUFFIXES, hidden, is_video, list_videos
from ...errors import DataError

SPLITS = ('train', 'val', 'test')


@dataclass(frozen=True)
class Sample:
    """One video: its path (relative to :attr:`Source.root`, or absolute), its class index and
    the split it was given in (``None``: to be split)."""

    path: str
    label: int
    split: Optional[str] = None


@dataclass
class Source:
    """The classes (index = position) and the samples found in ``root``; ``notes`` are what
    was left out and why."""

    root: Path
    classes: list[str]
    samples: list[Sample]
    notes: list[str] = field(default_factory=list)

    @property
    def presplit(self) -> bool:
        return any(s.split is not None for s in self.samples)


def _visible_dirs(folder: Path, skip: Optional[Path]) -> list[Path]:
    return sorted(d for d in folder.iterdir() if d.is_dir() and not hidden(d.name) and d.resolve() != skip)


def read_folder(root: Path, skip: Optional[Path] = None) -> Source:
    """``root/<class>/...`` or ``root/<split>/<class>/...`` (see the module docstring); ``skip``
    (the output folder, if inside) is left out. A class folder without videos is a
    :class:`~dna_mm.errors.DataError` naming it."""
    skip = skip.resolve() if skip is not None else None
    top = _visible_dirs(root, skip)
    split_dirs = [d for d in top if d.name in SPLITS]
    groups = [(d.name, d) for d in split_dirs] if split_dirs else [(None, root)]
    notes = []
    if split_dirs and len(split_dirs) != len(top):
        others = ', '.join(d.name for d in top if d.name not in SPLITS)
        notes.append(f'{root}: split folders {", ".join(d.name for d in split_dirs)}; left out: {others}')
    found: dict[str, list[tuple[str, Optional[str]]]] = {}
    for split, folder in groups:
        for class_dir in _visible_dirs(folder, skip):
            videos = list_videos(class_dir, skip=skip)
            if not videos:
                raise DataError(
                    f'class folder {class_dir} holds no video ({" ".join(VIDEO_SUFFIXES)}): add videos '
                    f'or remove the folder'
                )
            found.setdefault(class_dir.name, []).extend((str(p.relative_to(root)), split) for p in videos)
        loose = [p.name for p in folder.iterdir() if is_video(p)]
        if loose:
            notes.append(f'{len(loose)} video(s) directly in {folder}, outside a class folder: left out')
    if not found:
        raise DataError(f'{root}: no class folders (expected {root}/<class>/<video>)')
    classes = sorted(found)
    samples = [Sample(path, i, split) for i, name in enumerate(classes) for path, split in found[name]]
    return Source(root, classes, samples, notes)


def _rows(path: Path) -> list[tuple[int, list[str]]]:
    """``(line number, fields)`` of a list file (see the module docstring)."""
    try:
        text = path.read_text(encoding='utf-8-sig')
    except UnicodeDecodeError as err:
        raise DataError(
            f'{path}: not UTF-8 text ({err.reason} at byte {err.start}); save it as UTF-8'
        ) from None
    rows = []
    if path.suffix.lower() == '.csv':
        for lineno, fields in enumerate(csv.reader(io.StringIO(text)), start=1):
            rows.append((lineno, [f.strip() for f in fields]))
        return [(n, f) for n, f in rows if any(f)]
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        if ',' in line:
            head, _, last = line.rpartition(',')
            fields = [head, last]
            if last.strip() in SPLITS and ',' in head:  # path,label,split
                path_part, _, label = head.rpartition(',')
                fields = [path_part, label, last]
        else:
            head, _, last = line.rpartition(' ')
            fields = [head, last] if head else [line]
        rows.append((lineno, [f.strip() for f in fields]))
    return rows


def read_list(path: Path) -> Source:
    """A ``path,label[,split]`` list (see the module docstring); a malformed line, a mix of
    index and name labels, or an index without videos is a :class:`~dna_mm.errors.DataError`
    naming the line or the class."""
    rows = _rows(path)
    if rows and len(rows[0][1]) >= 2 and rows[0][1][1].lower() in ('label', 'class'):
        rows = rows[1:]  # a header
    if not rows:
        raise DataError(f'{path}: no "path,label" line')
    entries = []
    for lineno, fields in rows:
        if len(fields) not in (2, 3) or not fields[0] or not fields[1]:
            raise DataError(f'{path}:{lineno}: expected "path,label" (or "path,label,split"), got {fields}')
        split = fields[2] if len(fields) == 3 else None
        if split is not None and split not in SPLITS:
            raise DataError(f'{path}:{lineno}: split {split!r} is not one of {", ".join(SPLITS)}')
        entries.append((lineno, fields[0], fields[1], split))
    numeric = [e[2].isdigit() for e in entries]
    if all(numeric):
        count = max(int(e[2]) for e in entries) + 1
        classes = [str(i) for i in range(count)]
        labels = [int(e[2]) for e in entries]
        empty = sorted(set(range(count)) - set(labels))
        if empty:
            raise DataError(
                f'{path}: class index {empty[0]} has no video (indices must run 0 .. {count - 1}'
                f'{f"; also empty: {empty[1:6]}" if len(empty) > 1 else ""})'
            )
    elif any(numeric):
        lineno = entries[numeric.index(True)][0]
        raise DataError(f'{path}:{lineno}: an index label among class names: use names or indices, not both')
    else:
        classes = sorted({e[2] for e in entries})
        index = {name: i for i, name in enumerate(classes)}
        labels = [index[e[2]] for e in entries]
    samples = [Sample(e[1], label, e[3]) for e, label in zip(entries, labels, strict=True)]
    return Source(path.parent, classes, samples)


def read_source(src: str, skip: Optional[str] = None) -> Source:
    """:func:`read_folder` for a folder, :func:`read_list` for a file; else a
    ``FileNotFoundError`` naming ``src``."""
    path = Path(src)
    if path.is_dir():
        return read_folder(path, Path(skip) if skip else None)
    if path.is_file():
        return read_list(path)
    raise FileNotFoundError(f'{src} does not exist (expected a folder of class folders or a path,label list)')


def stratified_split(
    samples: list[Sample],
    val_ratio: float,
    test_ratio: float,
    seed: int = 0,
    classes: Optional[list[str]] = None,
) -> tuple[dict[str, list[Sample]], list[str]]:
    """Samples per split. Given splits are kept; the samples without one (all of them for a
    single set) are split per class, shuffled by ``random.Random(seed)`` in path order::

        n_test = round(n · test_ratio),  n_val = round(n · val_ratio),  n_train = the rest

    raised to 1 for a requested split while at least one training video remains. A split that
    was given (e.g. ``SRC/val``) is not drawn from the rest. A requested split that was not
    given while ``train`` was (``SRC/train`` and ``SRC/test``, no ``SRC/val``) is drawn from the
    given training videos, with a note. Returns the splits and notes on what was drawn and on
    classes (named by ``classes``) too small for every split."""
    rng = random.Random(seed)
    out: dict[str, list[Sample]] = {s: [] for s in SPLITS}
    for s in samples:
        if s.split is not None:
            out[s.split].append(s)
    given = {s for s in SPLITS if out[s]}
    ratios = {'test': 0.0 if 'test' in given else test_ratio, 'val': 0.0 if 'val' in given else val_ratio}
    notes = []
    pool = [s for s in samples if s.split is None]
    drawn = [split for split in ('val', 'test') if ratios[split] > 0]
    if 'train' in given and drawn:  # split folders without this one: drawn from the training videos
        pool += out['train']
        out['train'] = []
        shares = ', '.join(f'{100 * ratios[x]:g} %' for x in drawn)
        flags = '/'.join(f'--{x}-ratio' for x in drawn)
        notes.append(
            f'no {" or ".join(drawn)} folder: {" and ".join(drawn)} drawn from the train folder '
            f'({shares} of each class, {flags})'
        )
    by_class: dict[int, list[Sample]] = {}
    for s in sorted(pool, key=lambda s: s.path):
        by_class.setdefault(s.label, []).append(s)
    for label in sorted(by_class):
        items = by_class[label]
        rng.shuffle(items)
        n, taken = len(items), 0
        for split in ('test', 'val'):
            if ratios[split] <= 0:
                continue
            k = max(1, round(n * ratios[split]))
            k = min(k, n - taken - 1)  # keep one for training
            if k <= 0:
                name = classes[label] if classes else label
                notes.append(f'class {name!r}: {n} video(s), none left for {split}')
                continue
            out[split].extend(items[taken : taken + k])
            taken += k
        out['train'].extend(items[taken:])
    return {s: sorted(v, key=lambda s: (s.label, s.path)) for s, v in out.items() if v}, notes
