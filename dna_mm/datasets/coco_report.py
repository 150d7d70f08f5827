"""Check a COCO instance annotation file against its images (what MMDetection's ``CocoDataset``
and ``CocoMetric`` rely on), and say what is wrong, where.

Checks, each reported with the JSON path (``annotations[12] (id 40)``) and a count:

* structure: ``images``, ``annotations``, ``categories`` are lists; ids unique;
* images: ``file_name``, positive ``width`` / ``height``; the file exists under the image
  directory (and, with ``check_sizes``, is readable and has the recorded size);
* categories: ``id`` and a unique ``name``;
* annotations: ``image_id`` and ``category_id`` exist; ``bbox`` is ``[x, y, w, h]`` with
  ``w, h > 0`` inside the image (1 px tolerance); ``iscrowd`` 0 / 1; ``segmentation`` is a
  list of polygons of ≥ 3 points (an even count ≥ 6 of numbers) inside the image, or, for
  crowds, an RLE ``{size: [h, w], counts}`` of the image's size; ``area`` ≥ 0.

Some of these MMDetection's ``CocoDataset`` cannot load past (a ``KeyError`` deep in its loading)
or passes over without a word (an annotation of an unknown image or category dropped):
:data:`UNLOADABLE`, which :meth:`CocoReport.raise_if_unloadable` turns into one
:class:`~dna_mm.errors.DataError` (:class:`~dna_mm.datasets.coco_dataset.CheckedCocoDataset`
raises it when it loads the file). A pipeline that loads masks (``LoadAnnotations(with_mask=True)``)
stops on more, mid-run, where a box-only one goes through: :data:`UNLOADABLE_MASKS`, and, as it
turns polygons into bitmaps (``poly2mask=True``, its default), :data:`UNLOADABLE_BITMAPS`. The
others (a box partly outside the image, a short polygon, ``[[]]``) MMDetection copes with (it
ignores an instance none of whose polygons has 3 points); ``tools/data/coco/check_annotations.py``
lists them all.
"""

from __future__ import annotations

import json
import os
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import cv2

from ..errors import DataError

#: pixels a box or polygon may extend beyond the image border before it is reported
TOLERANCE = 1.0
#: the problems a file cannot be trained or tested on with (MMDetection fails on them with a bare
#: ``KeyError`` or an assertion, or drops the annotation silently)
UNLOADABLE = (
    'missing or non-list section',
    'image without id',
    'annotation without id',
    'category without id',
    'duplicate image id',
    'duplicate annotation id',
    'duplicate category id',
    'image without file_name',
    'image without positive width / height',
    'category without name',
    'annotation of an unknown image_id',
    'annotation of an unknown category_id',
    'bad bbox (expected [x, y, w, h] numbers)',
    'annotation without area',
    'bad area',
)
#: the problems a pipeline that loads masks (``LoadAnnotations(with_mask=True)``) stops on mid-run,
#: in training or at the first validation: MMDetection keeps no mask of an empty or missing
#: segmentation (``KeyError: 'mask'``), and a polygon that is not a list of numbers is a
#: ``TypeError`` / ``ValueError``. A box-only pipeline loads them.
UNLOADABLE_MASKS = ('annotation without segmentation', 'empty segmentation', 'polygon not a list of numbers')
#: ... and those it stops on when it turns the masks into bitmaps (``poly2mask=True``, its
#: default): a segmentation that is a string or a number (``TypeError``), an RLE of another size
#: than its image (``ValueError`` as the image's masks are stacked). With ``poly2mask=False``
#: MMDetection ignores such an instance.
UNLOADABLE_BITMAPS = ('segmentation neither polygons nor an RLE', 'RLE size differs from the image')


@dataclass
class CocoReport:
    """What :func:`check_coco` found: counts and, per problem kind, the first examples."""

    ann_file: str
    num_images: int = 0
    num_annotations: int = 0
    categories: dict[int, str] = field(default_factory=dict)
    per_category: Counter = field(default_factory=Counter)
    problems: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, kind: str, where: str) -> None:
        self.problems[kind].append(where)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_unloadable(
        self, max_examples: int = 3, with_mask: bool = False, poly2mask: bool = True
    ) -> None:
        """A one-line :class:`DataError` naming the file, each :data:`UNLOADABLE` problem found
        and its first examples; nothing when there is none. ``with_mask`` / ``poly2mask``: those of
        the pipeline's ``LoadAnnotations``, which add :data:`UNLOADABLE_MASKS` and
        :data:`UNLOADABLE_BITMAPS` (a box-only pipeline loads those annotations)."""
        masks = (UNLOADABLE_MASKS + (UNLOADABLE_BITMAPS if poly2mask else ())) if with_mask else ()
        found = [(kind, self.problems[kind]) for kind in UNLOADABLE + masks if self.problems.get(kind)]
        if not found:
            return
        parts = [f'{kind}: {examples(where, max_examples, ", ")}' for kind, where in found]
        if any(kind in masks for kind, _ in found):
            parts[-1] += (
                ' (LoadAnnotations(with_mask=True) in the pipeline stops on such an annotation mid-run, '
                "with KeyError: 'mask' or a TypeError: give it a list of polygons, or remove it)"
            )
        raise DataError(
            f'{self.ann_file}: {"; ".join(parts)} (python tools/data/coco/check_annotations.py '
            f'--ann-file {shlex.quote(str(self.ann_file))} lists every problem)'
        )

    def format(self, max_examples: int = 5) -> str:
        lines = [
            f'{self.ann_file}: {self.num_images} images, {self.num_annotations} annotations, '
            f'{len(self.categories)} categories'
        ]
        if self.categories:
            counts = ', '.join(
                f'{name} {self.per_category.get(cid, 0)}' for cid, name in sorted(self.categories.items())
            )
            lines.append(f'  annotations per category: {counts}')
        for kind, where in sorted(self.problems.items()):
            lines.append(f'  ERROR {kind}: {len(where)}: {examples(where, max_examples)}')
        lines.append('OK' if self.ok else f'{sum(map(len, self.problems.values()))} problem(s)')
        return '\n'.join(lines)


def examples(where: list[str], shown: int, sep: str = '; ') -> str:
    """The first ``shown`` of ``where`` and how many more: ``a; b ... (3 more)``."""
    more = f' ... ({len(where) - shown} more)' if len(where) > shown else ''
    return sep.join(where[:shown]) + more


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + '...'


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v  # not NaN


def _inside(xs: list, ys: list, w: float, h: float) -> bool:
    """Whether the points lie in the ``w x h`` image, up to :data:`TOLERANCE`."""
    return -TOLERANCE <= min(*xs, *ys) and max(xs) <= w + TOLERANCE and max(ys) <= h + TOLERANCE


def _check_segmentation(seg: Any, crowd: bool, w: float, h: float, where: str, report: CocoReport) -> None:
    """Report what is wrong with ``seg``: the kinds MMDetection stops on (:data:`UNLOADABLE_MASKS`,
    :data:`UNLOADABLE_BITMAPS`) apart from those it reads or ignores (an RLE where polygons are
    expected and the reverse, a polygon of under 3 points or an odd count)."""
    if not seg:  # [], null, {}, '': MMDetection keeps no mask for the annotation
        report.add('empty segmentation', f'{where}: {seg!r}')
        return
    if not isinstance(seg, (list, dict)):
        report.add('segmentation neither polygons nor an RLE', f'{where}: {_short(seg)}')
        return
    if isinstance(seg, dict):
        if not crowd:
            report.add('bad segmentation (expected a list of polygons)', where)
        if 'counts' not in seg or 'size' not in seg:
            if crowd:
                report.add('bad crowd segmentation (expected RLE {size, counts})', where)
        elif seg['size'] != [h, w]:
            report.add('RLE size differs from the image', f'{where}: {seg["size"]} vs [{h}, {w}]')
        return
    if crowd:
        report.add('bad crowd segmentation (expected RLE {size, counts})', where)
        return
    for j, poly in enumerate(seg):
        if not isinstance(poly, list) or (
            len(poly) >= 6 and not len(poly) % 2 and not all(isinstance(v, (int, float)) for v in poly)
        ):  # MMDetection keeps such a polygon and fails on it (one it drops is a 'bad polygon')
            report.add('polygon not a list of numbers', f'{where} polygon {j}: {_short(poly)}')
        elif len(poly) < 6 or len(poly) % 2 or not all(_number(v) for v in poly):
            report.add('bad polygon (need an even count >= 6 of numbers)', f'{where} polygon {j}')
        elif not _inside(poly[0::2], poly[1::2], w, h):
            report.add('polygon outside the image', f'{where} polygon {j} (image {w:g}x{h:g})')


def _with_ids(data: dict, section: str, report: CocoReport, seen: set) -> Iterator[tuple[str, dict]]:
    """``(where, entry)`` per entry of ``data[section]`` with an ``id``; reports the others, repeated ids."""
    kind = {'images': 'image', 'annotations': 'annotation', 'categories': 'category'}[section]
    for i, entry in enumerate(data[section]):
        where = f'{section}[{i}] (id {entry.get("id")!r})' if isinstance(entry, dict) else f'{section}[{i}]'
        if not isinstance(entry, dict) or 'id' not in entry:
            report.add(f'{kind} without id', where)
            continue
        if entry['id'] in seen:
            report.add(f'duplicate {kind} id', where)
        seen.add(entry['id'])
        yield where, entry


def check_coco(
    ann_file: str | os.PathLike, image_dir: Optional[str | os.PathLike] = None, check_sizes: bool = False
) -> CocoReport:
    """Check ``ann_file`` (and the images under ``image_dir``, if given); a :class:`DataError`
    naming the file if it is not JSON or not a COCO object."""
    ann_file = Path(ann_file)
    report = CocoReport(str(ann_file))
    try:
        data = json.loads(ann_file.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f'{ann_file}: cannot read COCO JSON: {err}') from err
    if not isinstance(data, dict):
        raise DataError(
            f'{ann_file}: expected a JSON object with images / annotations / '
            f'categories, got {type(data).__name__}'
        )
    for key in ('images', 'annotations', 'categories'):
        if not isinstance(data.get(key), list):
            report.add('missing or non-list section', key)
    if not report.ok:
        return report
    images: dict[Any, dict] = {}
    for where, img in _with_ids(data, 'images', report, set()):
        images[img['id']] = img
        if not isinstance(img.get('file_name'), str) or not img['file_name']:
            report.add('image without file_name', where)
            continue
        if not all(_number(img.get(k)) and img[k] > 0 for k in ('width', 'height')):
            report.add('image without positive width / height', where)
        if image_dir is not None:
            path = Path(image_dir) / img['file_name']
            if not path.is_file():
                report.add('missing image file', f'{path} ({where})')
            elif check_sizes:
                pixels = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
                if pixels is None:
                    report.add('unreadable image file', f'{path} ({where})')
                elif pixels.shape[1::-1] != (img.get('width'), img.get('height')):
                    h, w = pixels.shape[:2]
                    report.add(
                        'image size differs from the JSON',
                        f'{path}: {w}x{h} vs {img.get("width")}x{img.get("height")}',
                    )
    names: set[str] = set()
    for where, cat in _with_ids(data, 'categories', report, set()):
        if not isinstance(cat.get('name'), str):
            report.add('category without name', where)
            continue
        if cat['name'] in names:
            report.add('duplicate category name', f'{where} ({cat["name"]!r})')
        names.add(cat['name'])
        report.categories[cat['id']] = cat['name']
    ann_ids: set[Any] = set()
    for where, ann in _with_ids(data, 'annotations', report, ann_ids):
        img = images.get(ann.get('image_id'))
        if img is None:
            report.add('annotation of an unknown image_id', f'{where}: image_id {ann.get("image_id")!r}')
            continue
        if ann.get('category_id') not in report.categories:
            report.add(
                'annotation of an unknown category_id', f'{where}: category_id {ann.get("category_id")!r}'
            )
        else:
            report.per_category[ann['category_id']] += 1
        w, h = img.get('width', 0), img.get('height', 0)
        box = ann.get('bbox')
        if not (isinstance(box, list) and len(box) == 4 and all(_number(v) for v in box)):
            report.add('bad bbox (expected [x, y, w, h] numbers)', f'{where}: {box!r}')
        elif box[2] <= 0 or box[3] <= 0:
            report.add('empty bbox (w or h <= 0)', f'{where}: {box}')
        elif not _inside([box[0], box[0] + box[2]], [box[1], box[1] + box[3]], w, h):
            report.add('bbox outside the image', f'{where}: {box} (image {w}x{h})')
        crowd = ann.get('iscrowd', 0)
        if crowd not in (0, 1):
            report.add('iscrowd not 0 / 1', f'{where}: {crowd!r}')
        if 'segmentation' in ann:
            _check_segmentation(ann['segmentation'], crowd == 1, w, h, where, report)
        else:
            report.add('annotation without segmentation', where)
        if 'area' not in ann:  # MMDetection reads it for every box inside the image
            report.add('annotation without area', where)
        elif not (_number(ann['area']) and ann['area'] >= 0):
            report.add('bad area', f'{where}: {ann["area"]!r}')
    report.num_images, report.num_annotations = len(images), len(ann_ids)
    return report
