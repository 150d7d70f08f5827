#!/usr/bin/env python
"""Chefer relevance maps of one image or video, per attention branch (red: positive, blue: negative).

    python tools/analysis/relevance_maps.py CONFIG CHECKPOINT --input IMAGE_OR_VIDEO --out DIR
        [--target CLASS] [--label NAME] [--cfg-options k=v ...]

CONFIG is an MMAction2 recognizer config (``--input`` a video, read by the config's test
pipeline; one row of overlays per branch, one column per frame) or ``timm:<model>`` (``--input``
an image; ``--cfg-options`` are ``create_model`` arguments). The gradients are those of the
class ``--target`` (default: the prediction). Writes ``DIR/<input name>_relevance.png``,
``.json`` (class, score, branches) and ``.npz`` (the normalised maps ``[T, H, W]`` per branch).
The rule, and how it runs through divided space-time attention: ``dna_mm/analysis/relevance.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import sys

import numpy as np
from mmengine.config import DictAction

from dna_mm.analysis.models import load_model
from dna_mm.analysis.plots import plot_relevance
from dna_mm.analysis.relevance import relevance_maps
from dna_mm.utils import CheckpointMismatchError, UnsafeCheckpointError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('config', help='MMAction2 recognizer config, or timm:<model name>')
    p.add_argument('checkpoint', help='whole-model checkpoint')
    p.add_argument('--input', required=True, help='video (config) or image (timm:)')
    p.add_argument('--out', required=True, help='output directory')
    p.add_argument('--target', type=int, default=None, help='class to explain (default: predicted)')
    p.add_argument('--label', default=None, help='model name in the figure title')
    p.add_argument('--cfg-options', nargs='+', action=DictAction, default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    try:
        am = load_model(args.config, args.checkpoint, args.cfg_options)
        inputs = am.load_input(args.input)
        rel = relevance_maps(am, inputs, args.target)
    except (CheckpointMismatchError, UnsafeCheckpointError, FileNotFoundError, ValueError) as err:
        sys.exit(f'relevance_maps.py: {err}')
    os.makedirs(args.out, exist_ok=True)
    stem = osp.join(args.out, osp.splitext(osp.basename(args.input))[0] + '_relevance')
    pixels = am.raw_pixels(inputs)[0]
    frames = (
        pixels[0].permute(1, 2, 3, 0)
        if pixels.dim() == 5  # [clips, C, T, H, W] -> [T, H, W, C]
        else pixels.permute(1, 2, 0)[None]
    )  # [C, H, W] -> [1, H, W, C]
    title = (
        f"{args.label or am.name}: class {rel.target} (p = {rel.probability:.2f}) — "
        f"{osp.basename(args.input)}"
    )
    png = plot_relevance(frames.numpy(), {k: v.numpy() for k, v in rel.maps.items()}, stem + '.png', title)
    np.savez_compressed(stem + '.npz', **{k: v.numpy() for k, v in rel.maps.items()})
    summary = dict(
        input=args.input,
        config=args.config,
        checkpoint=args.checkpoint,
        target=rel.target,
        score=rel.score,
        probability=rel.probability,
        branches=list(rel.maps),
        shape=list(next(iter(rel.maps.values())).shape),
        png=png,
        npz=stem + '.npz',
    )
    with open(stem + '.json', 'w') as f:
        json.dump(summary, f, indent=1)
    print(f'class {rel.target} (p = {rel.probability:.3f}); branches {", ".join(rel.maps)}')
    print(f'wrote {png}, {stem}.json, {stem}.npz')
    return summary


if __name__ == '__main__':
    main()
