"""Where the model looks, over time: the analyses' relevance maps
(:func:`dna_mm.analysis.relevance.relevance_maps`, Chefer's rule per branch: for DnA the
positive and the negative one) of every window of an over-time run, put back on the frames.

For each window (the run's windows again: decoded in sequence, sliced the same way) the map of
its top-1 class is computed on one view, the middle one (the centre crop of ``ThreeCrop``, the
only one otherwise), and kept small: per branch, the CLS row on the patch grid ``[T, h, w]``,
min–max normalised over the clip (as the analyses' figures), float16. A frame of the video then
shows the map of the window whose cell holds it, at that window's sampled frame nearest to it,
upsampled into the region of the frame the view covers (the pipeline's ``scale_factor`` and
``crop_bbox`` say where), zero outside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..errors import ConfigError
from .predictor import OverTime, OverTimePredictor

#: ``--relevance`` choices -> branches drawn
BRANCHES = {'both': ('pos', 'neg'), 'pos': ('pos',), 'neg': ('neg',)}


@dataclass
class WindowRelevance:
    """One window's maps: branch -> ``[T, h, w]`` float16 in ``[0, 1]``; ``box``: the view's
    region of the frame, ``(x0, y0, x1, y1)`` as fractions of its width and height; ``frames``:
    the window's sampled frame indices of the view (one per map)."""

    maps: dict[str, np.ndarray]
    box: tuple[float, float, float, float]
    frames: tuple[int, ...]


def analysis_model(model):
    """An :class:`~dna_mm.analysis.models.AnalysisModel` of a loaded recognizer (class logits,
    views averaged), for :func:`~dna_mm.analysis.relevance.relevance_maps`."""
    from ..analysis.models import AnalysisModel

    pre = model.data_preprocessor

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        logits = model(inputs, mode='tensor', stage='head')
        return logits.reshape(inputs.shape[0], -1, logits.shape[-1]).mean(dim=1)

    shape = (1, 1, -1, 1, 1, 1)
    return AnalysisModel(
        model, forward, lambda n: iter(()), pre.mean.reshape(shape), pre.std.reshape(shape), 255.0, True,
        type(model).__name__, lambda path: None,
    )  # fmt: skip


def view_box(results: dict, view: int, views: int) -> tuple[float, float, float, float]:
    """The region of the decoded frame that ``view`` of ``views`` shows, as fractions
    ``(x0, y0, x1, y1)``: the crop (``crop_bbox``, one box or one per image) scaled back by
    ``scale_factor``; the whole frame without a crop."""
    h, w = results['original_shape']
    box = results.get('crop_bbox')
    if box is None:
        return 0.0, 0.0, 1.0, 1.0
    box = np.asarray(box, dtype=np.float64).reshape(-1, 4)
    box = box[min(len(box) - 1, view * len(box) // views)]
    sx, sy = np.asarray(results.get('scale_factor', (1.0, 1.0)), dtype=np.float64).reshape(-1)[:2]
    x0, y0, x1, y1 = box / np.array([sx, sy, sx, sy])
    return (max(0.0, x0 / w), max(0.0, y0 / h), min(1.0, x1 / w), min(1.0, y1 / h))


def drawn_maps(model: torch.nn.Module, branches: Sequence[str]) -> dict[str, str]:
    """``{branch asked: the relevance chain drawn for it}``: a model whose attentions have a
    positive and a negative branch (DnA, Diff) draws each; one whose attentions have one map
    (softmax, cog, ...) draws it as ``pos``. A branch the model has not is a ConfigError naming
    what it has, before any window is scored."""
    from ..analysis.relevance import relevance_chains

    chains = {'pos': 'pos', 'neg': 'neg'} if 'neg' in relevance_chains(model) else {'pos': 'attn'}
    missing = [b for b in branches if b not in chains]
    if missing:
        raise ConfigError(
            f'--relevance {"/".join(branches) if len(branches) > 1 else missing[0]}: this model has no '
            f'{"/".join(missing)} branch: its attention has one map (--relevance pos draws it)'
        )
    return {b: chains[b] for b in branches}


def relevance_windows(
    predictor: OverTimePredictor,
    result: OverTime,
    branches: Sequence[str],
    progress: Optional[Callable[[int], None]] = None,
) -> list[WindowRelevance]:
    """:class:`WindowRelevance` of each window of ``result`` (the module docstring), in order;
    ``branches`` drawn as :func:`drawn_maps` says."""
    from ..analysis.relevance import relevance_maps
    from .frame_stream import FrameStream

    am = analysis_model(predictor.model)
    chains = drawn_maps(predictor.model, branches)
    out = []
    with FrameStream(result.video, predictor.decode_size) as stream:
        for k, window in enumerate(predictor.windows(stream, result.stride)):
            results = predictor.transform(window, result.video)
            packed = predictor.pack(dict(results))
            data = predictor.model.data_preprocessor(
                dict(inputs=[packed['inputs']], data_samples=[packed['data_samples']]), False
            )
            inputs = data['inputs']  # [1, V, C, T, H, W]
            views = inputs.shape[1]
            view = views // 2
            target = int(np.argmax(result.windows[k].scores)) if k < len(result.windows) else None
            rel = relevance_maps(am, inputs[:, view : view + 1], target)
            maps = {}
            for b in branches:
                raw = rel.raw[chains[b]].float()
                lo, hi = raw.min(), raw.max()
                maps[b] = (
                    ((raw - lo) / (hi - lo) if hi > lo else torch.zeros_like(raw)).numpy().astype(np.float16)
                )
            t = next(iter(maps.values())).shape[0]
            frames = tuple(window.first + o for o in predictor.sampling.offsets[:t])
            out.append(WindowRelevance(maps, view_box(results, view, views), frames))
            if progress is not None:
                progress(k)
    return out


def relevance_for(branches: Sequence[str], model: Optional[torch.nn.Module] = None) -> Callable:
    """The ``relevance`` factory of :func:`~.video_timeline.timeline`: ``(predictor, result) ->
    (window, frame index, (w, h)) -> {branch: [H, W] map}`` for the annotated video; with the
    ``model``, a branch it has not is refused at once (:func:`drawn_maps`), not after the pass."""
    if model is not None:
        drawn_maps(model, branches)

    def factory(predictor: OverTimePredictor, result: OverTime) -> Callable:
        import cv2

        kept = relevance_windows(predictor, result, branches)

        def maps(k: int, index: int, size: tuple[int, int]) -> dict[str, np.ndarray]:
            w, h = size
            rel = kept[min(k, len(kept) - 1)]
            j = int(np.argmin([abs(f - index) for f in rel.frames]))
            x0, y0, x1, y1 = (
                int(round(v)) for v in (rel.box[0] * w, rel.box[1] * h, rel.box[2] * w, rel.box[3] * h)
            )
            out = {}
            for b, m in rel.maps.items():
                full = np.zeros((h, w), np.float32)
                if x1 > x0 and y1 > y0:
                    full[y0:y1, x0:x1] = cv2.resize(
                        m[j].astype(np.float32), (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR
                    )
                out[b] = full
            return out

        return maps

    return factory
