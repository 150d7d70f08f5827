"""A small COCO-format instance-segmentation set: shapes on a textured background.

Each ``size × size`` PNG shows 1 to ``max_objects`` non-overlapping filled shapes of the
classes :data:`COCO_CLASSES` (a rotated square, a disc drawn as a 32-gon, a rotated triangle),
each in a jittered colour of its class, on smooth colour noise, stripes and pixel noise. Each
object is annotated as MMDetection's ``CocoDataset`` reads COCO: ``bbox [x, y, w, h]``, one
polygon ``segmentation`` (the outline drawn), its ``area``, ``iscrowd`` 0.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from .motion_clips import ensure_generated

COCO_CLASSES = ('square', 'disc', 'triangle')
#: base colour (BGR) of each class; each object jitters it
_COLOURS = {'square': (60, 60, 220), 'disc': (60, 200, 60), 'triangle': (220, 120, 40)}
_VERTICES = {'square': 4, 'disc': 32, 'triangle': 3}


@dataclass(frozen=True)
class CocoDatasetSpec:
    """Generation parameters (part of the cache key)."""

    train_images: int = 192
    test_images: int = 48
    size: int = 128
    min_object: int = 24
    max_object: int = 52
    max_objects: int = 3
    colour_jitter: int = 40
    noise_std: float = 10.0
    seed: int = 0
    version: int = 1


def _background(rng: np.random.Generator, s: int, noise_std: float) -> np.ndarray:
    """``[s, s, 3]`` uint8: smooth colour noise + diagonal stripes + pixel noise."""
    coarse = rng.uniform(40, 200, size=(4, 4, 3)).astype(np.float32)
    img = cv2.resize(coarse, (s, s), interpolation=cv2.INTER_CUBIC)
    yy, xx = np.mgrid[0:s, 0:s]
    period, angle = rng.uniform(6, 16), rng.uniform(0, math.pi)
    stripes = 20 * np.sin(2 * math.pi * (xx * math.cos(angle) + yy * math.sin(angle)) / period)
    img = img + stripes[..., None] + rng.normal(0, noise_std, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def _image(rng: np.random.Generator, spec: CocoDatasetSpec) -> tuple[np.ndarray, list[dict]]:
    """One image and its objects ``{category, polygon [V, 2]}``."""
    s = spec.size
    img = _background(rng, s, spec.noise_std)
    objects: list[dict] = []
    boxes: list[tuple[float, float, float, float]] = []
    for _ in range(int(rng.integers(1, spec.max_objects + 1))):
        for _try in range(20):  # place without overlap (2 px apart)
            name = COCO_CLASSES[int(rng.integers(len(COCO_CLASSES)))]
            r = rng.uniform(spec.min_object, spec.max_object) / 2
            cx, cy = rng.uniform(r + 1, s - r - 1, size=2)
            n = _VERTICES[name]  # on the circle of radius r around (cx, cy), from a random angle
            angles = rng.uniform(0, 2 * math.pi) + 2 * math.pi * np.arange(n) / n
            poly = np.stack([cx + r * np.cos(angles), cy + r * np.sin(angles)], axis=1)  # [V, 2] (x, y)
            x0, y0, x1, y1 = box = (*poly.min(axis=0), *poly.max(axis=0))
            if not any(x0 < b[2] + 2 and b[0] < x1 + 2 and y0 < b[3] + 2 and b[1] < y1 + 2 for b in boxes):
                break
        else:
            continue
        jitter = rng.integers(-spec.colour_jitter, spec.colour_jitter + 1, 3)
        colour = tuple(int(c) for c in np.clip(np.array(_COLOURS[name]) + jitter, 0, 255))
        cv2.fillPoly(img, [np.round(poly).astype(np.int32)], colour, lineType=cv2.LINE_8)
        boxes.append(box)
        objects.append(dict(category=name, polygon=poly))
    return img, objects


def _polygon_area(poly: np.ndarray) -> float:
    x, y = poly[:, 0], poly[:, 1]
    return float(0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))


def _write_splits(spec: CocoDatasetSpec, root: Path, rng: np.random.Generator) -> None:
    cat_ids = {name: i + 1 for i, name in enumerate(COCO_CLASSES)}
    categories = [dict(id=i, name=n, supercategory='shape') for n, i in cat_ids.items()]
    for split, count in (('train', spec.train_images), ('test', spec.test_images)):
        image_dir = root / 'images' / split
        image_dir.mkdir(parents=True, exist_ok=True)
        images, annotations = [], []
        for image_id in range(1, count + 1):
            img, objects = _image(rng, spec)
            file_name = f'{image_id:06d}.png'
            if not cv2.imwrite(str(image_dir / file_name), img):
                raise OSError(f'could not write {image_dir / file_name}')
            images.append(dict(id=image_id, file_name=file_name, width=spec.size, height=spec.size))
            for obj in objects:
                poly = np.round(obj['polygon'], 2)
                x0, y0 = poly.min(axis=0)
                x1, y1 = poly.max(axis=0)
                annotations.append(
                    dict(
                        id=len(annotations) + 1,
                        image_id=image_id,
                        category_id=cat_ids[obj['category']],
                        segmentation=[[float(v) for v in poly.reshape(-1)]],
                        area=_polygon_area(poly),
                        bbox=[float(x0), float(y0), float(x1 - x0), float(y1 - y0)],
                        iscrowd=0,
                    )
                )
        ann_file = root / 'annotations' / f'instances_{split}.json'
        ann_file.parent.mkdir(parents=True, exist_ok=True)
        ann_file.write_text(json.dumps(dict(images=images, annotations=annotations, categories=categories)))


def ensure_coco_dataset(root: str | os.PathLike, spec: CocoDatasetSpec = CocoDatasetSpec()) -> Path:
    """Write ``images/{train,test}/*.png`` and ``annotations/instances_{train,test}.json`` under
    ``root`` unless :func:`~.synthetic.ensure_generated` finds them made with ``spec``; returns
    ``root``."""
    return ensure_generated(root, spec, COCO_CLASSES, functools.partial(_write_splits, spec), (__file__,))
