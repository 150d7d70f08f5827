"""``tools/infer.py --over-time``: one video's timeline, printed as it goes, its segments, its
speed, and the files asked for (a ``.json`` / ``.csv`` timeline, an annotated video).

Printed, for a video ``v.mp4``::

    v.mp4: 240.00 s, 25.00 fps, 6000 frames; windows of 16 frames (0.64 s) every 0.32 s, 8 a batch
       0:00.0 -  0:00.6   0.91 still  (0.05 horizontal, 0.03 vertical)
       ...                                                     (one line a window, as scored)
       0:20.8 -  0:27.1  not scored: damaged frame data (FFmpeg: Invalid data found when ...)
       ...                                                     (a gap of damaged data, in its place)
    the file is damaged: 6.3 s of its 240.0 s not scored (1 gap)
    segments (smoothed over 5 windows):
       0:00.0 -  1:00.2   still  0.88
       ...
    240.0 s of video in 31.5 s: 7.6x real time (751 windows; at most 16 decoded frames held)

A multi-label model (``cls_head.multi_class``, ``average_clips='score'``) scores each class's own
probability, and its segments are each class's runs at or above ``--threshold`` (0.5), which may
overlap, in order of start::

    segments (smoothed over 5 windows; each class at or above 0.50):
       0:00.0 -  0:41.3   still  0.81
       0:12.6 -  0:20.1   horizontal  0.64
       ...

A single-label model's segments tile the video; with ``--threshold`` they leave out where its
best class stays below it (``segments (smoothed over 5 windows; the best class at or above
0.80):``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch.nn as nn

from .frame_stream import Gap
from .overlay import clock
from .predictor import OverTime, OverTimePredictor, WindowScores, multi_label
from .segments import Segment

#: a multi-label model's segments without ``--threshold``: where a class is more likely present than not
MULTI_LABEL_THRESHOLD = 0.5


@dataclass
class TimelineOptions:
    """What ``--over-time`` was asked for.

    Attributes:
        stride: Seconds between window starts (``None``: half a window).
        batch_size: Windows a forward pass.
        topk: Classes per window (printed, written, drawn).
        smooth: Windows the scores are averaged over before the segments (odd).
        min_segment: Seconds: a shorter segment joins a neighbour (with a threshold: is dropped).
        threshold: Segments only where a class's probability is at or above it: a multi-label
            model's, each class's runs (``None``: 0.5); a single-label model's, its best class's
            (``None``: none, the segments tile the video).
        out: ``.json`` / ``.csv`` timeline file, or ``None``.
        out_video: Annotated video, or ``None``.
        timeout: Seconds without data after which a live stream counts as ended.
    """

    stride: Optional[float] = None
    batch_size: int = 8
    topk: int = 5
    smooth: int = 5
    min_segment: float = 0.0
    threshold: Optional[float] = None
    out: Optional[str] = None
    out_video: Optional[str] = None
    timeout: float = 10.0


def _name(c: int, names: Optional[Sequence[str]]) -> str:
    return names[c] if names else f'class {c}'


def format_window(w: WindowScores, names: Optional[Sequence[str]], topk: int) -> str:
    """``start - end   score name  (score name, ...)``: the best class, then the next ones (and
    the latency, for a live stream)."""
    (c, s), *rest = w.top(topk)
    others = f'  ({", ".join(f"{v:.2f} {_name(k, names)}" for k, v in rest)})' if rest else ''
    latency = f'  [latency {w.latency:.2f} s]' if w.latency is not None else ''
    return f'  {clock(w.start):>8} - {clock(w.end):>8}  {s:5.2f} {_name(c, names)}{others}{latency}'


def _count(n: int, noun: str) -> str:
    return f'{n} {noun}{"s" * (n != 1)}'


def format_gap(gap: Gap) -> str:
    """``start - end  not scored: why``: a gap of damaged data, among the windows."""
    return f'  {clock(gap.start):>8} - {clock(gap.end):>8}  not scored: {gap.why}'


def damage_line(result: OverTime) -> str:
    """What the gaps of damaged data took from the timeline, in one line."""
    lost = sum(g.seconds for g in result.gaps)
    return (
        f'the {"stream" if result.live else "file"} is damaged: {lost:.1f} s of its '
        f'{result.duration:.1f} s not scored ({_count(len(result.gaps), "gap")})'
    )


def format_segment(seg: Segment, names: Optional[Sequence[str]]) -> str:
    return f'  {clock(seg.start):>8} - {clock(seg.end):>8}  {_name(seg.label, names)}  {seg.score:.2f}'


def timeline(
    model: nn.Module,
    pipeline: list[dict],
    video: str,
    options: TimelineOptions,
    names: Optional[Sequence[str]] = None,
    relevance: Optional[Callable] = None,
    echo: Callable[[str], None] = lambda line: print(line, flush=True),
) -> tuple[OverTime, list[Segment]]:
    """Run ``model`` over ``video`` (:class:`OverTimePredictor`), print its timeline as it goes
    (module docstring) and write ``options.out`` / ``options.out_video``; returns the windows
    and the segments. ``relevance``: a factory ``(predictor, result) -> per-frame maps`` for
    the annotated video (:func:`dna_mm.over_time.relevance_overlay.relevance_for`)."""
    from .timeline_files import timeline_dict, write_timeline

    predictor = OverTimePredictor(model, pipeline, options.batch_size)

    def header(result: OverTime) -> None:
        info = result.info
        length = f'{info.duration:.2f} s, ' if info.duration and not result.live else ''
        count = f', {info.frames} frames' if info.frames and not result.live else ''
        live = ' (live: each window as it completes; Ctrl-C stops)' if result.live else ''
        echo(
            f'{result.video}: {length}{info.fps:.2f} fps{count}; windows of {result.span} frames '
            f'({result.window_seconds:.2f} s) every {result.stride:.2f} s, '
            f'{predictor.batch_size} a batch{live}'
        )

    def on_windows(scored: list[WindowScores]) -> None:
        for w in scored:
            echo(format_window(w, names, options.topk))

    def on_gap(gap: Gap) -> None:
        echo(format_gap(gap))

    result = predictor.run(video, options.stride, on_windows, header, options.timeout, on_gap)
    if result.gaps:
        echo(damage_line(result))
    if result.ended:
        echo(f'{result.ended}: {_count(len(result.windows), "window")}, {result.duration:.1f} s of video')
    if not result.live and 0 < result.duration < result.stride:
        echo(
            f'note: the stride ({result.stride:g} s) is longer than the video ({result.duration:.1f} s): '
            'one window classifies it'
        )
    several = multi_label(model)
    threshold = MULTI_LABEL_THRESHOLD if several and options.threshold is None else options.threshold
    segments = result.segments(options.smooth, options.min_segment, threshold, top_only=not several)
    which = 'each class' if several else 'the best class'
    each = f'; {which} at or above {threshold:.2f}' if threshold is not None else ''
    echo(f'segments (smoothed over {options.smooth} window{"s" if options.smooth > 1 else ""}{each}):')
    for seg in segments:
        echo(format_segment(seg, names))
    echo(
        f'{result.duration:.1f} s of video in {result.seconds:.1f} s: '
        f'{result.real_time_factor:.1f}x real time ({_count(len(result.windows), "window")}; at most '
        f'{result.peak_frames} decoded frames held)'
    )
    if options.out:
        data = timeline_dict(
            result,
            segments,
            options.topk,
            names,
            dict(
                windows=options.smooth,
                min_segment=options.min_segment,
                **({} if threshold is None else {'threshold': threshold}),
            ),
            predictor.sampling.offsets,
        )
        path = write_timeline(options.out, data, result, segments, options.topk, names)
        echo(
            f'wrote {_count(len(result.windows), "window")} and {_count(len(segments), "segment")} to {path}'
        )
    if options.out_video and result.interrupted:
        echo(f'the annotated video was not written: the pass was stopped at {clock(result.duration)}')
    elif options.out_video:
        from .annotated_video import write_annotated_video

        maps = None
        if relevance is not None:
            echo(f'relevance maps of the {len(result.windows)} windows (a backward pass each) ...')
            maps = relevance(predictor, result)
        path = write_annotated_video(result, segments, options.out_video, min(options.topk, 5), names, maps)
        echo(f'wrote the annotated video {path}')
    sys.stdout.flush()
    return result, segments
