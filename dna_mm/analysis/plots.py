"""Figures of the analyses (matplotlib, Agg): one figure per analysis, layers on x, one panel per
attention of a block (a TimeSformer's temporal and spatial attentions side by side), every
compared run in the same figure.

Each ``plot_*`` takes a list of reports (:func:`~.report.analyze`, one per checkpoint) and a
path, writes a PNG and returns the path (``None`` when no report has that analysis).

Conventions, the same in every figure:

* colour = the run (Okabe–Ito colour-blind-safe palette); line style = the branch: the
  positive branch solid, the negative branch dashed, single-map attentions dotted;
* one legend for the figure, below the panels (runs, then branch styles), never over the data;
* panels of one quantity share their y axis, and the axis is anchored where the quantity has
  a meaning: α on a scale holding 0 (no negative branch), 1 and its 0.5 initialisation; entropy
  from 0 to the uniform-row maximum ``log N`` (drawn per attention: ``N`` keys differ between a
  temporal and a spatial attention); cosines on ``[-1, 1]``; distances from 0.
"""

from __future__ import annotations

import math
import textwrap
from typing import Optional, Sequence

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap, ListedColormap, Normalize  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from .collector import histogram_quantiles, summed_counts  # noqa: E402
from .report import ALPHA_INIT  # noqa: E402

#: Okabe & Ito (2008), distinguishable under the common colour-vision deficiencies
COLORS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000', '#F0E442']
BRANCH_STYLE = {'pos': ('-', 'o'), 'neg': ('--', 's'), 'attn': (':', '^')}
BRANCH_NAMES = {
    'pos': 'positive branch (DnA softmax(Q+Kᵀ), Diff A1)',
    'neg': 'negative branch (DnA softmin(Q−Kᵀ), Diff A2)',
    'attn': 'single map (softmax, Cog)',
}
#: line style of each attention in the α-spread panel
GROUP_STYLES = ['-', '--', '-.', ':']
DPI = 130


def _color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def _records(reports: Sequence[dict], key: str) -> list[dict]:
    """The records of the analysis ``key`` of every report."""
    return [r for rep in reports for r in rep.get(key) or []]


def _groups(reports: Sequence[dict], key: str) -> list[str]:
    return list(dict.fromkeys(r['group'] for r in _records(reports, key)))


def _layers(reports: Sequence[dict], key: str) -> list[int]:
    return sorted({r['layer'] for r in _records(reports, key)})


def _having(reports: Sequence[dict], key: str) -> list[tuple[int, dict]]:
    """``(colour index, report)`` of the reports that have the analysis ``key``."""
    return [(i, rep) for i, rep in enumerate(reports) if rep.get(key)]


def _axes(n: int, width: float = 4.2, height: float = 3.3, rows: int = 1, sharey: bool = True, **kwargs):
    return plt.subplots(
        rows, n, figsize=(max(width * n, 5.0), height * rows), squeeze=False, sharey=sharey, **kwargs
    )


def _save(fig, path: str, note: Optional[str] = None, note_top: float = 0.0) -> str:
    """The note (if any) centred under ``note_top`` (figure fraction), then the PNG."""
    if note:
        fill = textwrap.fill(note, int(fig.get_figwidth() * 15))
        fig.text(0.5, note_top, fill, ha='center', va='top', fontsize=7.5)
    fig.savefig(path, dpi=DPI, bbox_inches='tight')
    plt.close(fig)
    return path


def _finish(fig, path: str, title: str, handles: Sequence, note: Optional[str] = None) -> str:
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
    return _save(fig, path, note, bottom - 0.02)


def _run_handles(reports: Sequence[dict]) -> list:
    return [Line2D([], [], color=_color(i), lw=2.2, label=rep['label']) for i, rep in enumerate(reports)]


def _style_handle(label: str, ls='-', color: str = '0.25', **kwargs) -> Line2D:
    """A legend entry for a line style (not a run)."""
    return Line2D([], [], color=color, ls=ls, label=label, **kwargs)


def _branch_handles(branches: Sequence[str]) -> list:
    styles = [(BRANCH_STYLE[b], BRANCH_NAMES[b]) for b in ('pos', 'neg', 'attn') if b in branches]
    return [_style_handle(name, ls, marker=mk, ms=4) for (ls, mk), name in styles]


def _title(group: str) -> str:
    return f'{group} attention' if group in ('temporal', 'spatial') else group


def _panel(
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


def _series(records: list[dict], group: str, field: str, branch: Optional[str] = None):
    """``(layers, values of field, records)`` of one attention (and branch), in layer order."""
    rows = sorted(
        (r for r in records if r['group'] == group and (branch is None or r.get('branch') == branch)),
        key=lambda r: r['layer'],
    )
    return [r['layer'] for r in rows], [r[field] for r in rows], rows


def _line(ax, x: Sequence, y: Sequence, i: int, ls='-', marker: str = 'o', ms: float = 3.5, **kwargs) -> None:
    """One run's line (colour ``i``) with markers."""
    ax.plot(x, y, ls, marker=marker, ms=ms, color=_color(i), **kwargs)


# -- α -------------------------------------------------------------------------------------------
def plot_alpha(reports: Sequence[dict], path: str) -> Optional[str]:
    """DnA's α per layer: the mean over heads (line) and the min–max over heads (band), one panel
    per attention on one shared scale holding 0, 1 and the initial value; the spread over heads
    (std) in its own panel, from 0."""
    groups = _groups(reports, 'alpha')
    if not groups:
        return None
    have = _having(reports, 'alpha')
    recs = _records(reports, 'alpha')
    fig, axes = _axes(
        len(groups) + 1, 4.0, sharey=False, gridspec_kw=dict(width_ratios=[1.0] * len(groups) + [0.8])
    )
    *panels, spread = axes[0]
    layers = _layers(reports, 'alpha')
    inits = {r.get('init', ALPHA_INIT) for r in recs}
    values = [v for r in recs for v in (r['min'], r['max'])] + list(inits)
    lo, hi = min(0.0, *values), max(1.0, *values)
    pad = 0.05 * (hi - lo)
    for ax, group in zip(panels, groups, strict=True):
        for i, rep in have:
            x, mean, rows = _series(rep['alpha'], group, 'mean')
            if x:
                lows, highs = [r['min'] for r in rows], [r['max'] for r in rows]
                ax.fill_between(x, lows, highs, color=_color(i), alpha=0.18, lw=0)
                _line(ax, x, mean, i)
        for init in inits:
            ax.axhline(init, color='0.35', ls=(0, (4, 3)), lw=1)
        ax.axhline(0, color='0.6', lw=0.8)
        ax.set_ylim(lo - pad, hi + pad)
        _panel(ax, _title(group), 'α  (weight of the negative branch)' if ax is panels[0] else None, layers)
        if ax is not panels[0]:
            ax.tick_params(labelleft=False)
    for i, rep in have:
        for j, group in enumerate(groups):
            x, std, _ = _series(rep['alpha'], group, 'std')
            if x:
                _line(spread, x, std, i, GROUP_STYLES[j % 4])
    spread.set_ylim(0, max(0.1, 1.15 * max(r['std'] for r in recs)))
    _panel(spread, 'spread over heads', 'std of α over heads', layers)
    handles = _run_handles([rep for _, rep in have])
    handles += [Patch(color='0.6', alpha=0.35, label='min–max over heads')]
    handles += [_style_handle(f'initial α = {", ".join(f"{v:g}" for v in inits)}', (0, (4, 3)), '0.35')]
    if len(groups) > 1:
        handles += [_style_handle(f'std: {g}', GROUP_STYLES[j % 4]) for j, g in enumerate(groups)]
    return _finish(
        fig, path, 'DnA mixing weight α per layer: mean over heads (line), min–max over heads (band)', handles
    )


# -- entropy and head distance ---------------------------------------------------------------------
def _per_branch(
    reports: Sequence[dict], key: str, field: str, ylabel: str, faint: Optional[str] = None
) -> tuple:
    """Panels per group, a line per (run, branch); returns (fig, axes, groups, legend handles)."""
    groups = _groups(reports, key)
    fig, (axes,) = _axes(len(groups))
    layers = _layers(reports, key)
    branches: list[str] = []
    for ax, group in zip(axes, groups, strict=True):
        for i, rep in enumerate(reports):
            for branch in ('pos', 'neg', 'attn'):
                x, y, rows = _series(rep.get(key) or [], group, field, branch)
                if not x:
                    continue
                if branch not in branches:
                    branches.append(branch)
                ls, mk = BRANCH_STYLE[branch]
                _line(ax, x, y, i, ls, mk)
                if faint:
                    _line(ax, x, [r[faint] for r in rows], i, ls, mk, ms=2.5, alpha=0.35)
        _panel(ax, _title(group), ylabel if ax is axes[0] else None, layers)
    return fig, axes, groups, _run_handles(reports) + _branch_handles(branches)


def plot_entropy(reports: Sequence[dict], path: str) -> Optional[str]:
    """Mean row entropy per layer and branch (strong lines) and the mean of the top-k % rows
    (faint), with each attention's maximum ``log N`` (uniform rows over its ``N`` keys)."""
    recs = _records(reports, 'entropy')
    if not recs:
        return None
    fig, axes, groups, handles = _per_branch(reports, 'entropy', 'mean', 'row entropy (nats)', 'top_k_mean')
    top = max(r[f] for r in recs for f in ('mean', 'top_k_mean'))
    for ax, group in zip(axes, groups, strict=True):
        n = max(r.get('num_keys') or 0 for r in recs if r['group'] == group)  # the largest N seen
        if n:
            log_n = math.log(n)
            ax.axhline(log_n, color='0.45', ls='-', lw=1.0)
            ax.annotate(
                f'uniform: log {n} = {log_n:.2f}',
                (0.02, log_n),
                xycoords=('axes fraction', 'data'),
                xytext=(0, 3),
                textcoords='offset points',
                fontsize=7.5,
                color='0.3',
            )
            top = max(top, log_n)
    axes[0].set_ylim(0, top * 1.12)
    k = recs[0]['top_k_percent']
    handles.append(_style_handle(f'faint: the {k:g} % highest-entropy rows', color='0.5', alpha=0.5, lw=1.5))
    handles.append(_style_handle('maximum: uniform rows over the N keys', color='0.45', lw=1.0))
    return _finish(fig, path, 'Attention entropy per layer: mean over rows, heads and samples', handles)


def plot_redundancy(reports: Sequence[dict], path: str) -> Optional[str]:
    """Head redundancy, drawn as the distance it is computed from: the mean pairwise distance
    ``Δ = 1 − cos(vec A_i, vec A_j)`` between the heads' maps, per layer and branch (0: all heads
    attend alike, i.e. fully redundant; higher: more diverse heads)."""
    recs = _records(reports, 'redundancy')
    if not recs:
        return None
    fig, axes, _, handles = _per_branch(reports, 'redundancy', 'mean', 'Δ (mean 1 − cos over head pairs)')
    axes[0].set_ylim(0, max(1.0, 1.05 * max(r['mean'] for r in recs)))
    return _finish(
        fig,
        path,
        'Head redundancy as a distance: Δ = 1 − cos between two heads\' attention maps, mean over head '
        'pairs (0 = identical heads; higher = less redundant)',
        handles,
    )


# -- C(V+, V-) and branch cosine ----------------------------------------------------------------
def _boxes(ax, reports: Sequence[dict], key: str, group: str) -> list[int]:
    """Per layer and run: 5–95 % whisker, interquartile bar, median tick, mean dot."""
    have = _having(reports, key)
    width = 0.7 / max(1, len(have))
    drawn = []
    for slot, (i, rep) in enumerate(have):
        for rec in sorted((r for r in rep[key] if r['group'] == group), key=lambda r: r['layer']):
            h = rec['histogram']
            q05, q25, q50, q75, q95 = histogram_quantiles(
                h['counts'], h['edges'], (0.05, 0.25, 0.5, 0.75, 0.95)
            )
            x = rec['layer'] + (slot - (len(have) - 1) / 2) * width
            c = _color(i)
            ax.vlines(x, q05, q95, color=c, lw=1.0)
            ax.bar(x, q75 - q25, width * 0.8, bottom=q25, color=c, alpha=0.35, edgecolor=c, lw=1)
            ax.hlines(q50, x - width * 0.4, x + width * 0.4, color=c, lw=2)
            ax.plot(x, rec['mean'], 'o', ms=3.5, color='white', mec=c, mew=1.2)
            drawn.append(rec['layer'])
    return drawn


def plot_cvv(reports: Sequence[dict], path: str) -> Optional[str]:
    """Distribution per layer and attention of C(V+, V−) (DnA's value subspaces; top row) and
    of the cosine of the two branches' outputs (DnA, Diff; bottom row), over samples × heads."""
    rows = [k for k in ('cvv', 'branch_cosine') if _records(reports, k)]
    if not rows:
        return None
    groups = list(dict.fromkeys(g for k in rows for g in _groups(reports, k)))
    fig, axes = _axes(len(groups), 4.2, 3.0, rows=len(rows))
    names = {
        'cvv': ('C(V+, V−) = ⟨V+, V−⟩_F / (‖V+‖ ‖V−‖)', 'value subspaces'),
        'branch_cosine': ('cos(branch₁ output, branch₂ output)', 'branch outputs'),
    }
    for r, key in enumerate(rows):
        for c, group in enumerate(groups):
            ax = axes[r][c]
            layers = _boxes(ax, reports, key, group)
            ax.axhline(0, color='0.5', lw=0.8)
            ax.set_ylim(-1.05, 1.05)
            _panel(ax, f'{names[key][1]}, {group}' if group != 'attn' else names[key][1], None, layers)
            if c == 0:
                ax.set_ylabel(names[key][0], fontsize=8.5)
            if r < len(rows) - 1:
                ax.set_xlabel('')
    handles = []
    for i, rep in enumerate(reports):
        s = rep.get('summary') or {}
        parts = [
            f"{'C' if k == 'cvv' else 'cos'} mean {s[k]['mean']:.2f}, median {s[k]['median']:.2f}"
            for k in rows
            if k in s
        ]
        if parts:
            handles.append(
                Patch(facecolor=_color(i), alpha=0.6, label=f"{rep['label']} ({'; '.join(parts)})")
            )
    return _finish(
        fig,
        path,
        'Similarity of the two branches per layer (distribution over samples × heads)',
        handles,
        'Bar: interquartile range; whisker: 5–95 %; tick: median; dot: mean (quantiles from 400-bin '
        'histograms on [−1, 1]). Temporal: one value per (clip, patch, head); '
        'spatial: per (clip, frame, head).',
    )


# -- intruders -----------------------------------------------------------------------------------
def plot_intruders(reports: Sequence[dict], path: str) -> Optional[str]:
    """Histogram of intruder-dimension counts per attention (samples × heads × layers), bars per run."""
    have = _having(reports, 'intruders')
    if not have:
        return None
    groups = _groups(reports, 'intruders')
    fig, (axes,) = _axes(len(groups), 4.4, 3.2)
    width = 0.8 / len(have)
    for ax, group in zip(axes, groups, strict=True):
        last = 1  # the highest count drawn (at least 1)
        for slot, (i, rep) in enumerate(have):
            recs = [r for r in rep['intruders'] if r['group'] == group]
            if not recs:
                continue
            hist = summed_counts(r['histogram'] for r in recs).double().numpy()
            last = max(last, int(np.flatnonzero(hist).max(initial=0)))
            x = np.arange(len(hist)) + (slot - (len(have) - 1) / 2) * width
            ax.bar(x, hist / hist.sum(), width, color=_color(i))
        ax.set_xlim(-0.6, last + 0.6)
        ax.set_ylim(0, 1)
        ylabel = 'fraction of (sample, head, layer)' if ax is axes[0] else None
        _panel(ax, _title(group), ylabel, range(last + 1), 'intruder dimensions', grid='y')
    handles = [
        Patch(
            color=_color(i),
            label=f"{rep['label']} (all attentions: mean {rep['summary']['intruders']['mean']:.2f}, "
            f"mode {rep['summary']['intruders']['mode']})",
        )
        for i, rep in have
    ]
    rec0 = have[0][1]['intruders'][0]
    return _finish(
        fig,
        path,
        f"Intruder dimensions per attention: top-{rec0['k']} positive-branch singular vectors with "
        f"|cos| < {rec0['eps']:.2f} to all negative-branch ones",
        handles,
        'k is clipped to min(tokens, head dim) of the attention; with few tokens the two top-k '
        'subspaces must overlap.',
    )


# -- robustness ----------------------------------------------------------------------------------
def plot_robustness(reports: Sequence[dict], path: str) -> Optional[str]:
    """Token distance within a clip per layer (mean ``1 − cos`` between its patch tokens), clean
    (solid) and with Gaussian input noise (dashed), a panel per σ; top-1 against σ beside them."""
    have = _having(reports, 'robustness')
    if not have:
        return None
    entries = _records(reports, 'robustness')
    sigmas = sorted({e['sigma'] for e in entries if e['sigma'] > 0}) or [0.0]
    with_acc = any(e.get('accuracy') is not None for e in entries)
    fig, (axes,) = _axes(len(sigmas) + with_acc, 3.6, sharey=False)
    layers = [lay['layer'] for e in entries for lay in e['layers']]
    top = max(lay['distance'] for e in entries for lay in e['layers'])
    for ax, sigma in zip(axes, sigmas, strict=False):  # (and the accuracy panel)
        for i, rep in have:
            for e in rep['robustness']:
                if e['sigma'] in (0.0, sigma):
                    x, y = [lay['layer'] for lay in e['layers']], [lay['distance'] for lay in e['layers']]
                    _line(ax, x, y, i, '-' if e['sigma'] == 0 else '--')
        psnrs = [e['psnr'] for e in entries if e['sigma'] == sigma and e.get('psnr') is not None]
        title = f'σ = {sigma:g}' + (f' (PSNR {np.mean(psnrs):.1f} dB)' if psnrs else '')
        _panel(ax, title, None, layers)
        ax.set_ylim(0, top * 1.1)
        if ax is not axes[0]:
            ax.tick_params(labelleft=False)
    axes[0].set_ylabel('token distance within a clip\n(mean 1 − cos between patch tokens)', fontsize=8.5)
    if with_acc:
        for i, rep in have:
            pts = sorted(
                (e['sigma'], 100 * e['accuracy']) for e in rep['robustness'] if e.get('accuracy') is not None
            )
            _line(axes[-1], [p[0] for p in pts], [p[1] for p in pts], i)
        axes[-1].set_ylim(0, 102)
        _panel(axes[-1], 'accuracy on the analysed samples', 'top-1 (%)', None, 'noise σ')
    settings = have[0][1].get('settings') or {}
    space = settings.get('noise_space', 'normalized')
    handles = _run_handles([rep for _, rep in have])
    handles += [_style_handle('clean input'), _style_handle('input + Gaussian noise of std σ', '--')]
    return _finish(
        fig,
        path,
        'Representational robustness: how far apart the patch tokens of one clip stay, clean vs noisy',
        handles,
        f'Tokens centred per token over the channels ({settings.get("center", "feature")}); σ in '
        f'{"normalised-input" if space == "normalized" else "pixel-range"} units; PSNR on raw pixels. '
        'Higher distance = tokens less collapsed onto each other.',
    )


PLOTTERS = {
    'alpha': plot_alpha,
    'entropy': plot_entropy,
    'redundancy': plot_redundancy,
    'cvv': plot_cvv,
    'intruders': plot_intruders,
    'robustness': plot_robustness,
}


# -- relevance -----------------------------------------------------------------------------------
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
    fig, axes = plt.subplots(
        1 + len(chains),
        t + 1,
        figsize=(cell * t + 0.9, cell * (1 + len(chains)) + 0.3),
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
            cb = fig.colorbar(plt.cm.ScalarMappable(norm, _as_drawn(RELEVANCE_CMAPS[chain])), cax=cax)
            cb.set_ticks([0, 0.5, 1])
            cb.ax.tick_params(labelsize=7)
            cb.set_label('relevance', fontsize=7.5, labelpad=2)
    fig.suptitle(textwrap.fill(title, int(fig.get_figwidth() * 12)), fontsize=10, y=0.995)
    return _save(fig, path, note, 0.08)


# -- the denoising study (tools/analysis/study.py) ------------------------------------------------
#: how the study names its methods in figures and tables
METHOD_NAMES = {'dna': 'DnA (Q±V±)', 'softmax': 'softmax', 'diff': 'Diff', 'cog': 'Cog'}
#: line style of each measured map of the target-mass figure
MASS_STYLE = {'pos': ('-', 'o'), 'neg': ('--', 's'), 'attn': (':', '^'), 'combined': ('-.', 'D')}
MASS_NAMES = {
    'attn': 'single map (softmax, Cog)',
    'combined': 'combined A+ + c·A− (DnA c = α, Diff c = −λ)',
    'pos': 'positive branch (DnA softmax(Q+Kᵀ), Diff A1)',
    'neg': 'negative branch (DnA softmin(Q−Kᵀ), Diff A2)',
}


def _method_handles(methods: Sequence[str]) -> list:
    return [
        Line2D([], [], color=_color(i), lw=2.2, label=METHOD_NAMES.get(m, m)) for i, m in enumerate(methods)
    ]


def _seeds_note(summary: dict) -> str:
    n = len(summary['seeds'])
    return f'mean over {n} seed{"s" if n > 1 else ""}; error bars: ± one standard deviation over the seeds'


#: line style per kind of held-out distractor (``MotionDatasetSpec`` likeness)
LIKENESS_STYLE = {'demo': '-', 'color': '--', 'size': '-.', 'motion': ':'}
LIKENESS_NAMES = {
    'demo': 'distractors as in training',
    'color': "distractors in the target's colour",
    'size': "distractors of the target's size",
    'motion': "distractors moving as targets do",
}


def plot_accuracy_vs_distractors(
    summary: dict, path: str, train_distractors: Optional[int] = None
) -> Optional[str]:
    """Top-1 against the number of distractors of the held-out sets (left) and the share of the
    attention the last layer's spatial class token puts on the target (the map the layer applies;
    right), mean ± std over seeds per method; a line style per kind of distractor."""
    methods = [m for m in summary['methods'] if summary['curve'].get(m)]
    if not methods:
        return None
    fig, (axes,) = _axes(2, 4.6, 3.4, sharey=False)
    acc, mass_ax = axes
    offsets = np.linspace(-0.15, 0.15, len(methods)) if len(methods) > 1 else [0.0]
    likeness = list(dict.fromkeys(e['likeness'] for m in methods for e in summary['curve'][m].values()))
    xs_all: set = set()
    uniform: dict = {}
    tops = [1e-3]
    last = None
    for i, m in enumerate(methods):
        for like in likeness:
            pts = sorted(
                (e['num_distractors'], name, e['top1'])
                for name, e in summary['curve'][m].items()
                if e['likeness'] == like
            )
            if not pts:
                continue
            ls = LIKENESS_STYLE.get(like, '-')
            xs = np.array([p[0] for p in pts], dtype=float)
            xs_all.update(p[0] for p in pts)
            y = [p[2]['mean'] for p in pts]
            acc.errorbar(
                xs + offsets[i],
                y,
                yerr=[p[2]['std'] or 0 for p in pts],
                fmt=ls,
                marker='o',
                ms=3.5,
                capsize=2.5,
                color=_color(i),
            )
            rows = []
            for n, name, _ in pts:
                recs = [
                    r
                    for r in summary['mass'][m].get(name, [])
                    if r['region'] == 'target'
                    and r['branch'] in ('attn', 'combined')
                    and r['group'] == 'spatial'
                ] or [
                    r
                    for r in summary['mass'][m].get(name, [])
                    if r['region'] == 'target' and r['branch'] in ('attn', 'combined')
                ]
                if recs:
                    top = max(recs, key=lambda r: r['layer'])
                    last = (top['layer'], top['group'])
                    rows.append((n, top))
                    uniform.setdefault((like, n), []).append(top['uniform'])
                    tops.append(top['mean'] + (top['std'] or 0))
            if rows:
                mass_ax.errorbar(
                    np.array([r[0] for r in rows], dtype=float) + offsets[i],
                    [r[1]['mean'] for r in rows],
                    yerr=[r[1]['std'] or 0 for r in rows],
                    fmt=ls,
                    marker='o',
                    ms=3.5,
                    capsize=2.5,
                    color=_color(i),
                )
    ticks = sorted(xs_all)
    acc.axhline(100 / 4, color='0.45', ls=(0, (4, 3)), lw=1)
    acc.set_ylim(0, 102)
    _panel(acc, 'accuracy on held-out sets', 'top-1 (%)', ticks, 'distractors per clip')
    handles = _method_handles(methods)
    if len(likeness) > 1 or likeness != ['demo']:
        handles += [_style_handle(LIKENESS_NAMES.get(k, k), LIKENESS_STYLE.get(k, '-')) for k in likeness]
    handles.append(_style_handle('chance (4 classes)', (0, (4, 3)), '0.45'))
    if uniform:
        ns = sorted({n for _, n in uniform})
        level = [float(np.mean([u for (_, n2), v in uniform.items() if n2 == n for u in v])) for n in ns]
        mass_ax.plot(ns, level, color='0.45', ls=(0, (1, 2)), lw=1.2)
        tops += level
        handles.append(_style_handle('uniform attention over the patches', (0, (1, 2)), '0.45'))
    mass_ax.set_ylim(0, min(1.0, 1.15 * max(tops)))
    title = f'layer {last[0]}, {_title(last[1])}: class token on the target' if last else 'target mass'
    _panel(mass_ax, title, 'share of attention on the target', ticks, 'distractors per clip')
    if train_distractors is not None:
        for ax in axes:
            ax.axvline(train_distractors, color='0.6', lw=0.9, ls='-')
        handles.append(_style_handle(f'training set: {train_distractors} distractors', '-', '0.6'))
    return _finish(
        fig,
        path,
        'Robustness to distractors: models trained with few distractors, tested with more',
        handles,
        _seeds_note(summary) + '. Right: the map the layer applies (softmax / Cog map, DnA / Diff '
        'combined map).',
    )


def plot_target_mass(summary: dict, path: str, set_name: str) -> Optional[str]:
    """Per layer and attention (columns), the share of the query's attention on the target's
    patches: the map each layer applies (top), each branch of the two-branch attentions
    (middle), and the share on the distractors' patches (bottom); mean ± std over seeds, the
    uniform-attention level drawn in grey."""
    methods = [m for m in summary['methods'] if summary['mass'].get(m, {}).get(set_name)]
    if not methods:
        return None
    recs = {m: summary['mass'][m][set_name] for m in methods}
    groups = list(dict.fromkeys(r['group'] for m in methods for r in recs[m]))
    rows = [
        ('target', ('attn', 'combined'), 'on the target: the map applied'),
        ('target', ('pos', 'neg'), 'on the target: each branch'),
        ('distractors', ('attn', 'combined'), 'on the distractors: the map applied'),
    ]
    rows = [
        r for r in rows if any(x['region'] == r[0] and x['branch'] in r[1] for m in methods for x in recs[m])
    ]
    fig, axes = _axes(len(groups), 4.4, 2.9, rows=len(rows))
    layers = sorted({r['layer'] for m in methods for r in recs[m]})
    offsets = np.linspace(-0.15, 0.15, len(methods) * 2) if len(methods) > 1 else [0.0, 0.05]
    top = max(r['mean'] + (r['std'] or 0) for m in methods for r in recs[m])
    top = max(top, max(r['uniform'] for m in methods for r in recs[m]))
    used: list[str] = []
    for row, (region, branches, label) in enumerate(rows):
        for col, group in enumerate(groups):
            ax = axes[row][col]
            uniform = [
                r['uniform']
                for m in methods
                for r in recs[m]
                if r['group'] == group and r['region'] == region
            ]
            if uniform:
                ax.axhline(float(np.mean(uniform)), color='0.45', ls=(0, (1, 2)), lw=1.2)
            for i, m in enumerate(methods):
                for j, branch in enumerate(branches):
                    sel = sorted(
                        (
                            r
                            for r in recs[m]
                            if r['group'] == group and r['region'] == region and r['branch'] == branch
                        ),
                        key=lambda r: r['layer'],
                    )
                    if not sel:
                        continue
                    if branch not in used:
                        used.append(branch)
                    ls, mk = MASS_STYLE[branch]
                    ax.errorbar(
                        np.array([r['layer'] for r in sel]) + offsets[(2 * i + j) % len(offsets)],
                        [r['mean'] for r in sel],
                        yerr=[r['std'] or 0 for r in sel],
                        fmt=ls,
                        marker=mk,
                        ms=3.5,
                        capsize=2.5,
                        color=_color(i),
                    )
            ax.set_ylim(0, min(1.0, 1.12 * top))
            title = f'{_title(group)}: {label}'
            _panel(ax, title, 'share of attention' if col == 0 else None, layers)
            if row < len(rows) - 1:
                ax.set_xlabel('')
    handles = _method_handles(methods)
    handles += [
        _style_handle(MASS_NAMES[b], MASS_STYLE[b][0], marker=MASS_STYLE[b][1], ms=4)
        for b in MASS_STYLE
        if b in used
    ]
    handles.append(_style_handle('uniform attention over the patches (chance)', (0, (1, 2)), '0.45'))
    return _finish(
        fig,
        path,
        f'Attention on the target ({set_name}): Σ |a| over the target\'s patches / Σ |a| over all patches',
        handles,
        _seeds_note(summary) + '. Spatial: the class token\'s row, per frame; temporal (no class token): '
        'the mean row of each patch\'s sequence over the frames.',
    )
