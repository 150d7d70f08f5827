"""A video's timeline as a file: every window's top-k and the segments, as JSON or CSV.

JSON (:func:`timeline_dict`)::

    {"video", "fps", "frames", "duration",                       # seconds
     "ended",          # why the pass stopped before the input's end (Ctrl-C, a stream's or a
                       # cut-off file's end, a file not readable past a point), null when the
                       # file was read to its end
     "gaps": [{"start", "end", "why"}, ...],   # damaged data passed over, not scored ([] if none)
     "window": {"frames", "seconds", "sampled"}, "stride",        # sampled: offsets in a window
     "smoothing": {"windows", "min_segment"},
     "windows":  [{"start", "end", "first_frame", "top": [{"class", "name", "score"}, ...]}, ...],
     "segments": [{"start", "end", "class", "name", "score"}, ...],
     "speed": {"seconds", "real_time_factor"}}

CSV, one table: ``kind,start,end,rank,class_index,class_name,score``, a row per window and rank
(``kind=window``), a row per segment (``kind=segment``, rank 1), then a row per gap of damaged
data (``kind=gap``, only its start and end). ``name`` / ``class_name`` are empty without class
names.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Optional, Sequence

from ..utils.files import write_json_atomic, write_text_atomic
from .predictor import OverTime
from .segments import Segment

SUFFIXES = ('.json', '.csv')


def _name(names: Optional[Sequence[str]], index: int) -> str:
    return names[index] if names else ''


def timeline_dict(
    result: OverTime,
    segments: list[Segment],
    topk: int,
    names: Optional[Sequence[str]] = None,
    smoothing: Optional[dict] = None,
    offsets: Sequence[int] = (),
) -> dict:
    """The JSON layout of the module docstring (times rounded to the millisecond)."""

    def t(x: float) -> float:
        return round(float(x), 3)

    return dict(
        video=result.video,
        fps=result.info.fps,
        frames=result.frames,
        duration=t(result.duration),
        ended=result.ended,
        gaps=[dict(start=t(g.start), end=t(g.end), why=g.why) for g in result.gaps],
        window=dict(frames=result.span, seconds=t(result.window_seconds), sampled=list(offsets)),
        stride=t(result.stride),
        smoothing=smoothing or {},
        windows=[
            dict(
                start=t(w.start),
                end=t(w.end),
                first_frame=w.first,
                top=[dict({'class': c}, name=_name(names, c), score=round(s, 6)) for c, s in w.top(topk)],
            )
            for w in result.windows
        ],
        segments=[
            dict(
                {'class': s.label},
                start=t(s.start),
                end=t(s.end),
                name=_name(names, s.label),
                score=round(s.score, 6),
            )
            for s in segments
        ],
        speed=dict(seconds=round(result.seconds, 3), real_time_factor=round(result.real_time_factor, 3)),
    )


def timeline_csv(
    result: OverTime, segments: list[Segment], topk: int, names: Optional[Sequence[str]] = None
) -> str:
    """The CSV table of the module docstring."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator='\n')
    writer.writerow(['kind', 'start', 'end', 'rank', 'class_index', 'class_name', 'score'])
    for w in result.windows:
        for rank, (c, s) in enumerate(w.top(topk), 1):
            writer.writerow(
                ['window', f'{w.start:.3f}', f'{w.end:.3f}', rank, c, _name(names, c), f'{s:.6f}']
            )
    for seg in segments:
        writer.writerow(
            [
                'segment',
                f'{seg.start:.3f}',
                f'{seg.end:.3f}',
                1,
                seg.label,
                _name(names, seg.label),
                f'{seg.score:.6f}',
            ]
        )
    for gap in result.gaps:
        writer.writerow(['gap', f'{gap.start:.3f}', f'{gap.end:.3f}', '', '', '', ''])
    return out.getvalue()


def write_timeline(
    path: str, data: dict, result: OverTime, segments: list[Segment], topk: int, names=None
) -> Path:
    """``data`` (:func:`timeline_dict`) to a ``.json`` ``path``, or the CSV table to a ``.csv`` one."""
    if path.lower().endswith('.csv'):
        return write_text_atomic(path, timeline_csv(result, segments, topk, names))
    return write_json_atomic(path, data)
