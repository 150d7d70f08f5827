"""Predictions over time: a recognizer's clip slid over a whole video, batch by batch.

:class:`OverTimePredictor` takes the config's test pipeline apart (:func:`~.windows.split_pipeline`)
and runs it on windows instead of on the whole file::

    FrameStream (in sequence, at the opening step's decode size)
      -> SlidingWindows (the sampling step's clip every `stride` seconds)
      -> the pipeline's steps after decoding (Resize, crops, FormatShape, PackActionInputs)
      -> batches of `batch_size` windows -> model.test_step -> class scores per window

Decoding and the pipeline run in a second thread that hands windows on through a queue of
``2 × batch_size``, so decoding overlaps the model and memory stays bounded: the frames the
open windows sample, the queued windows, one batch. That thread is
:meth:`OverTimePredictor.decoding`, a context manager that ends it and closes the stream however
its consumer ends (its end, an error, Ctrl-C): :meth:`~OverTimePredictor.run` scores what it
hands on, ``tools/extract_features.py --over-time`` takes its features
(:func:`dna_mm.apis.features.window_features`). The scores are the head's output per
window (class probabilities for heads that average views by ``'prob'``, the configs' choice),
averaged over the window's views (crops) as in ``tools/test.py``.

Damaged data in a file is passed over (:class:`~.frame_stream.Gap`): the windows stop before
it and start again after it, the gap goes through the queue in its place among the windows
(:attr:`OverTime.gaps`), and the segments are found on each side of it.
"""

from __future__ import annotations

import queue
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, NamedTuple, Optional, Union

import numpy as np
import torch
import torch.nn as nn

from ..errors import ConfigError
from .frame_stream import LIVE_TIMEOUT, FrameStream, Gap, StreamInfo
from .segments import Segment, find_segments
from .windows import SlidingWindows, Window, WindowSampling, split_pipeline, window_sampling


@dataclass
class WindowScores:
    """One window's prediction: ``start`` / ``end`` in seconds, its ``first`` frame and the
    class ``scores [K]``."""

    start: float
    end: float
    first: int
    scores: np.ndarray
    latency: Optional[float] = None  # seconds from its last frame's decoding to its scores

    def top(self, k: int) -> list[tuple[int, float]]:
        """The ``k`` best ``(class, score)``, best first."""
        order = np.argsort(-self.scores, kind='stable')[:k]
        return [(int(c), float(self.scores[c])) for c in order]


@dataclass
class OverTime:
    """The windows of one video and how the pass went.

    Attributes:
        video: The input.
        info: Its stream's header (:class:`~dna_mm.over_time.frame_stream.StreamInfo`).
        windows: In time order.
        span: Frames in a window; ``window_seconds``: that span at the video's average rate.
        stride: Seconds between window starts.
        frames: Frames decoded; ``duration``: seconds, to the end of the last frame.
        seconds: Wall time of the pass (decoding, pipeline and model).
        peak_frames: Most decoded frames held at once.
        live: The input was a stream (:func:`~dna_mm.over_time.frame_stream.is_live`).
        ended: Why the pass stopped before the input's end (a live stream's end, Ctrl-C, a
            file that cannot be read past a point), or a file's frames ended before the length
            its header states (cut off) or in damaged data that no key frame follows; ``None``
            when the file was read to its end.
        interrupted: Ctrl-C stopped the pass.
        gaps: The stretches of damaged data passed over, in time order: no window holds their
            frames, no segment covers them.
    """

    video: str
    info: StreamInfo
    windows: list[WindowScores] = field(default_factory=list)
    span: int = 0
    window_seconds: float = 0.0
    stride: float = 0.0
    frames: int = 0
    duration: float = 0.0
    seconds: float = 0.0
    peak_frames: int = 0
    live: bool = False
    ended: Optional[str] = None
    interrupted: bool = False
    gaps: list[Gap] = field(default_factory=list)

    @property
    def scores(self) -> np.ndarray:
        """``[N, K]``, the windows' scores."""
        return np.stack([w.scores for w in self.windows])

    @property
    def real_time_factor(self) -> float:
        """Seconds of video per second of the pass (above 1: faster than real time)."""
        return self.duration / self.seconds if self.seconds > 0 else float('inf')

    def segments(
        self,
        width: int = 1,
        min_length: float = 0.0,
        threshold: Optional[float] = None,
        top_only: bool = False,
    ) -> list[Segment]:
        """Runs of one class after smoothing over ``width`` windows (:mod:`.segments`); with a
        ``threshold``, each class's runs at or above it, which may overlap (a multi-label
        model's), or with ``top_only`` the best class's runs where it reaches it (a single-label
        model's). Found on each side of every gap apart: none covers a gap, no smoothing crosses one."""
        segments = []
        for begin, end, first, last in self.pieces():
            found = find_segments(
                [w.start for w in self.windows[first:last]],
                [w.end for w in self.windows[first:last]],
                self.scores[first:last],
                width,
                min_length,
                end,
                begin,
                threshold,
                top_only,
            )
            segments += [replace(s, first=s.first + first, last=s.last + first) for s in found]
        return segments

    def pieces(self) -> list[tuple[float, float, int, int]]:
        """``(start, end, first, stop)``: the stretches between the gaps (seconds) that hold
        windows, and their windows ``windows[first:stop]``."""
        bounds = [0.0, *[t for g in self.gaps for t in (g.start, g.end)], max(self.duration, 0.0)]
        pieces, first = [], 0
        for k in range(0, len(bounds), 2):
            begin, end = bounds[k], max(bounds[k], bounds[k + 1])
            stop = first
            while stop < len(self.windows) and (k + 2 == len(bounds) or self.windows[stop].start < end):
                stop += 1
            if stop > first:
                pieces.append((begin, max(end, self.windows[stop - 1].end), first, stop))
            first = stop
        return pieces


#: the name of the thread that decodes ahead of the model (:meth:`OverTimePredictor.decoding`)
DECODING_THREAD = 'over-time decoding'


class Decoded(NamedTuple):
    """One window as the decoding thread hands it on: the ``window`` (its frames and times), its
    ``sample`` packed by the pipeline's steps after decoding (:meth:`OverTimePredictor.sample`),
    and ``at``, the ``time.perf_counter()`` when it was ready (a live window's latency runs from
    there)."""

    window: Window
    sample: dict
    at: float


class Ahead:
    """What :meth:`OverTimePredictor.decoding` hands its consumer. Iterate over it once: the
    :class:`Decoded` windows and the :class:`~.frame_stream.Gap` s among them, in time order, as
    the decoding thread hands them on; an error of that thread (a file that cannot be read at
    all, ...) is raised here, in the consumer's thread."""

    def __init__(self, handoff: queue.Queue, done: object) -> None:
        self._handoff, self._done = handoff, done

    def __iter__(self) -> Iterator[Union[Decoded, Gap]]:
        while (item := self._handoff.get()) is not self._done:
            if isinstance(item, BaseException):
                raise item
            yield item

    def ready(self) -> bool:
        """Whether the next item is decoded already: when not, the consumer would wait for it
        (a live stream's batch is then scored rather than kept waiting to fill)."""
        return not self._handoff.empty()


def class_scores(model: nn.Module, sample) -> torch.Tensor:
    """``[num_classes]``, the class scores of one ``ActionDataSample`` that ``model`` predicted
    (MMAction2 1.1's ``pred_scores.item``, 1.2's ``pred_score``), as a user reads them: the head's
    clips averaged as its ``average_clips`` says (``'prob'``: softmax probabilities that sum to 1);
    a multi-label head's (``multi_class``, ``average_clips='score'``: mean logits ``s``) each class's
    own probability, ``σ(s) = 1 / (1 + e^{-s})``, as its ``BCELossWithLogits`` trained it."""
    score = getattr(sample, 'pred_score', None)
    score = (score if score is not None else sample.pred_scores.item).float()
    return score.sigmoid() if multi_label(model) else score


def multi_label(model: nn.Module) -> bool:
    """Whether ``model``'s head scores each class on its own: ``multi_class`` with its clips'
    logits averaged (``average_clips='score'``)."""
    head = getattr(model, 'cls_head', None)
    return bool(getattr(head, 'multi_class', False)) and getattr(head, 'average_clips', None) == 'score'


class OverTimePredictor:
    """Slides ``model``'s clip over videos (module docstring).

    Args:
        model: A recognizer (``load_recognizer``), in eval mode.
        pipeline: The config's test pipeline (``test_dataloader.dataset.pipeline``).
        batch_size: Windows per forward pass (1 when the model's ``test_cfg`` sets
            ``max_testing_views``, which MMAction2 allows only for batches of one).
    """

    def __init__(self, model: nn.Module, pipeline: list[dict], batch_size: int = 8) -> None:
        from mmaction.registry import TRANSFORMS
        from mmengine.dataset import Compose

        if batch_size < 1:
            raise ConfigError(f'batch_size must be >= 1, got {batch_size}')
        self.model = model
        opening, self.sample_step, after = split_pipeline(pipeline)
        self.sampling: WindowSampling = window_sampling(self.sample_step)  # again at each video's rate
        self.steps, self.pack = Compose(after[:-1]), Compose(after[-1:])  # ..., PackActionInputs
        opener = TRANSFORMS.build(dict(opening))
        self.short_side = getattr(opener, 'short_side', None)
        self.min_downscale = getattr(opener, 'min_downscale', 1.0)
        test_cfg = getattr(model, 'test_cfg', None) or {}
        self.batch_size = 1 if test_cfg.get('max_testing_views') else batch_size

    def decode_size(self, shown: tuple[int, int]) -> Optional[tuple[int, int]]:
        """The size the pipeline's opening step decodes a ``shown = (w, h)`` video at."""
        from ..datasets.transforms import scaled_size

        if self.short_side is None:
            return None
        return scaled_size(*shown, self.short_side, self.min_downscale)

    def window_seconds(self, fps: float) -> float:
        return self.sampling.span / fps

    def open(
        self, video: str, stride: Optional[float] = None, timeout: float = LIVE_TIMEOUT
    ) -> tuple[FrameStream, float]:
        """``video``'s frames (a :class:`FrameStream`; a file that cannot be read at all: an
        :class:`~.frame_stream.UnreadableVideoError`), the windows sampled at its rate, and the
        stride in seconds (default: half a window)."""
        stream = FrameStream(video, self.decode_size, timeout=timeout)
        self.sampling = window_sampling(self.sample_step, stream.info.fps)
        return stream, self.window_seconds(stream.info.fps) / 2 if stride is None else stride

    def sample(self, window: Window, video: str) -> dict:
        """The packed input of one window: the pipeline's steps after decoding, on its frames."""
        return self.pack(self.transform(window, video))

    def transform(self, window: Window, video: str) -> dict:
        """The pipeline's results for one window before packing (``imgs``, and what the steps
        record: ``scale_factor``, ``crop_bbox``, ...)."""
        h, w = window.frames[0].shape[:2]
        results = dict(
            filename=video,
            label=-1,
            start_index=0,
            modality='RGB',
            total_frames=self.sampling.span,
            frame_inds=np.asarray(self.sampling.offsets),
            imgs=list(window.frames),
            original_shape=(h, w),
            img_shape=(h, w),
            **self.sampling.results,
        )
        return self.steps(results)

    @torch.no_grad()
    def scores(self, samples: list[dict]) -> np.ndarray:
        """``[B, K]`` class scores of packed samples, in one forward pass."""
        from mmengine.dataset import pseudo_collate

        out = self.model.test_step(pseudo_collate(samples))
        return torch.stack([class_scores(self.model, s).cpu() for s in out]).numpy()

    def windows(
        self,
        stream: FrameStream,
        stride: float,
        stop: Optional[threading.Event] = None,
        state=None,
        on_gap: Optional[Callable[[Gap], None]] = None,
    ):
        """The windows of ``stream`` every ``stride`` seconds, in time order, decoded and sliced
        (:class:`SlidingWindows`; none across a gap of damaged data, each gap handed to
        ``on_gap`` after the windows before it); ``state`` gets the slider (its peak of frames
        held), then the frame count and the duration."""
        slider = SlidingWindows(self.sampling, stride, stream.info.fps)
        if state is not None:
            state['slider'] = slider  # its peak, even when the pass is stopped
        last = None
        for frame in stream:
            if stop is not None and stop.is_set():
                return
            if frame.gap is not None:
                yield from slider.break_at_gap()
                if on_gap is not None:
                    on_gap(frame.gap)
            last = frame
            yield from slider.push(frame)
        yield from slider.finish()
        if state is not None:
            state.update(
                frames=0 if last is None else last.index + 1,
                duration=0.0 if last is None else last.time + 1 / stream.info.fps,
            )

    @contextmanager
    def decoding(self, stream: FrameStream, stride: float, state: Optional[dict] = None) -> Iterator[Ahead]:
        """The windows of ``stream`` every ``stride`` seconds (:meth:`windows`) packed for the
        model (:meth:`sample`), decoded ahead in a second thread (:data:`DECODING_THREAD`) while
        the consumer works on those before: an :class:`Ahead` to iterate over, which hands on at
        most ``2 × batch_size`` windows ahead, each gap of damaged data in its place among them.
        ``state``: as :meth:`windows` fills it.

        On leaving the block, however (the windows' end, an error, a ``break``, Ctrl-C), the
        thread is told to stop and joined, then ``stream`` is closed. After a Ctrl-C the join
        waits 2 s at most: a thread still in a live stream's read (up to its ``timeout``) is left
        to the process's exit, and the stream open under it (closing it would pull the data out
        from under that read)."""
        handoff: queue.Queue = queue.Queue(maxsize=2 * self.batch_size)
        stop, done = threading.Event(), object()

        def put(item) -> None:  # gives up once the consumer stopped (an error, Ctrl-C)
            while not stop.is_set():
                try:
                    return handoff.put(item, timeout=0.1)
                except queue.Full:
                    continue

        def produce() -> None:
            try:
                for window in self.windows(stream, stride, stop, state, put):
                    put(Decoded(window, self.sample(window, stream.name), time.perf_counter()))
                put(done)
            except BaseException as err:  # noqa: BLE001 (handed to the consumer's thread)
                put(err)

        worker = threading.Thread(target=produce, name=DECODING_THREAD, daemon=True)
        worker.start()
        interrupted = False
        try:
            yield Ahead(handoff, done)
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            stop.set()
            worker.join(timeout=2 if interrupted else None)
            if not worker.is_alive():  # else still in a read of a live stream: left to the exit
                stream.close()

    def run(
        self,
        video: str,
        stride: Optional[float] = None,
        on_windows: Optional[Callable[[list[WindowScores]], None]] = None,
        on_start: Optional[Callable[[OverTime], None]] = None,
        timeout: float = LIVE_TIMEOUT,
        on_gap: Optional[Callable[[Gap], None]] = None,
    ) -> OverTime:
        """The windows of ``video`` (a file or a live stream) every ``stride`` seconds (default:
        half a window). ``on_start`` is called once the input is open, ``on_windows`` with each
        batch's windows as they are scored, ``on_gap`` with each gap of damaged data in its
        place among them (the windows before it scored first). A live stream is scored as its
        windows come (a batch does not wait to fill), each window's latency measured; Ctrl-C
        stops the pass cleanly (the windows so far are the result, :attr:`OverTime.ended` says
        so); ``timeout``: seconds without data after which a live stream counts as ended. A file
        that cannot be read at all is an :class:`~.frame_stream.UnreadableVideoError`."""
        start = time.perf_counter()
        stream, stride = self.open(video, stride, timeout)
        window_seconds = self.window_seconds(stream.info.fps)
        result = OverTime(
            stream.name, stream.info, span=self.sampling.span, window_seconds=window_seconds, stride=stride,
            live=stream.live,
        )  # fmt: skip
        if on_start is not None:
            on_start(result)
        state: dict = {}

        def score(batch: list[Decoded]) -> None:
            if not batch:
                return
            scores = self.scores([d.sample for d in batch])
            at = time.perf_counter()
            scored = [
                WindowScores(w.start, w.end, w.first, s, at - t if stream.live else None)
                for (w, _, t), s in zip(batch, scores, strict=True)
            ]
            result.windows += scored
            if on_windows is not None:
                on_windows(scored)

        try:
            with self.decoding(stream, stride, state) as ahead:  # ends the thread, closes the stream
                batch: list[Decoded] = []
                for item in ahead:
                    if isinstance(item, Gap):  # the windows before it first
                        score(batch)
                        batch = []
                        result.gaps.append(item)
                        if on_gap is not None:
                            on_gap(item)
                        continue
                    batch.append(item)
                    if len(batch) == self.batch_size or (stream.live and not ahead.ready()):
                        score(batch)
                        batch = []
                score(batch)
        except KeyboardInterrupt:
            result.ended, result.interrupted = 'stopped by Ctrl-C', True
        last = result.windows[-1] if result.windows else None
        if result.interrupted:  # what the scored windows cover
            result.frames = last.first + self.sampling.span if last is not None else 0
            result.duration = last.end if last is not None else 0.0
        else:
            result.frames, result.duration = state.get('frames', 0), state.get('duration', 0.0)
        result.peak_frames = state['slider'].peak_frames if 'slider' in state else 0
        cut = cut_off(stream.info, result.duration, stream.live, stream.read_to)  # said before a damaged tail
        result.ended = result.ended or stream.ended or cut or stream.damaged_to_end
        result.seconds = time.perf_counter() - start
        return result


#: seconds by which a file's frames may end before the length its video stream's header states
#: (the header's rounding, an edit list)
CUT_OFF_SLACK = 1.0


def cut_off(
    info: StreamInfo, duration: float, live: bool = False, read_to: Optional[float] = None
) -> Optional[str]:
    """Why a file whose frames end at ``duration`` seconds was not scored to its end: its video
    stream's header states more (:data:`CUT_OFF_SLACK`; the file was cut off while it was written
    or copied, its index kept), or ``None`` (also when that header states no length: the
    container's, which an audio track may make longer, is not used). ``read_to``: seconds to
    which the file's data was read, damaged frames and packets too: a file read to the length its
    header states is not cut off (damage ended its frames: :attr:`FrameStream.damaged_to_end`)."""
    stated = info.stream_duration
    read = duration if read_to is None else max(duration, read_to)
    if live or not stated or read >= stated - CUT_OFF_SLACK:
        return None
    ends = f'the frames end at {duration:.1f} s of the {stated:.1f} s its header states'
    return f'{ends} (the file is cut off or damaged)'
