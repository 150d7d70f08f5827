"""ImageNet-1K as people have it, as MMPretrain's ``ImageNet`` dataset reads it.

Layouts under ``ROOT`` (the configs' ``data_root``, ``data/imagenet``)::

    train/<wnid>/*.JPEG                      the official training set (ILSVRC2012_img_train)
    val/<wnid>/*.JPEG                        validation sorted into class folders, or
    val/ILSVRC2012_val_*.JPEG                the official flat validation set, labelled by the
                                             devkit (ILSVRC2012_devkit_t12: data/meta.mat and
                                             data/ILSVRC2012_validation_ground_truth.txt)
    meta/{train,val}.txt                     MMPretrain's lists: ``relative/path.JPEG label``

A class's index is its WordNet id's rank in sorted order (MMPretrain's, timm's, torchvision's).
MMPretrain reads ``meta/<split>.txt`` when it exists and scans the class folders otherwise;
:func:`write_lists` writes the lists for a flat validation set (from the devkit) and for any
split, so that every layout reads the same way. :func:`unreadable_images` decodes each image
as the training pipeline will (PIL, fully) and names those that fail.
"""

from __future__ import annotations

import multiprocessing
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterable, Optional

from ..errors import DataError

#: what MMPretrain's ImageNet takes for an image (its IMG_EXTENSIONS), any case
IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.ppm', '.bmp', '.pgm', '.tif')
#: the devkit's files, relative to its folder
DEVKIT_META = 'data/meta.mat'
DEVKIT_VAL_LABELS = 'data/ILSVRC2012_validation_ground_truth.txt'


@dataclass
class Split:
    """One split: ``(path relative to ROOT, label)`` per image, and how it was read."""

    name: str
    samples: list[tuple[str, int]]
    source: str  # 'folders', 'devkit' or the list file's path
    per_class: list[int] = field(default_factory=list)


def images_in(folder: Path) -> list[Path]:
    """The images directly in ``folder`` (by suffix, any case), sorted."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def class_ids(root: Path) -> list[str]:
    """The WordNet ids of ``ROOT/train``'s class folders, sorted (their index is the label)."""
    train = root / 'train'
    if not train.is_dir():
        raise DataError(f'{root}: no train/ folder (expected train/<wnid>/*.JPEG, docs/datasets/imagenet.md)')
    wnids = sorted(p.name for p in train.iterdir() if p.is_dir() and not p.name.startswith('.'))
    if not wnids:
        raise DataError(f'{train}: no class folder (expected train/<wnid>/*.JPEG)')
    return wnids


def from_folders(root: Path, split: str, wnids: list[str]) -> Split:
    """``ROOT/<split>/<wnid>/*`` labelled by ``wnids``; a folder that is not a class is an error."""
    folder = root / split
    found = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith('.'))
    unknown = sorted(set(found) - set(wnids))
    if unknown:
        raise DataError(f'{folder}: class folders not in train/: {", ".join(unknown[:5])}')
    samples = [
        (f'{split}/{w}/{p.name}', i)
        for i, w in enumerate(wnids)
        for p in images_in(folder / w)
        if (folder / w).is_dir()
    ]
    return _counted(Split(split, samples, 'folders'), len(wnids))


def from_devkit(root: Path, devkit: Path, wnids: list[str]) -> Split:
    """The flat ``ROOT/val/ILSVRC2012_val_%08d.JPEG`` labelled by the devkit: line ``i`` of the
    ground truth is the ILSVRC2012 id of image ``i`` (1-based), ``meta.mat``'s ``synsets`` map
    that id to a WordNet id."""
    from scipy.io import loadmat

    meta, truth = devkit / DEVKIT_META, devkit / DEVKIT_VAL_LABELS
    for path in (meta, truth):
        if not path.is_file():
            raise DataError(f'devkit {devkit}: {path.relative_to(devkit)} not found (ILSVRC2012_devkit_t12)')
    synsets = loadmat(str(meta), squeeze_me=True)['synsets']
    wnid_of = {int(s['ILSVRC2012_ID']): str(s['WNID']) for s in synsets}
    index = {w: i for i, w in enumerate(wnids)}
    samples = []
    lines = truth.read_text().split()
    for n, text in enumerate(lines, 1):
        wnid = wnid_of.get(int(text))
        if wnid not in index:
            raise DataError(f'{truth}:{n}: ILSVRC2012 id {text} is {wnid!r}, not a class of train/')
        samples.append((f'val/ILSVRC2012_val_{n:08d}.JPEG', index[wnid]))
    missing = [p for p, _ in samples if not (root / p).is_file()]
    if missing:
        raise DataError(
            f'{root}: {len(missing)} of the {len(samples)} devkit images are not in val/, e.g. {missing[0]}'
        )
    return _counted(Split('val', samples, 'devkit'), len(wnids))


def from_list(root: Path, split: str, num_classes: int) -> Split:
    """MMPretrain's ``ROOT/meta/<split>.txt`` (``path label``, paths relative to ``ROOT/<split>``)."""
    path = root / 'meta' / f'{split}.txt'
    samples = []
    for n, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
        if not line.strip():
            continue
        name, _, label = line.rpartition(' ')
        if not name or not label.lstrip('-').isdigit() or not 0 <= int(label) < num_classes:
            raise DataError(
                f'{path}:{n}: expected "path label" with a label in 0-{num_classes - 1}, got {line!r}'
            )
        samples.append((f'{split}/{name}', int(label)))
    return _counted(Split(split, samples, str(path)), num_classes)


def _counted(split: Split, num_classes: int) -> Split:
    split.per_class = [0] * num_classes
    for _, label in split.samples:
        split.per_class[label] += 1
    return split


def read_split(root: Path, split: str, wnids: list[str], devkit: Optional[Path] = None) -> Split:
    """``split`` as MMPretrain will read it: ``meta/<split>.txt`` if present, else class folders,
    else (validation) the devkit's labels for a flat folder."""
    if (root / 'meta' / f'{split}.txt').is_file():
        return from_list(root, split, len(wnids))
    folder = root / split
    if not folder.is_dir():
        raise DataError(f'{root}: no {split}/ folder and no meta/{split}.txt')
    if any(p.is_dir() for p in folder.iterdir()):
        return from_folders(root, split, wnids)
    if devkit is None:
        raise DataError(
            f'{folder}: flat images without labels: give --devkit ILSVRC2012_devkit_t12 (its '
            f'{DEVKIT_META} and {DEVKIT_VAL_LABELS}), or sort them into <wnid>/ folders'
        )
    return from_devkit(root, devkit, wnids)


def write_lists(root: Path, splits: Iterable[Split], skip: Collection[str] = ()) -> list[Path]:
    """``ROOT/meta/<split>.txt`` for each split read from folders or the devkit (MMPretrain's
    format, paths relative to ``ROOT/<split>``), without the images in ``skip`` (paths relative
    to ``ROOT``: the unreadable ones); lists read from ``meta/`` are left as they are."""
    written = []
    for split in splits:
        if split.source not in ('folders', 'devkit'):
            continue
        path = root / 'meta' / f'{split.name}.txt'
        path.parent.mkdir(parents=True, exist_ok=True)
        prefix = f'{split.name}/'
        text = ''.join(f'{p[len(prefix) :]} {label}\n' for p, label in split.samples if p not in skip)
        path.write_text(text, encoding='utf-8')  # a run cut short is simply run again
        written.append(path)
    return written


def check_image(path: str) -> Optional[str]:
    """``None`` if the image decodes whole (PIL, as MMPretrain's loading reads it), else why not."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.load()
    except Exception as err:  # a truncated, empty or foreign file: the reason, one line
        return f'{type(err).__name__}: {err}'.replace('\n', ' ')
    return None


def unreadable_images(paths: list[str], workers: int = 1) -> dict[str, str]:
    """``path -> reason`` for each of ``paths`` that does not decode (progress on stderr)."""
    from mmengine.utils import track_iter_progress

    pool = multiprocessing.Pool(workers) if workers > 1 and len(paths) > 1 else None
    answers = pool.imap(check_image, paths, chunksize=64) if pool is not None else map(check_image, paths)
    try:
        problems = {
            p: why
            for p, why in zip(paths, track_iter_progress((answers, len(paths)), file=sys.stderr), strict=True)
            if why is not None
        }
    finally:
        if pool is not None:
            pool.terminate()
    return problems
