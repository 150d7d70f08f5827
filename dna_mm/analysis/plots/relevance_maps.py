"""The relevance figure (``tools/analysis/relevance_maps.py``): the input frames and, one row
per branch, the relevance (:mod:`dna_mm.analysis.relevance`) over each frame in grey."""

from __future__ import annotations

import textwrap
from typing import Optional, Sequence

import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LinearSegmentedColormap, ListedColormap, Normalize

from .style import figure, save

#: overlay colour maps: light → saturated Okabe–Ito orange (positive) and blue (negative)
_ORANGE = LinearSegmentedColormap.from_list('relevance_pos', ['#FFE6B3', '#E69F00', '#D55E00'])
RELEVANCE_CMAPS = {
    'pos': _ORANGE,
    'attn': _ORANGE,
    'neg': LinearSegmentedColormap.from_list('relevance_neg', ['#CCE9FA', '#56B4E9', '#0072B2']),
}
RELEVANCE_ROWS = {'pos': 'positive branch', 'attn': 'relevance', 'neg': 'negative branch'}


def _as_drawn(cmap, background: float = 0.4, opacity: float = 0.9) -> ListedColormap:
    """``cmap`` composited as the overlay draws it (opacity ``opacity · r``) over a mid grey,
    for the colour bar."""
    r = np.linspace(0, 1, 256)[:, None]
    rgb = (1 - opacity * r) * background + opacity * r * cmap(r[:, 0])[:, :3]
    return ListedColormap(rgb)


def _grey(frame: np.ndarray) -> np.ndarray:
    """RGB ``[H, W, 3]`` in ``[0, 1]`` → luminance squeezed into ``[0.15, 0.65]`` (the overlay's
    light and saturated ends both stand out from it)."""
    return 0.15 + 0.5 * (frame @ np.array([0.299, 0.587, 0.114]))


def plot_relevance(
    frames: np.ndarray,
    maps: dict[str, np.ndarray],
    path: str,
    title: str,
    frame_indices: Optional[Sequence[int]] = None,
    note: Optional[str] = None,
) -> str:
    """Input frames and, one row per branch, the relevance over the frame in grey.

    The overlay's colour and opacity both follow the relevance (0: clear, 1: opaque saturated
    orange for the positive branch / blue for the negative one, a colour-blind-safe pair, on a
    grey frame so no colour of the input competes); a contour marks relevance 0.5; one colour bar
    per row.

    Args:
        frames: ``[T, H, W, 3]`` in ``[0, 1]`` (``T = 1`` for an image).
        maps: Chain (``'pos'``, ``'neg'``, ``'attn'``) → ``[T, H, W]`` in ``[0, 1]``.
        path: PNG to write.
        title: Figure title.
        frame_indices: Source-video index of each frame (column titles); default ``0..T-1``.
        note: Text under the figure (e.g. the normalisation).
    """
    chains = [c for c in ('pos', 'attn', 'neg') if c in maps]
    t = frames.shape[0]
    idx = list(range(t) if frame_indices is None else frame_indices)
    cell = 1.6 if t > 1 else 2.6
    fig = figure(cell * t + 0.9, cell * (1 + len(chains)) + 0.3)
    axes = fig.subplots(
        1 + len(chains),
        t + 1,
        squeeze=False,
        gridspec_kw=dict(width_ratios=[1] * t + [0.07], wspace=0.04, hspace=0.08),
    )
    norm = Normalize(0, 1)
    for r, chain in enumerate([None, *chains]):
        for f in range(t):
            ax = axes[r][f]
            if chain is None:
                ax.imshow(frames[f], interpolation='nearest')
            else:
                rel = np.clip(maps[chain][f], 0, 1)
                ax.imshow(_grey(frames[f]), cmap='gray', vmin=0, vmax=1, interpolation='nearest')
                rgba = RELEVANCE_CMAPS[chain](norm(rel))
                rgba[..., 3] = 0.9 * rel
                ax.imshow(rgba, interpolation='bilinear')
                if rel.max() > 0.5 > rel.min():
                    ax.contour(rel, levels=[0.5], colors=['white'], linewidths=0.7)
            ax.set(xticks=[], yticks=[])
            if f == 0:
                ax.set_ylabel('input' if chain is None else RELEVANCE_ROWS[chain], fontsize=8.5)
            if r == 0 and t > 1:
                ax.set_title(f'frame {idx[f]}', fontsize=8)
        cax = axes[r][t]
        if chain is None:
            cax.axis('off')
        else:
            cb = fig.colorbar(ScalarMappable(norm, _as_drawn(RELEVANCE_CMAPS[chain])), cax=cax)
            cb.set_ticks([0, 0.5, 1])
            cb.ax.tick_params(labelsize=7)
            cb.set_label('relevance', fontsize=7.5, labelpad=2)
    fig.suptitle(textwrap.fill(title, int(fig.get_figwidth() * 12)), fontsize=10, y=0.995)
    return save(fig, path, note, 0.08)
