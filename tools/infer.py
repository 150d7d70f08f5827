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

A labelled list (MMAction2's ``path label`` lines) also prints each video's true class and the
top-1 over the list. ``--out x.csv`` writes one row per video and rank:
``video,rank,class_index,class_name,score``, plus ``true_index,true_name`` for a labelled list.
"""

from __future__ import annotations

import argparse
import csv
import sys


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
    p.add_argument('--device', help='cuda:0, cpu, ... (default: cuda:0 when there is a GPU)')
    p.add_argument(
        '--partial-load',
        action='store_true',
        help='accept a checkpoint that does not match the model (prints what was not '
        'loaded); default: refuse it',
    )
    p.add_argument(
        '--cfg-options', nargs='+', metavar='KEY=VALUE', help='override config settings, key=value'
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if args.topk < 1:
        p.error(f'--topk must be >= 1, got {args.topk}')
    if args.out is not None and not args.out.endswith('.csv'):
        p.error(f'--out must end in .csv, got {args.out}')
    return args


def _name(index: int, names: list[str] | None, width: int = 0) -> str:
    return names[index] if names is not None else f'class {index:>{width}}'


def format_block(pred, names: list[str] | None, label: int | None = None) -> str:
    """One video's block: its path, then one ``score  class`` line per rank, then its true class
    (when the list gave one)."""
    width = len(str(max([*pred.indices, label or 0]))) if names is None else 0
    lines = [pred.video]
    for rank, (index, score) in enumerate(zip(pred.indices, pred.scores, strict=True), 1):
        lines.append(f'  {rank}. {score:.4f}  {_name(index, names, width)}')
    if label is not None:
        mark = 'correct' if pred.indices[0] == label else 'wrong'
        lines.append(f'  true: {_name(label, names, width)} (top-1 {mark})')
    return '\n'.join(lines)


def write_csv(path: str, preds: list, names: list[str] | None, labels: dict[str, int | None]) -> None:
    """One row per video and rank; ``true_index`` / ``true_name`` columns when the input had labels."""
    labelled = any(v is not None for v in labels.values())
    with open(path, 'w', newline='', encoding='utf-8') as f:
        writer = csv.writer(f)
        truth = ['true_index', 'true_name'] if labelled else []
        writer.writerow(['video', 'rank', 'class_index', 'class_name', 'score', *truth])
        for pred in preds:
            label = labels.get(pred.video)
            true = ['' if label is None else label, '' if label is None or not names else names[label]]
            for rank, (index, score) in enumerate(zip(pred.indices, pred.scores, strict=True), 1):
                row = [pred.video, rank, index, names[index] if names else '', f'{score:.6f}']
                writer.writerow(row + (true if labelled else []))


def infer(args: argparse.Namespace) -> int:
    import torch
    from mmengine.config import Config

    from dna_mm.apis.check import check_config
    from dna_mm.apis.cli import user_file
    from dna_mm.apis.inference import (
        collect_labelled_videos,
        load_recognizer,
        num_classes_of,
        predict,
        resolve_class_names,
    )
    from dna_mm.errors import DataError

    labels = collect_labelled_videos(args.input, args.video_root)
    cfg = Config.fromfile(user_file(args.config, 'config'))
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    check_config(cfg, 'test')
    user_file(args.checkpoint, 'checkpoint')
    device = args.device or ('cuda:0' if torch.cuda.is_available() else 'cpu')
    model = load_recognizer(cfg, args.checkpoint, device, partial=args.partial_load)
    num_classes = num_classes_of(model)
    names = resolve_class_names(cfg, num_classes, args.label_map)
    if names is None:
        print(
            'note: no label map for this config (set --label-map or label_map in the config): '
            'printing class indices',
            flush=True,
        )
    wrong = {v: y for v, y in labels.items() if y is not None and not 0 <= y < num_classes}
    if wrong:
        video, label = next(iter(wrong.items()))
        raise DataError(
            f'{args.input}: label {label} of {video} is not a class of the model (0-{num_classes - 1})'
        )
    preds, failed = [], []
    for video in labels:
        try:
            pred = predict(model, video, args.topk)
        except Exception as err:  # noqa: BLE001  (decord / pipeline errors: report, go on)
            failed.append(video)
            print(f'{video}\n  cannot be read: {type(err).__name__}: {err}', file=sys.stderr, flush=True)
            continue
        preds.append(pred)
        print(format_block(pred, names, labels[video]), flush=True)
    scored = [p for p in preds if labels[p.video] is not None]
    if scored:
        right = sum(p.indices[0] == labels[p.video] for p in scored)
        print(
            f'top-1 on the {len(scored)} labelled videos: {100 * right / len(scored):.2f} ({right} correct)'
        )
    if args.out is not None:
        write_csv(args.out, preds, names, labels)
        print(f'wrote {len(preds)} videos to {args.out}')
    if failed:
        print(f'{len(failed)} of {len(labels)} videos could not be read', file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.apis.cli import run_tool

    return run_tool('infer.py', infer, args)


if __name__ == '__main__':
    sys.exit(main())
