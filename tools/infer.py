#!/usr/bin/env python
"""Classify videos with a trained recognizer and print the top-k classes of each.

    python tools/infer.py CONFIG CHECKPOINT INPUT [--topk 5] [--label-map FILE] [--out preds.csv]
        [--video-root DIR] [--device cpu|cuda:0] [--partial-load] [--cfg-options k=v ...] [--debug]

INPUT is a video file, a folder (its videos, recursively) or a ``.txt`` list (one path per
line; MMAction2's ``path label`` lists work as they are, with ``--video-root`` for the folder
their paths are relative to). Class names come from ``--label-map``
(a file, one name per line, or a shipped map such as ``label_map_k400``), else from the
config's ``label_map`` (the dataset bases set it) if that file exists, else the class indices
are printed (with a note).
CHECKPOINT loads as in ``tools/test.py``: ``weights_only`` from every source, and a checkpoint
that does not match the model is refused unless ``--partial-load``. A video that cannot be
decoded is reported and skipped; the exit status is then 1. A mistake in the input (a missing
file, a label map of the wrong size, a checkpoint that does not match or cannot be read) is one
line and exit status 2; ``--debug`` prints its traceback.

``--out x.csv`` writes one row per video and rank: ``video,rank,class_index,class_name,score``.
"""

from __future__ import annotations

import argparse
import csv
import sys

import torch
from mmengine.config import Config, DictAction

import dna_mm  # noqa: F401  (registers the models, safe checkpoint loading)
from dna_mm.apis.check import check_config
from dna_mm.apis.cli import DEBUG_HELP, cli_main, user_file
from dna_mm.apis.inference import (
    Prediction,
    collect_videos,
    load_recognizer,
    num_classes_of,
    predict,
    resolve_class_names,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='Video classification with a dna_mm recognizer')
    p.add_argument('config', help='config file')
    p.add_argument('checkpoint', help='checkpoint: local file, URL or mmengine prefix')
    p.add_argument('input', help='a video file, a folder of videos or a .txt list of videos')
    p.add_argument(
        '--video-root', help='folder the paths of a .txt list are relative to (default: the list\'s folder)'
    )
    p.add_argument('--topk', type=int, default=5, help='classes shown per video (default 5)')
    p.add_argument(
        '--label-map',
        help='class names: a file (one per line) or a shipped map '
        '(label_map_k400, label_map_ntu60, smarthome_cs_classes, ...)',
    )
    p.add_argument('--out', help='write the predictions to this .csv file')
    p.add_argument('--device', default='cuda:0' if torch.cuda.is_available() else 'cpu')
    p.add_argument(
        '--partial-load',
        action='store_true',
        help='accept a checkpoint that does not match the model (prints what was not '
        'loaded); default: refuse it',
    )
    p.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config settings, key=value')
    p.add_argument('--debug', action='store_true', help=DEBUG_HELP)
    args = p.parse_args(argv)
    if args.topk < 1:
        p.error(f'--topk must be >= 1, got {args.topk}')
    if args.out is not None and not args.out.endswith('.csv'):
        p.error(f'--out must end in .csv, got {args.out}')
    return args


def format_block(pred: Prediction, names: list[str] | None) -> str:
    """One video's block: its path, then one ``score  class`` line per rank."""
    width = len(str(max(pred.indices))) if names is None else 0
    lines = [pred.video]
    for rank, (index, score) in enumerate(zip(pred.indices, pred.scores, strict=True), 1):
        label = names[index] if names is not None else f'class {index:>{width}}'
        lines.append(f'  {rank}. {score:.4f}  {label}')
    return '\n'.join(lines)


def write_csv(path: str, preds: list[Prediction], names: list[str] | None) -> None:
    with open(path, 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['video', 'rank', 'class_index', 'class_name', 'score'])
        for pred in preds:
            for rank, (index, score) in enumerate(zip(pred.indices, pred.scores, strict=True), 1):
                writer.writerow([pred.video, rank, index, names[index] if names else '', f'{score:.6f}'])


@cli_main('infer.py')
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    videos = collect_videos(args.input, args.video_root)
    cfg = Config.fromfile(user_file(args.config, 'config'))
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    check_config(cfg, 'test')
    user_file(args.checkpoint, 'checkpoint')
    model = load_recognizer(cfg, args.checkpoint, args.device, partial=args.partial_load)
    names = resolve_class_names(cfg, num_classes_of(model), args.label_map)
    if names is None:
        print(
            'note: no label map for this config (set --label-map or label_map in the config): '
            'printing class indices',
            flush=True,
        )
    preds, failed = [], []
    for video in videos:
        try:
            pred = predict(model, video, args.topk)
        except Exception as err:  # noqa: BLE001  (decord / pipeline errors: report, go on)
            failed.append(video)
            print(f'{video}\n  cannot be read: {type(err).__name__}: {err}', file=sys.stderr, flush=True)
            continue
        preds.append(pred)
        print(format_block(pred, names), flush=True)
    if args.out is not None:
        write_csv(args.out, preds, names)
        print(f'wrote {len(preds)} videos to {args.out}')
    if failed:
        print(f'{len(failed)} of {len(videos)} videos could not be read', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
