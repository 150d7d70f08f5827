"""What an annotated video draws on each frame: the current top-k, a timeline strip of the
segments, and where the model looks (optional). Pure drawing on ``[H, W, 3]`` uint8 RGB arrays
(OpenCV), no I/O.

* top left, on a dark translucent panel: one line per class, ``score  name`` over a bar as long
  as the score, in the class's colour;
* bottom: a strip as wide as the frame, one block per segment in its class's colour (its name
  inside where it fits; a multi-label model's segments, which overlap, in a lane a class), a
  white cursor at the current time, the time and the video's length;
* ``relevance``: a heat map blended over the frame (positive branch orange, negative blue:
  the colours of the analyses' figures, :mod:`dna_mm.analysis.plots.relevance_maps`), the
  branches side by side when there are two, each on the frame at half its size (its shape kept),
  between dark bands that the top-k and the strip are drawn in.

Colours are the Okabe–Ito palette (colour-blind safe), class ``c`` taking colour ``c mod 8``.
Text and strip scale with the frame's height (readable from 240 to 2160 lines), the text made
smaller where its longest line would not fit the frame's width (:meth:`Layout.for_frame`, down
to the size of 240 lines); a frame too small for that is enlarged first (:func:`enlargement`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .segments import Segment

#: Okabe–Ito, RGB
PALETTE = (
    (230, 159, 0),
    (86, 180, 233),
    (0, 158, 115),
    (240, 228, 66),
    (0, 114, 178),
    (213, 94, 0),
    (204, 121, 167),
    (153, 153, 153),
)
#: relevance colours (RGB) at relevance 1, per branch, as the analyses' figures draw them
RELEVANCE_RGB = {'pos': (213, 94, 0), 'attn': (213, 94, 0), 'neg': (0, 114, 178)}


def colour(label: int) -> tuple[int, int, int]:
    return PALETTE[label % len(PALETTE)]


def clock(seconds: float) -> str:
    """``m:ss.s`` (``h:mm:ss`` from an hour)."""
    seconds = max(0.0, seconds)
    if seconds >= 3600:
        return f'{int(seconds // 3600)}:{int(seconds % 3600 // 60):02d}:{int(seconds % 60):02d}'
    return f'{int(seconds // 60)}:{seconds % 60:04.1f}'


#: the fewest lines the overlay is readable on; its text is never smaller than on them
READABLE_LINES = 240
#: the longest side :func:`enlargement` makes (beyond it a line too long for the frame is cut)
MAX_SIDE = 4096


@dataclass
class Layout:
    """Sizes for a frame of ``height`` lines: font scale, line thickness, line height, strip height."""

    font: float
    thick: int
    line: int
    strip: int

    @property
    def pad(self) -> int:
        """The top-k panel's margin: the frame needs a line's width plus ``4 * pad``."""
        return max(2, self.line // 4)

    @classmethod
    def for_height(cls, height: int, font: Optional[float] = None) -> Layout:
        """The sizes of ``height`` lines (``font``: another font scale, the rest following it)."""
        if font is None:
            font = min(1.6, max(0.3, height / 720))
        return cls(font, max(1, round(1.6 * font)), max(10, round(30 * font)), max(6, round(height * 0.045)))

    @classmethod
    def for_frame(cls, width: int, height: int, texts: Sequence[str] = ()) -> Layout:
        """:meth:`for_height`, its font made smaller until each of ``texts`` (the lines drawn:
        :func:`overlay_texts`) fits a frame ``width`` wide, but not smaller than the font of
        :data:`READABLE_LINES` lines (a line still too long is then cut, :func:`fit_text`)."""
        layout = cls.for_height(height)
        if fits(texts, layout, width):
            return layout
        lo, hi = min(layout.font, cls.for_height(READABLE_LINES).font), layout.font
        for _ in range(12):  # the largest font that fits, to 1/4096 of the range
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fits(texts, cls.for_height(height, mid), width) else (lo, mid)
        return cls.for_height(height, lo)


def text_width(text: str, layout: Layout) -> int:
    """Pixels ``text`` takes drawn at ``layout`` (its dark outline included)."""
    import cv2

    return cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, layout.font, layout.thick)[0][0] + 2


def fits(texts: Sequence[str], layout: Layout, width: int) -> bool:
    """Whether each of ``texts`` fits the top-k panel (or beside the clock) of a frame ``width`` wide."""
    return all(text_width(t, layout) + 4 * layout.pad <= width for t in texts)


def fit_text(text: str, layout: Layout, width: int) -> str:
    """``text``, cut (``..`` at its end) to fit a frame ``width`` wide as :func:`fits` says."""
    if fits([text], layout, width):
        return text
    for n in range(len(text) - 1, 0, -1):
        cut = text[:n].rstrip() + '..'
        if fits([cut], layout, width):
            return cut
    return text[:1]


def topk_labels(top: Sequence[tuple[int, float]], names: Optional[Sequence[str]]) -> list[str]:
    """The top-k panel's lines, ``score  name``."""
    return [f'{s:.2f}  {names[c] if names else f"class {c}"}' for c, s in top]


def clock_text(t: float, duration: float) -> str:
    return f'{clock(t)} / {clock(duration)}'


def overlay_texts(
    tops: Sequence[Sequence[tuple[int, float]]], names: Optional[Sequence[str]], duration: float
) -> list[str]:
    """Every line of text a video's overlay draws: the top-k panels' lines of all its windows
    (``tops``) and its longest clock."""
    lines = {label for top in tops for label in topk_labels(top, names)}
    return sorted(lines) + [clock_text(duration, duration)]


def enlargement(width: int, height: int, texts: Sequence[str] = ()) -> int:
    """The whole factor a ``width`` x ``height`` frame is enlarged by before the overlay is drawn
    on it: the smallest that gives it :data:`READABLE_LINES` lines and room for the longest of
    ``texts`` at their size on those lines (:func:`fits`; a narrow frame needs that); 1 for a
    frame that has both. The room is given up to :data:`MAX_SIDE` pixels a side."""
    tall = max(1, -(-READABLE_LINES // height))
    smallest = Layout.for_height(READABLE_LINES)
    need = max((text_width(t, smallest) + 4 * smallest.pad for t in texts), default=0)
    wide = -(-need // width)
    return max(tall, min(wide, MAX_SIDE // max(width, height)))


def _text(img: np.ndarray, text: str, org: tuple[int, int], layout: Layout, rgb=(255, 255, 255)) -> None:
    import cv2

    cv2.putText(
        img, text, org, cv2.FONT_HERSHEY_SIMPLEX, layout.font, (0, 0, 0), layout.thick + 2, cv2.LINE_AA
    )
    cv2.putText(img, text, org, cv2.FONT_HERSHEY_SIMPLEX, layout.font, rgb, layout.thick, cv2.LINE_AA)


def _shade(img: np.ndarray, x0: int, y0: int, x1: int, y1: int, alpha: float = 0.55) -> None:
    """Darken ``img[y0:y1, x0:x1]`` towards black by ``alpha``, in place."""
    region = img[max(0, y0) : y1, max(0, x0) : x1]
    region[:] = (region * (1 - alpha)).astype(np.uint8)


def draw_topk(
    img: np.ndarray, top: Sequence[tuple[int, float]], names: Optional[Sequence[str]], layout: Layout
) -> None:
    """The top-k panel (module docstring), in place."""
    import cv2

    if not top:
        return
    h, w = img.shape[:2]
    pad = layout.pad
    labels = [fit_text(t, layout, w) for t in topk_labels(top, names)]
    width = min(w - 2 * pad, max(text_width(t, layout) for t in labels) + 2 * pad)
    _shade(img, pad, pad, pad + width, pad + layout.line * len(top) + pad)
    for k, ((c, s), label) in enumerate(zip(top, labels, strict=True)):
        base = pad + layout.line * (k + 1)
        bar = int(round((width - 2 * pad) * min(1.0, max(0.0, s))))
        bar_h = max(2, layout.line // 6)
        cv2.rectangle(img, (2 * pad, base - bar_h), (2 * pad + bar, base), colour(c), -1)
        _text(img, label, (2 * pad, base - bar_h - 2), layout)


def strip_image(
    width: int, layout: Layout, segments: Sequence[Segment], duration: float, names=None
) -> np.ndarray:
    """``[strip, width, 3]``: the segments as coloured blocks, names inside where they fit;
    segments that overlap (a multi-label model's) in lanes, one a class, the strip's height
    shared."""
    import cv2

    strip = np.full((layout.strip, width, 3), 40, np.uint8)
    ordered = sorted(segments, key=lambda seg: seg.start)
    overlap = any(b.start < a.end for a, b in zip(ordered, ordered[1:], strict=False))
    lanes = sorted({seg.label for seg in segments}) if overlap else []
    height = layout.strip // max(1, len(lanes))  # a lane's rows
    font = max(0.25, height / 40)
    for seg in segments:
        x0 = int(round(seg.start / duration * width)) if duration > 0 else 0
        x1 = int(round(seg.end / duration * width)) if duration > 0 else width
        y0 = lanes.index(seg.label) * height if lanes else 0
        y1 = y0 + height - 1
        cv2.rectangle(strip, (x0, y0), (max(x0, x1 - 1), y1), colour(seg.label), -1)
        if x1 - x0 > 2:
            cv2.line(strip, (x1 - 1, y0), (x1 - 1, y1), (20, 20, 20), 1)
        name = names[seg.label] if names else str(seg.label)
        (tw, th), _ = cv2.getTextSize(name, cv2.FONT_HERSHEY_SIMPLEX, font, 1)
        if tw + 6 < x1 - x0 and th + 2 < height:
            y = y0 + (height + th) // 2
            cv2.putText(strip, name, (x0 + 3, y), cv2.FONT_HERSHEY_SIMPLEX, font, (0, 0, 0), 1, cv2.LINE_AA)
    return strip


def draw_strip(img: np.ndarray, strip: np.ndarray, t: float, duration: float, layout: Layout) -> None:
    """The strip at the bottom of ``img`` with the cursor at ``t`` and the clock, in place."""
    import cv2

    h, w = img.shape[:2]
    s = strip.shape[0]
    img[h - s :] = strip
    x = int(round(t / duration * (w - 1))) if duration > 0 else 0
    cv2.line(img, (x, h - s - max(2, s // 3)), (x, h - 1), (255, 255, 255), max(1, layout.thick))
    text = clock_text(t, duration)
    _text(img, text, (max(0, w - text_width(text, layout) - 2), h - s - max(4, s // 2)), layout)


def blend_relevance(img: np.ndarray, maps: dict[str, np.ndarray], opacity: float = 0.6) -> np.ndarray:
    """``img`` with relevance ``maps`` (branch → ``[H, W]`` in ``[0, 1]``, at the frame's size)
    blended in: one branch over the whole frame; ``n`` (``pos``, ``neg``) side by side, each over
    its own copy of the frame scaled by ``1/n`` (width and height: a square stays square),
    centred in height between black bands. Returns a new array of ``img``'s size."""
    import cv2

    h, w = img.shape[:2]
    branches = [b for b in ('pos', 'attn', 'neg') if b in maps]
    if not branches:
        return img
    cols = len(branches)
    width, height = w // cols, h // cols  # each copy [height, width]: the frame's shape
    top = (h - height) // 2
    out = img.copy() if cols == 1 else np.zeros_like(img)
    base = img if cols == 1 else cv2.resize(img, (width, height), interpolation=cv2.INTER_AREA)
    for k, branch in enumerate(branches):
        rel = cv2.resize(maps[branch].astype(np.float32), (width, height), interpolation=cv2.INTER_LINEAR)
        a = (opacity * np.clip(rel, 0, 1))[..., None]
        tint = np.asarray(RELEVANCE_RGB[branch], np.float32)
        out[top : top + height, k * width : (k + 1) * width] = (base * (1 - a) + tint * a).astype(np.uint8)
    return out


def annotate(
    img: np.ndarray,
    t: float,
    top: Sequence[tuple[int, float]],
    strip: np.ndarray,
    duration: float,
    layout: Layout,
    names: Optional[Sequence[str]] = None,
    relevance: Optional[dict[str, np.ndarray]] = None,
) -> np.ndarray:
    """One annotated frame (module docstring): a new array of ``img``'s size."""
    out = blend_relevance(img, relevance) if relevance else img.copy()
    draw_topk(out, top, names, layout)
    draw_strip(out, strip, t, duration, layout)
    return out
