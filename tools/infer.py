#!/usr/bin/env python
"""Classify videos with a trained recognizer and print the top-k classes of each, or follow one
video over time.

    python tools/infer.py CONFIG CHECKPOINT INPUT [--topk 5] [--label-map FILE] [--out preds.csv]
        [--video-root DIR] [--device cpu|cuda:0] [--partial-load] [--cfg-options k=v ...] [--debug]
    python tools/infer.py CONFIG CHECKPOINT VIDEO --over-time [--stride SECONDS] [--batch-size 8]
        [--smooth 5] [--min-segment SECONDS] [--threshold P] [--out timeline.json|.csv]
        [--out-video annotated.mp4] [--relevance both|pos|neg] [--stream-timeout 10]
    python tools/infer.py CONFIG CHECKPOINT - --over-time < stream.ts     # or udp://..., /dev/video0

INPUT is a video file, a folder (its videos, recursively) or a ``.txt`` list (one path per
line; MMAction2's ``path label`` lists work as they are, with ``--video-root`` for the folder
their paths are relative to) or a ``.csv`` list (``path,label`` as the dataset builder reads).
Class names come from ``--label-map`` (a file, one name per line, or a shipped map such as
``label_map_k400``), else from the config's ``label_map`` (the dataset bases set it) if that
file exists and names the model's classes (a model built with another ``num_classes`` does not
use it), else the class indices are printed (with one note saying why). Videos are read by the config's
``test_dataloader.dataset.pipeline`` (the one ``tools/test.py`` runs; a ``--cfg-options``
override of the top-level ``test_pipeline`` is honoured too).
CHECKPOINT loads as in ``tools/test.py``: ``weights_only`` from every source, and a checkpoint
that does not match the model is refused unless ``--partial-load``. A video that cannot be
decoded is reported and skipped; the exit status is then 1. A mistake in the input (a missing
file, a label map of the wrong size, a checkpoint that does not match or cannot be read) is one
line and exit status 2; ``--debug`` prints its traceback.

A video longer than four of the pipeline's clips gets a note that one clip classified it.
A labelled list (MMAction2's ``path label`` lines) also prints each video's true class and the
top-1 over the list; for a multi-label model (``cls_head.multi_class``) its lines are
``path label [label ...]``, its scores are each class's own probability (the sigmoid of the
head's mean logit, as its ``BCELossWithLogits`` trained it: they need not sum to 1), and a top-1
among the video's classes counts as correct. ``--out
x.csv`` writes one row per video and rank: ``video,rank,class_index,class_name,score``, plus
``true_index,true_name`` for a labelled list (a multi-label video's classes joined by ``;``).

``--over-time`` (one video) slides the model's clip over the whole video: a window is the span
the config's ``SampleFrames`` samples one clip from (``clip_len x frame_interval`` frames; its
length in seconds at the video's rate), one every ``--stride`` seconds (default half a
window), ``--batch-size`` windows a forward pass. Each window's top-k is printed as it is
scored; then the segments (runs of one class after averaging the scores over ``--smooth``
windows; a segment shorter than ``--min-segment`` seconds joins a neighbour; a multi-label
model's: each class's runs at or above ``--threshold``, default 0.5, which may overlap, a
shorter run dropped; a single-label model's with ``--threshold``: its best class's runs where it
reaches it, the rest left out) and the speed as a real-time factor. The video is decoded in
sequence, holding only the frames of the windows that overlap: memory does not grow with its
length. ``--out x.json`` (or ``.csv``) writes every window (start, end, top-k) and the segments
(dna_mm/over_time/timeline_files.py).
With ``--over-time`` the input may be a stream: ``-`` (a container such as MPEG-TS on standard
input), a URL FFmpeg reads (``udp://``, ``rtsp://``, ``http://``) or a camera (``/dev/video0``):
each window is printed as it completes, with its latency; the run stops cleanly at the stream's
end (or after ``--stream-timeout`` seconds without data) or on Ctrl-C, then prints the segments
(status 0). A file stopped by Ctrl-C keeps its timeline so far (``--out``, marked as stopped; no
annotated video; status 130); a file whose frames end before the length its header states is
scored to where they end, and said (status 1). Damaged data in a file is passed over, as FFmpeg
passes over it: the frames from it to the next key frame are left out, the gap is printed in
its place and written (``--out``; the segments stop at it, the annotated video's strip shows it),
the frames after it are scored (status 1); damage that no key frame follows ends the timeline
where it starts, said (status 1). A video that cannot be read at all is one line and status 1,
as without ``--over-time``. An output naming an input is refused.
``--out-video y.mp4`` (implies ``--over-time``; ``.mp4 .m4v .mov .mkv``) writes the video at its
own size (a frame under 240 lines enlarged by a whole factor, so that the overlay reads), rate
and length with the current top-k and a strip of the segments on every frame,
its audio kept; ``--relevance`` overlays where the model looks in each window (the relevance maps
of tools/analysis/relevance_maps.py: for DnA the positive branch in orange and the negative in
blue, side by side with ``both``). docs/inference.md shows the output.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

if TYPE_CHECKING:
    import torch.nn as nn

    from dna_mm.over_time.video_timeline import TimelineOptions

#: ``dna_mm.over_time.relevance_overlay.BRANCHES`` (a test keeps them equal)
RELEVANCE = ('both', 'pos', 'neg')
#: the suffixes ``--out-video`` takes (``dna_mm.over_time.annotated_video.CONTAINERS``; a test keeps
#: them equal)
VIDEO_OUT = ('.mp4', '.m4v', '.mov', '.mkv')


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='Video classification with a dna_mm recognizer')
    p.add_argument('config', help='config file')
    p.add_argument('checkpoint', help='checkpoint: local file, URL or mmengine prefix')
    p.add_argument(
        'input',
        help='a video file, a folder of videos or a .txt / .csv list of videos; with --over-time also a '
        'stream: - (standard input), a URL (udp://, rtsp://, http://) or a camera (/dev/video0)',
    )
    p.add_argument(
        '--video-root', help='folder the paths of a .txt list are relative to (default: the list\'s folder)'
    )
    p.add_argument('--topk', type=int, default=5, help='classes shown per video (default 5)')
    p.add_argument(
        '--label-map',
        help='class names: a file (one per line) or a shipped map '
        '(label_map_k400, label_map_ntu60, smarthome_cs_classes, ...)',
    )
    p.add_argument('--out', help='write the predictions to this .csv file (with --over-time: .json or .csv)')
    t = p.add_argument_group('over time (one video)')
    t.add_argument('--over-time', action='store_true', help='slide the model over the whole video')
    t.add_argument('--stride', type=float, help='seconds between windows (default: half a window)')
    t.add_argument('--batch-size', type=int, default=8, help='windows a forward pass (default 8)')
    t.add_argument(
        '--smooth', type=int, default=5, help='windows averaged before the segments (odd, default 5)'
    )
    t.add_argument(
        '--min-segment',
        type=float,
        default=0.0,
        help='seconds: a shorter segment joins its neighbour (default 0: none; with a threshold, '
        "a multi-label model's always: it is dropped)",
    )
    t.add_argument(
        '--threshold',
        type=float,
        help="segments only where a class's probability reaches this: a multi-label model's, each "
        "class's runs (default 0.5); a single-label model's, its best class's (default: none, the "
        'segments tile the video)',
    )
    t.add_argument('--out-video', help='write the annotated video (.mp4 .m4v .mov .mkv); implies --over-time')
    t.add_argument(
        '--stream-timeout',
        type=float,
        default=10.0,
        help='a stream input ends after this many seconds without data (default 10)',
    )
    t.add_argument(
        '--relevance',
        choices=RELEVANCE,
        help='with --out-video: overlay where the model looks (relevance maps; DnA: both branches '
        'side by side, or the positive / negative one)',
    )
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
    args.over_time = args.over_time or args.out_video is not None
    suffixes = ('.json', '.csv') if args.over_time else ('.csv',)
    if args.out is not None and not args.out.lower().endswith(suffixes):
        p.error(f'--out must end in {" or ".join(suffixes)}, got {args.out}')
    if args.out_video is not None and not args.out_video.lower().endswith(VIDEO_OUT):
        p.error(f'--out-video must end in {" ".join(VIDEO_OUT)}, got {args.out_video}')
    if args.stride is not None and not 0 < args.stride < float('inf'):
        p.error(f'--stride must be a positive number of seconds, got {args.stride}')
    if args.relevance is not None and args.out_video is None:
        p.error('--relevance draws on the annotated video: give --out-video too')
    if not 0 < args.stream_timeout < float('inf'):
        p.error(f'--stream-timeout must be a positive number of seconds, got {args.stream_timeout}')
    if args.batch_size < 1:
        p.error(f'--batch-size must be >= 1, got {args.batch_size}')
    if args.smooth < 1 or args.smooth % 2 == 0:
        p.error(f'--smooth must be an odd number of windows >= 1, got {args.smooth}')
    if not args.min_segment >= 0:
        p.error(f'--min-segment must be >= 0 seconds, got {args.min_segment}')
    if args.threshold is not None and not 0 < args.threshold < 1:
        p.error(f'--threshold must be a probability between 0 and 1, got {args.threshold}')
    return args


def _name(index: int, names: list[str] | None, width: int = 0) -> str:
    return names[index] if names is not None else f'class {index:>{width}}'


def _classes(label: int | tuple[int, ...] | None) -> tuple[int, ...]:
    """A video's true classes: its label, or a multi-label video's labels (none: no label)."""
    return () if label is None else label if isinstance(label, tuple) else (label,)


def top1_right(pred, label: int | tuple[int, ...] | None) -> bool:
    """Whether ``pred``'s top-1 is the video's class (one of them, for a multi-label video)."""
    return pred.indices[0] in _classes(label)


def format_block(pred, names: list[str] | None, label: int | tuple[int, ...] | None = None) -> str:
    """One video's block: its path, then one ``score  class`` line per rank, then its true class
    (when the list gave one; a multi-label list's classes, the top-1 right when it is one of them)."""
    truth = _classes(label)
    width = len(str(max([*pred.indices, *truth]))) if names is None else 0
    lines = [pred.video]
    for rank, (index, score) in enumerate(zip(pred.indices, pred.scores, strict=True), 1):
        lines.append(f'  {rank}. {score:.4f}  {_name(index, names, width)}')
    if truth:
        mark = 'correct' if top1_right(pred, label) else 'wrong'
        lines.append(f'  true: {", ".join(_name(c, names, width) for c in truth)} (top-1 {mark})')
    return '\n'.join(lines)


def write_csv(
    path: str, preds: list, names: list[str] | None, labels: dict[str, int | tuple[int, ...] | None]
) -> None:
    """One row per video and rank; ``true_index`` / ``true_name`` columns when the input had labels
    (a multi-label video's classes joined by ``;``)."""
    labelled = any(v is not None for v in labels.values())
    with open(path, 'w', newline='', encoding='utf-8') as f:
        writer = csv.writer(f)
        truth = ['true_index', 'true_name'] if labelled else []
        writer.writerow(['video', 'rank', 'class_index', 'class_name', 'score', *truth])
        for pred in preds:
            classes = _classes(labels.get(pred.video))
            true = [';'.join(map(str, classes)), ';'.join(names[c] for c in classes) if names else '']
            for rank, (index, score) in enumerate(zip(pred.indices, pred.scores, strict=True), 1):
                row = [pred.video, rank, index, names[index] if names else '', f'{score:.6f}']
                writer.writerow(row + (true if labelled else []))


def infer(args: argparse.Namespace) -> int:
    import torch

    from dna_mm.apis.inference import (
        LONG,
        UnreadableVideo,
        check_recognizer_config,
        class_names,
        clip_coverage,
        collect_labelled_videos,
        load_recognizer,
        num_classes_of,
        predict,
        test_pipeline_of,
        why_unreadable,
    )
    from dna_mm.config.build import read_config
    from dna_mm.config.check import check_config
    from dna_mm.errors import DataError
    from dna_mm.over_time.frame_stream import is_live
    from dna_mm.tools.cli import not_an_input, user_file

    live = args.over_time and is_live(args.input)
    inputs = dict(
        input=args.input, config=args.config, checkpoint=args.checkpoint, **{'label map': args.label_map}
    )
    for flag in ('--out', '--out-video'):
        not_an_input(getattr(args, flag[2:].replace('-', '_')), flag, inputs)
    if live and args.out_video:
        raise DataError(f'--out-video reads the video twice: give a file, not the stream {args.input}')
    cfg = read_config(args.config, args.cfg_options)
    check_recognizer_config(cfg)
    multi_class = bool(cfg.model.cls_head.get('multi_class', False))  # a list's lines: several labels
    labels = {args.input: None} if live else collect_labelled_videos(args.input, args.video_root, multi_class)
    one = len(labels) == 1 and next(iter(labels.values())) is None and not Path(args.input).is_dir()
    if args.over_time and not one:
        what = 'a folder' if Path(args.input).is_dir() else f'a list of {len(labels)} videos'
        raise DataError(f'--over-time takes one video file or stream, got {args.input} ({what})')
    check_config(cfg, 'test')
    pipeline = test_pipeline_of(cfg, args.cfg_options)
    user_file(args.checkpoint, 'checkpoint')
    device = args.device or ('cuda:0' if torch.cuda.is_available() else 'cpu')
    model = load_recognizer(cfg, args.checkpoint, device, partial=args.partial_load)
    num_classes = num_classes_of(model)
    names, why = class_names(cfg, num_classes, args.label_map)
    if names is None:
        if why is None:
            why = 'no label map for this config (set --label-map or label_map in the config)'
        else:
            why = f'no label map used: {why} (set --label-map to a map of {num_classes} class names)'
        print(f'note: {why}: printing class indices', flush=True)
    wrong = {v: c for v, y in labels.items() for c in _classes(y) if not 0 <= c < num_classes}
    if wrong:
        video, label = next(iter(wrong.items()))
        raise DataError(
            f'{args.input}: label {label} of {video} is not a class of the model (0-{num_classes - 1})'
        )
    if args.over_time:
        from dna_mm.over_time.video_timeline import TimelineOptions

        options = TimelineOptions(
            stride=args.stride,
            batch_size=args.batch_size,
            topk=args.topk,
            smooth=args.smooth,
            min_segment=args.min_segment,
            threshold=args.threshold,
            out=args.out,
            out_video=args.out_video,
            timeout=args.stream_timeout,
        )
        relevance = None
        if args.relevance is not None:
            from dna_mm.over_time.relevance_overlay import BRANCHES, relevance_for

            relevance = relevance_for(BRANCHES[args.relevance], model)
        return over_time(args, model, pipeline, next(iter(labels)), options, names, relevance)

    preds, failed = [], []
    for video in labels:
        try:
            pred = predict(model, video, args.topk, pipeline)
        except UnreadableVideo as err:  # decord / pipeline errors: report, go on
            failed.append(video)
            reason = why_unreadable(video, err.__cause__)
            print(f'{video}\n  cannot be read: {reason}', file=sys.stderr, flush=True)
            continue
        preds.append(pred)
        print(format_block(pred, names, labels[video]), flush=True)
        coverage = clip_coverage(video, pipeline)
        if coverage is not None and coverage[0] > LONG * coverage[1]:
            print(
                f'  note: one clip of {coverage[1]:.2f} s classifies these {coverage[0]:.1f} s of video; '
                '--over-time follows it over time',
                flush=True,
            )
    scored = [p for p in preds if labels[p.video] is not None]
    if scored:
        right = sum(top1_right(p, labels[p.video]) for p in scored)
        among = ": a top-1 among the video's classes" if multi_class else ''
        print(
            f'top-1 on the {len(scored)} labelled videos: {100 * right / len(scored):.2f} '
            f'({right} correct{among})'
        )
    if args.out is not None and preds:
        write_csv(args.out, preds, names, labels)
        print(f'wrote {len(preds)} videos to {args.out}')
    elif args.out is not None:
        print(f'{args.out} not written: no video could be read', file=sys.stderr)
    if failed:
        print(f'{len(failed)} of {len(labels)} videos could not be read', file=sys.stderr)
        return 1
    return 0


def over_time(
    args: argparse.Namespace,
    model: nn.Module,
    pipeline: list[dict],
    video: str,
    options: TimelineOptions,
    names: Optional[Sequence[str]],
    relevance: Optional[Callable],
) -> int:
    """``--over-time``: the timeline of ``video`` (dna_mm/over_time/video_timeline.py) and the
    exit status: 0 when the file was scored to its end (a stream, to where it stopped), 130 when
    Ctrl-C stopped it, 1 when it was not scored whole (cut off, damaged, or not readable at all:
    then one line says why)."""
    from dna_mm.over_time.frame_stream import UnreadableVideoError
    from dna_mm.over_time.video_timeline import timeline

    try:
        result, _ = timeline(model, pipeline, video, options, names, relevance)
    except UnreadableVideoError as err:
        if args.debug:
            raise
        why = str(err).removeprefix(f'{video}: ')
        print(f'infer.py: {video} cannot be read: {why}', file=sys.stderr, flush=True)
        return 1
    if result.live or not (result.ended or result.gaps):
        return 0  # a stream ends, or is stopped: its timeline is whole
    return 130 if result.interrupted else 1  # a file stopped early, cut off or damaged


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('infer.py', infer, args)


if __name__ == '__main__':
    sys.exit(main())
