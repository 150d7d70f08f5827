"""The look every figure of :mod:`dna_mm.analysis.plots` shares: palette, line styles, panels,
the one legend below them, error bars and the PNG.

Colour = the run's attention member, the same on every figure (the analyses', the study's): a
known member has its own colour (:data:`MEMBER_COLORS`) wherever it is drawn; a run of another
member, or a second run of one in the same figure, takes the next colour no known member has
(:func:`run_colors`).

Figures are :class:`matplotlib.figure.Figure` objects, not pyplot's: nothing here selects or
changes matplotlib's backend, and :func:`save` writes the PNG with the Agg renderer whatever
backend the importing program uses.
"""

from __future__ import annotations

import colorsys
import itertools
import math
import textwrap
from typing import Optional, Sequence

from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

#: the palette, distinguishable under the common colour-vision deficiencies: Okabe & Ito (2008)
#: (their yellow last: faint on white), then Tol's muted (2021); past its end :func:`color`
#: makes more
COLORS = [
    *('#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000'),
    *('#332288', '#88CCEE', '#44AA99', '#117733', '#999933', '#DDCC77', '#CC6677', '#882255', '#AA4499'),
    '#F0E442',
]
#: each known member's colour, by its method (as the study's ``--methods`` names it): a gate
#: takes its member's lighter tone, DnA's variants cool colours of their own
MEMBER_COLORS = {
    'dna': '#0072B2',  # blue
    'softmax': '#D55E00',  # vermillion
    'diff': '#CC79A7',  # reddish purple
    'gated': '#E69F00',  # orange: softmax + gate
    'dna+gated': '#56B4E9',  # sky blue: DnA + gate
    'sigmoid': '#999933',  # olive
    'cog': '#882255',  # wine
    'dna:apm': '#332288',  # indigo
    'dna:apm_alpha': '#88CCEE',  # cyan
    'dna:qpm_v': '#44AA99',  # teal
    'dna:q_vpm': '#AA4499',  # purple
}
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
    """The palette's colour ``i``: :data:`COLORS`, then hues a golden angle apart (never two alike)."""
    if i < len(COLORS):
        return COLORS[i]
    return to_hex(colorsys.hls_to_rgb((0.1 + 0.381966 * (i - len(COLORS))) % 1.0, 0.4, 0.7))


def member_colors() -> dict[str, str]:
    """:data:`MEMBER_COLORS` by method and by the label figures give each member
    (:func:`~.study.method_label`: ``'DnA (Q±V±)'``, ``'gated softmax'``)."""
    from .study import method_label  # (the study's figures import this module)

    return {**MEMBER_COLORS, **{method_label(m): c for m, c in MEMBER_COLORS.items()}}


def run_colors(members: Sequence[str]) -> list[str]:
    """The colour of each run of a figure, by its member (a method or a member's label,
    :func:`member_colors`): a known member's own colour for its first run; every other run (of a
    member not known here, a label that names none, or a second run of one member) the next
    palette colour (:func:`color`) no known member has, in the order given. No two runs share
    a colour, and none takes a known member's."""
    known = member_colors()
    reserved = set(known.values())
    free = (c for c in map(color, itertools.count()) if c not in reserved)
    colors: list[str] = []
    for member in members:
        own = known.get(member)
        colors.append(own if own is not None and own not in colors else next(free))
    return colors


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


def color_handles(labels: Sequence[str], colors: Optional[Sequence[str]] = None) -> list:
    """One legend entry per run (or method) in its colour: ``colors``, by default the labels'
    own (:func:`run_colors`: labels that name members, as the study's do)."""
    colors = run_colors(labels) if colors is None else colors
    return [Line2D([], [], color=c, lw=2.2, label=label) for c, label in zip(colors, labels, strict=True)]


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


def line(
    ax, x: Sequence, y: Sequence, color: str, ls='-', marker: str = 'o', ms: float = 3.5, **kwargs
) -> None:
    """One run's line, in its colour, with markers."""
    ax.plot(x, y, ls, marker=marker, ms=ms, color=color, **kwargs)


def error_bars(
    ax, x: Sequence, stats: Sequence[dict], color: str, ls='-', marker: str = 'o', ms: float = 3.5
) -> None:
    """One method's line, in its colour, through ``stats``' means, ± their ``std`` (none for
    one seed) as capped error bars."""
    ax.errorbar(
        x,
        [s['mean'] for s in stats],
        yerr=[s['std'] or 0 for s in stats],
        fmt=ls,
        marker=marker,
        ms=ms,
        capsize=2.5,
        color=color,
    )
