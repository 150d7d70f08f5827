"""Sliding windows over a video's frames: the model's clip, slid along the whole video.

A window is the span of frames the config's test pipeline samples one clip from: with
MMAction2's ``SampleFrames(clip_len, frame_interval)`` a span of ``clip_len × frame_interval``
frames, its frames those the sampling step itself picks from a video of exactly that length
(:func:`window_sampling`: ``0, interval, 2·interval, …`` for one clip), so each window is
the clip the model was trained on. Its length in seconds is the span at the video's rate
(16 frames at 25 fps: 0.64 s); with ``SampleFramesBySeconds`` the interval follows from the
rate, and the window is ``clip_len × seconds`` long in every video.

:class:`SlidingWindows` opens a window at the first frame at or after each multiple of the
stride (seconds, on the frames' own timestamps), keeps only the frames an open window samples,
and hands a window on once its span has passed::

    frame i at time t:  open a window at i      if t >= next start;  next start += stride
                        keep frame i            if an open window samples it
                        hand on every window    whose span ends at i

so it holds at most the frames of the windows that overlap, whatever the video's length
(:attr:`SlidingWindows.peak_frames`). At the end of the video the first window still open (the
tail, or the whole of a video shorter than one span) is handed on with its missing frames
repeating the last one, as ``SampleFrames(out_of_bound_opt='repeat_last')`` does, where it holds
frames no window handed on held: a video that ends where a window's span ends (2 s of windows
of 2 s) has no tail, whose frames would all be that window's second half. A gap of
damaged data (:class:`~dna_mm.over_time.frame_stream.Gap`) is an end of the same kind
(:meth:`SlidingWindows.break_at_gap`): no window holds frames from both of its sides, and the
first frame after it opens a window, the later ones keeping to the stride's multiples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator, Optional

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True)
class WindowSampling:
    """Which frames of a window the model sees.

    Attributes:
        span: Frames in a window.
        offsets: Indices sampled in a window (``clip_len × num_clips``, from its first frame).
        results: What the sampling step adds to a pipeline's results (``clip_len``,
            ``frame_interval``, ``num_clips``), for the steps after decoding.
    """

    span: int
    offsets: tuple[int, ...]
    results: dict = field(default_factory=dict)


def split_pipeline(
    pipeline: list[dict], key: str = 'test_dataloader.dataset.pipeline'
) -> tuple[dict, dict, list[dict]]:
    """``(opening step, sampling step, steps after decoding)`` of a video test pipeline: the
    step before the sampling step opens the file (``DecordInit``, ``ScaledPyAVInit``, ...), the
    sampling step has ``clip_len`` and ``frame_interval``, the step after it decodes. Anything
    else is a :class:`ConfigError` naming ``key``."""
    steps = [dict(s) for s in pipeline]
    paced = ('frame_interval', 'seconds')  # SampleFrames, SampleFramesBySeconds
    sample = next((i for i, s in enumerate(steps) if 'clip_len' in s and any(k in s for k in paced)), None)
    types = [getattr(s.get('type'), '__name__', s.get('type')) for s in steps]  # a class: its name
    if sample is None or sample == 0 or sample + 1 >= len(steps):
        raise ConfigError(
            f'{key}: predictions over time need a video pipeline "open, SampleFrames(clip_len, '
            f'frame_interval), decode, ..."; got {types}'
        )
    return steps[sample - 1], steps[sample], steps[sample + 2 :]


def window_sampling(sample_step: dict, fps: float = 30.0) -> WindowSampling:
    """The window of a sampling step (``SampleFrames`` or a step with its arguments, or
    ``SampleFramesBySeconds``, whose interval follows from a video's ``fps``): its span and the
    offsets the step itself picks, in test mode, from a video of one span. Its ``type`` is what
    MMEngine's registry takes: a registered name, a dotted path (``'pkg.mod.Class'``) or the
    class itself (a new-style config's ``type=SampleFrames``)."""
    from mmaction.registry import TRANSFORMS

    from ..datasets.sampling import interval_at

    cfg = dict(sample_step)
    step = TRANSFORMS.get(cfg['type']) if isinstance(cfg['type'], str) else cfg['type']
    clip_len = int(cfg['clip_len'])
    interval = interval_at(cfg['seconds'], fps) if 'seconds' in cfg else int(cfg['frame_interval'])
    if clip_len < 1 or interval < 1:
        raise ConfigError(
            f'{getattr(step, "__name__", cfg["type"])}: clip_len and frame_interval must be >= 1, got '
            f'{clip_len}, {interval}'
        )
    span = clip_len * interval
    if 'test_mode' in step.__init__.__code__.co_varnames:
        cfg['test_mode'] = True
    out = TRANSFORMS.build(cfg)(dict(total_frames=span, start_index=0, modality='RGB', avg_fps=fps))
    offsets = tuple(int(i) for i in np.asarray(out['frame_inds']).reshape(-1))
    results = {k: out[k] for k in ('clip_len', 'frame_interval', 'num_clips') if k in out}
    return WindowSampling(span, offsets, results)


@dataclass
class Window:
    """A window handed on: its first frame's index, its start and end in seconds (the end: the
    time of the frame after its span), and the sampled frames (``[H, W, 3]`` uint8 RGB each)."""

    first: int
    start: float
    end: float
    frames: list[np.ndarray]


@dataclass
class _Open:
    first: int
    start: float
    needs: tuple[int, ...]  # frame indices it samples


class SlidingWindows:
    """Windows of ``sampling`` every ``stride`` seconds, fed one frame at a time (module
    docstring). ``fps``: the video's average rate, for the end of the last frame."""

    def __init__(self, sampling: WindowSampling, stride: float, fps: float) -> None:
        if not stride > 0 or not math.isfinite(stride):
            raise ConfigError(f'stride must be a positive number of seconds, got {stride!r}')
        self.sampling, self.stride, self.frame_seconds = sampling, stride, 1 / fps
        self._open: list[_Open] = []
        self._kept: dict[int, np.ndarray] = {}
        self._next_start = 0.0
        self._resume = False  # after a gap: the next frame opens a window
        self._last = None  # the newest frame
        self._spanned = -1  # the last frame index a window handed on spans
        self.peak_frames = 0  # most frames held at once

    def push(self, frame) -> Iterator[Window]:
        """Take frame ``frame`` (a :class:`~dna_mm.over_time.frame_stream.StreamFrame`); yield
        the windows whose span ends with it."""
        i, t = frame.index, frame.time
        if t >= self._next_start - 1e-9 or self._resume:
            self._open.append(_Open(i, t, tuple(i + o for o in self.sampling.offsets)))
            while self._next_start <= t + 1e-9:
                self._next_start += self.stride
            self._resume = False
        if any(i in w.needs for w in self._open):
            self._kept[i] = frame.rgb()
        self._last = frame
        self.peak_frames = max(self.peak_frames, len(self._kept))
        while self._open and i >= self._open[0].first + self.sampling.span - 1:
            yield self._close(self._open.pop(0), t + self.frame_seconds)

    def finish(self) -> Iterator[Window]:
        """At the end of the video: the first window still open, its missing frames the last
        frame repeated (none when every window closed, or when the windows handed on span the
        last frame: the open ones' frames are all theirs)."""
        window, self._open = (self._open[0] if self._open else None), []
        if window is not None and self._last.index > self._spanned:
            yield self._close(window, self._last.time + self.frame_seconds, self._last.rgb())

    def break_at_gap(self) -> Iterator[Window]:
        """Before the first frame after a gap of damaged data: what :meth:`finish` hands on at
        the end of a video, and the next frame opens a window (module docstring)."""
        yield from self.finish()
        self._kept, self._resume = {}, True

    def _close(self, window: _Open, end: float, last: Optional[np.ndarray] = None) -> Window:
        """``window`` with its frames (those past the video's end: ``last``, its last frame)."""
        frames = [self._kept.get(n, last) for n in window.needs]
        still = {n for w in self._open for n in w.needs}
        self._kept = {n: f for n, f in self._kept.items() if n in still}
        self._spanned = max(self._spanned, min(window.first + self.sampling.span - 1, self._last.index))
        return Window(window.first, window.start, end, frames)
