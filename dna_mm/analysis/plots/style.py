"""The look every figure of :mod:`dna_mm.analysis.plots` shares: palette, line styles, panels,
the one legend below them, error bars and the PNG.

Figures are :class:`matplotlib.figure.Figure` objects, not pyplot's: nothing here selects or
changes matplotlib's backend, and :func:`save` writes the PNG with the Agg renderer whatever
backend the importing program uses.
"""

from __future__ import annotations

import math
import textwrap
from typing import Optional, Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

#: Okabe & Ito (2008), distinguishable under the common colour-vision deficiencies
COLORS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000', '#F0E442']
#: (line style, marker) of each measured map: the branches of a two-branch attention, the map
#: of a single-map attention and the map a two-branch attention applies
BRANCH_STYLE = {'pos': ('-', 'o'), 'neg': ('--', 's'), 'attn': (':', '^'), 'combined': ('-.', 'D')}
BRANCH_NAMES = {
    'pos': 'positive branch (DnA softmax(Q+Kᵀ), Diff A1)',
    'neg': 'negative branch (DnA softmin(Q−Kᵀ), Diff A2)',
    'attn': 'single map (one-map members: softmax, Cog, gated, sigmoid, …)',
    'combined': 'combined A+ + c·A− (DnA c = α, Diff c = −λ)',
}
DPI = 130


def color(i: int) -> str:
    """The colour of run (or method) ``i``."""
    return COLORS[i % len(COLORS)]


def figure(width: float, height: float) -> Figure:
    """A figure of ``width`` × ``height`` inches, outside pyplot."""
    return Figure(figsize=(width, height))


def grid(n: int, width: float = 4.2, height: float = 3.3, rows: int = 1, sharey: bool = True, **kwargs):
    """``(figure, axes [rows, n])``: ``n`` panels of ``width`` × ``height`` per row."""
    fig = figure(max(width * n, 5.0), height * rows)
    return fig, fig.subplots(rows, n, squeeze=False, sharey=sharey, **kwargs)


def save(fig: Figure, path: str, note: Optional[str] = None, note_top: float = 0.0) -> str:
    """The note (if any) centred under ``note_top`` (figure fraction), then the PNG."""
    if note:
        fill = textwrap.fill(note, int(fig.get_figwidth() * 15))
        fig.text(0.5, note_top, fill, ha='center', va='top', fontsize=7.5)
    fig.savefig(path, dpi=DPI, bbox_inches='tight')
    return path


def finish(fig: Figure, path: str, title: str, handles: Sequence, note: Optional[str] = None) -> str:
    """Title above, one legend in balanced columns (and an optional note) below the panels."""
    width = fig.get_figwidth()
    fig.suptitle(textwrap.fill(title, int(width * 12)), fontsize=10.5)
    fig.tight_layout()
    bottom = 0.0
    if handles:
        rows = math.ceil(len(handles) / max(1, int(width // 2.4)))
        ncol = math.ceil(len(handles) / rows)
        legend = dict(loc='upper center', bbox_to_anchor=(0.5, 0.0), fontsize=8, frameon=False)
        fig.legend(handles=handles, ncol=ncol, **legend)
        bottom = -0.03 - 0.055 * math.ceil(len(handles) / ncol) * (3.3 / fig.get_figheight())
    return save(fig, path, note, bottom - 0.02)


def color_handles(labels: Sequence[str], indices: Optional[Sequence[int]] = None) -> list:
    """One legend entry per run (or method), in its colour: that of its index in ``indices``
    (default ``0, 1, …``: the runs drawn are all the runs)."""
    indices = range(len(labels)) if indices is None else indices
    return [
        Line2D([], [], color=color(i), lw=2.2, label=label) for i, label in zip(indices, labels, strict=True)
    ]


def style_handle(label: str, ls='-', color: str = '0.25', **kwargs) -> Line2D:
    """A legend entry for a line style (not a run)."""
    return Line2D([], [], color=color, ls=ls, label=label, **kwargs)


def branch_handles(branches: Sequence[str]) -> list:
    """The legend entries of ``branches``' line styles, in :data:`BRANCH_STYLE`'s order."""
    return [
        style_handle(BRANCH_NAMES[b], BRANCH_STYLE[b][0], marker=BRANCH_STYLE[b][1], ms=4)
        for b in BRANCH_STYLE
        if b in branches
    ]


def group_title(group: str) -> str:
    """``'temporal attention'`` / ``'spatial attention'``; another group as it is named."""
    return f'{group} attention' if group in ('temporal', 'spatial') else group


def panel(
    ax,
    title: str,
    ylabel: Optional[str],
    ticks: Optional[Sequence[int]],
    xlabel: str = 'layer (block index)',
    grid: str = 'both',
) -> None:
    """Title, axis labels, grid and x ticks of one panel."""
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9.5)
    ax.grid(alpha=0.3, axis=grid)
    if ticks:
        ax.set_xticks(sorted(set(ticks)))


def line(ax, x: Sequence, y: Sequence, i: int, ls='-', marker: str = 'o', ms: float = 3.5, **kwargs) -> None:
    """One run's line (colour ``i``) with markers."""
    ax.plot(x, y, ls, marker=marker, ms=ms, color=color(i), **kwargs)


def error_bars(
    ax, x: Sequence, stats: Sequence[dict], i: int, ls='-', marker: str = 'o', ms: float = 3.5
) -> None:
    """One method's line (colour ``i``) through ``stats``' means, ± their ``std`` (none for
    one seed) as capped error bars."""
    ax.errorbar(
        x,
        [s['mean'] for s in stats],
        yerr=[s['std'] or 0 for s in stats],
        fmt=ls,
        marker=marker,
        ms=ms,
        capsize=2.5,
        color=color(i),
    )
