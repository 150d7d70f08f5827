"""Figures of the analyses (:func:`~dna_mm.analysis.report.analyze`): one figure per analysis,
layers on x, one panel per attention of a block (a TimeSformer's temporal and spatial attentions
side by side), every compared run in the same figure.

Each ``plot_*`` takes a list of reports (one per checkpoint) and a path, writes a PNG and
returns the path (``None`` when no report has that analysis); :data:`PLOTTERS` names them.

Conventions, the same in every figure (:mod:`.style`):

* colour = the run's attention member (the report's ``member``, else its ``label``), the same
  on every figure (:func:`.style.run_colors`: a colour-blind-safe palette); line style = the
  branch: the positive branch solid, the negative branch dashed, single-map attentions dotted;
* one legend for the figure, below the panels (runs, then branch styles), never over the data;
* panels of one quantity share their y axis, and the axis is anchored where the quantity has
  a meaning: α on a scale holding 0 (no negative branch), 1 and its 0.5 initialisation; entropy
  from 0 to the uniform-row maximum ``log N`` (drawn per attention: ``N`` keys differ between a
  temporal and a spatial attention); cosines on ``[-1, 1]``; distances from 0.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from matplotlib.patches import Patch

from ..collector import histogram_quantiles, summed_counts
from ..report import ALPHA_INIT
from .study import method_label
from .style import (
    BRANCH_STYLE,
    branch_handles,
    color_handles,
    finish,
    grid,
    group_title,
    line,
    panel,
    run_colors,
    style_handle,
)

#: line style of each attention in the α-spread panel
GROUP_STYLES = ['-', '--', '-.', ':']


def _records(reports: Sequence[dict], key: str) -> list[dict]:
    """The records of the analysis ``key`` of every report."""
    return [r for rep in reports for r in rep.get(key) or []]


def _groups(reports: Sequence[dict], key: str) -> list[str]:
    return list(dict.fromkeys(r['group'] for r in _records(reports, key)))


def _layers(reports: Sequence[dict], key: str) -> list[int]:
    return sorted({r['layer'] for r in _records(reports, key)})


def _member(report: dict) -> str:
    """What a run is coloured by: its attention member (``member``, a study method) as the study
    names it (:func:`.study.method_label`); a run without one (of mixed members, or an earlier
    release's report) by its ``label``."""
    return method_label(report['member']) if report.get('member') else report['label']


def _colored(reports: Sequence[dict]) -> list[tuple[str, dict]]:
    """``(colour, report)`` of every report: its member's (:func:`_member`), among all the
    reports (:func:`.style.run_colors`)."""
    return list(zip(run_colors([_member(rep) for rep in reports]), reports, strict=True))


def _having(reports: Sequence[dict], key: str) -> list[tuple[str, dict]]:
    """``(colour, report)`` of the reports that have the analysis ``key`` (a run left out of a
    figure leaves the others' colours as they are)."""
    return [(c, rep) for c, rep in _colored(reports) if rep.get(key)]


def _run_handles(runs: Sequence[tuple[str, dict]]) -> list:
    """A legend entry per ``(colour, report)``, in the colour its lines are drawn in."""
    return color_handles([rep['label'] for _, rep in runs], [c for c, _ in runs])


def _series(records: list[dict], group: str, field: str, branch: Optional[str] = None):
    """``(layers, values of field, records)`` of one attention (and branch), in layer order."""
    rows = sorted(
        (r for r in records if r['group'] == group and (branch is None or r.get('branch') == branch)),
        key=lambda r: r['layer'],
    )
    return [r['layer'] for r in rows], [r[field] for r in rows], rows


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
    fig, axes = grid(
        len(groups) + 1, 4.0, sharey=False, gridspec_kw=dict(width_ratios=[1.0] * len(groups) + [0.8])
    )
    *panels, spread = axes[0]
    layers = _layers(reports, 'alpha')
    inits = {r.get('init', ALPHA_INIT) for r in recs}
    values = [v for r in recs for v in (r['min'], r['max'])] + list(inits)
    lo, hi = min(0.0, *values), max(1.0, *values)
    pad = 0.05 * (hi - lo)
    for ax, group in zip(panels, groups, strict=True):
        for c, rep in have:
            x, mean, rows = _series(rep['alpha'], group, 'mean')
            if x:
                lows, highs = [r['min'] for r in rows], [r['max'] for r in rows]
                ax.fill_between(x, lows, highs, color=c, alpha=0.18, lw=0)
                line(ax, x, mean, c)
        for init in inits:
            ax.axhline(init, color='0.35', ls=(0, (4, 3)), lw=1)
        ax.axhline(0, color='0.6', lw=0.8)
        ax.set_ylim(lo - pad, hi + pad)
        panel(
            ax, group_title(group), 'α  (weight of the negative branch)' if ax is panels[0] else None, layers
        )
        if ax is not panels[0]:
            ax.tick_params(labelleft=False)
    for c, rep in have:
        for j, group in enumerate(groups):
            x, std, _ = _series(rep['alpha'], group, 'std')
            if x:
                line(spread, x, std, c, GROUP_STYLES[j % 4])
    spread.set_ylim(0, max(0.1, 1.15 * max(r['std'] for r in recs)))
    panel(spread, 'spread over heads', 'std of α over heads', layers)
    handles = _run_handles(have)
    handles += [Patch(color='0.6', alpha=0.35, label='min–max over heads')]
    handles += [style_handle(f'initial α = {", ".join(f"{v:g}" for v in inits)}', (0, (4, 3)), '0.35')]
    if len(groups) > 1:
        handles += [style_handle(f'std: {g}', GROUP_STYLES[j % 4]) for j, g in enumerate(groups)]
    return finish(
        fig, path, 'DnA mixing weight α per layer: mean over heads (line), min–max over heads (band)', handles
    )


# -- entropy and head distance ---------------------------------------------------------------------
def _per_branch(
    reports: Sequence[dict], key: str, field: str, ylabel: str, faint: Optional[str] = None
) -> tuple:
    """Panels per group, a line per (run, branch); returns (fig, axes, groups, legend handles)."""
    groups = _groups(reports, key)
    fig, (axes,) = grid(len(groups))
    layers = _layers(reports, key)
    branches: list[str] = []
    for ax, group in zip(axes, groups, strict=True):
        for c, rep in _colored(reports):
            for branch in ('pos', 'neg', 'attn'):
                x, y, rows = _series(rep.get(key) or [], group, field, branch)
                if not x:
                    continue
                if branch not in branches:
                    branches.append(branch)
                ls, mk = BRANCH_STYLE[branch]
                line(ax, x, y, c, ls, mk)
                if faint:
                    line(ax, x, [r[faint] for r in rows], c, ls, mk, ms=2.5, alpha=0.35)
        panel(ax, group_title(group), ylabel if ax is axes[0] else None, layers)
    return fig, axes, groups, _run_handles(_having(reports, key)) + branch_handles(branches)


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
    handles.append(style_handle(f'faint: the {k:g} % highest-entropy rows', color='0.5', alpha=0.5, lw=1.5))
    handles.append(style_handle('maximum: uniform rows over the N keys', color='0.45', lw=1.0))
    return finish(fig, path, 'Attention entropy per layer: mean over rows, heads and samples', handles)


def plot_redundancy(reports: Sequence[dict], path: str) -> Optional[str]:
    """Head redundancy, drawn as the distance it is computed from: the mean pairwise distance
    ``Δ = 1 − cos(vec A_i, vec A_j)`` between the heads' maps, per layer and branch (0: all heads
    attend alike, i.e. fully redundant; higher: more diverse heads)."""
    recs = _records(reports, 'redundancy')
    if not recs:
        return None
    fig, axes, _, handles = _per_branch(reports, 'redundancy', 'mean', 'Δ (mean 1 − cos over head pairs)')
    axes[0].set_ylim(0, max(1.0, 1.05 * max(r['mean'] for r in recs)))
    return finish(
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
    for slot, (c, rep) in enumerate(have):
        for rec in sorted((r for r in rep[key] if r['group'] == group), key=lambda r: r['layer']):
            h = rec['histogram']
            q05, q25, q50, q75, q95 = histogram_quantiles(
                h['counts'], h['edges'], (0.05, 0.25, 0.5, 0.75, 0.95)
            )
            x = rec['layer'] + (slot - (len(have) - 1) / 2) * width
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
    fig, axes = grid(len(groups), 4.2, 3.0, rows=len(rows))
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
            panel(ax, f'{names[key][1]}, {group}' if group != 'attn' else names[key][1], None, layers)
            if c == 0:
                ax.set_ylabel(names[key][0], fontsize=8.5)
            if r < len(rows) - 1:
                ax.set_xlabel('')
    handles = []
    for c, rep in _colored(reports):
        s = rep.get('summary') or {}
        parts = [
            f"{'C' if k == 'cvv' else 'cos'} mean {s[k]['mean']:.2f}, median {s[k]['median']:.2f}"
            for k in rows
            if k in s
        ]
        if parts:
            handles.append(Patch(facecolor=c, alpha=0.6, label=f"{rep['label']} ({'; '.join(parts)})"))
    return finish(
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
    fig, (axes,) = grid(len(groups), 4.4, 3.2)
    width = 0.8 / len(have)
    for ax, group in zip(axes, groups, strict=True):
        last = 1  # the highest count drawn (at least 1)
        for slot, (c, rep) in enumerate(have):
            recs = [r for r in rep['intruders'] if r['group'] == group]
            if not recs:
                continue
            hist = summed_counts(r['histogram'] for r in recs).double().numpy()
            last = max(last, int(np.flatnonzero(hist).max(initial=0)))
            x = np.arange(len(hist)) + (slot - (len(have) - 1) / 2) * width
            ax.bar(x, hist / hist.sum(), width, color=c)
        ax.set_xlim(-0.6, last + 0.6)
        ax.set_ylim(0, 1)
        ylabel = 'fraction of (sample, head, layer)' if ax is axes[0] else None
        panel(ax, group_title(group), ylabel, range(last + 1), 'intruder dimensions', grid='y')
    handles = [
        Patch(
            color=c,
            label=f"{rep['label']} (all attentions: mean {rep['summary']['intruders']['mean']:.2f}, "
            f"mode {rep['summary']['intruders']['mode']})",
        )
        for c, rep in have
    ]
    rec0 = have[0][1]['intruders'][0]
    return finish(
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
    fig, (axes,) = grid(len(sigmas) + with_acc, 3.6, sharey=False)
    layers = [lay['layer'] for e in entries for lay in e['layers']]
    top = max(lay['distance'] for e in entries for lay in e['layers'])
    for ax, sigma in zip(axes, sigmas, strict=False):  # (and the accuracy panel)
        for c, rep in have:
            for e in rep['robustness']:
                if e['sigma'] in (0.0, sigma):
                    x, y = [lay['layer'] for lay in e['layers']], [lay['distance'] for lay in e['layers']]
                    line(ax, x, y, c, '-' if e['sigma'] == 0 else '--')
        psnrs = [e['psnr'] for e in entries if e['sigma'] == sigma and e.get('psnr') is not None]
        title = f'σ = {sigma:g}' + (f' (PSNR {np.mean(psnrs):.1f} dB)' if psnrs else '')
        panel(ax, title, None, layers)
        ax.set_ylim(0, top * 1.1)
        if ax is not axes[0]:
            ax.tick_params(labelleft=False)
    axes[0].set_ylabel('token distance within a clip\n(mean 1 − cos between patch tokens)', fontsize=8.5)
    if with_acc:
        for c, rep in have:
            pts = sorted(
                (e['sigma'], 100 * e['accuracy']) for e in rep['robustness'] if e.get('accuracy') is not None
            )
            line(axes[-1], [p[0] for p in pts], [p[1] for p in pts], c)
        axes[-1].set_ylim(0, 102)
        panel(axes[-1], 'accuracy on the analysed samples', 'top-1 (%)', None, 'noise σ')
    settings = have[0][1].get('settings') or {}
    space = settings.get('noise_space', 'normalized')
    handles = _run_handles(have)
    handles += [style_handle('clean input'), style_handle('input + Gaussian noise of std σ', '--')]
    return finish(
        fig,
        path,
        'Representational robustness: how far apart the patch tokens of one clip stay, clean vs noisy',
        handles,
        f'Tokens centred per token over the channels ({settings.get("center", "feature")}); σ in '
        f'{"normalised-input" if space == "normalized" else "pixel-range"} units; PSNR on raw pixels. '
        'Higher distance = tokens less collapsed onto each other.',
    )


#: the report keys a figure draws, where they are more than its analysis (a run is in the figure
#: when it has one of them)
FIGURE_KEYS = {'cvv': ('cvv', 'branch_cosine')}
PLOTTERS = {
    'alpha': plot_alpha,
    'entropy': plot_entropy,
    'redundancy': plot_redundancy,
    'cvv': plot_cvv,
    'intruders': plot_intruders,
    'robustness': plot_robustness,
}
