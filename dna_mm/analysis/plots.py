"""Figures of the analyses (matplotlib, Agg): one figure per analysis, layers on x, every
branch and every compared run in the same figure, the layout of the paper's plots.

Each ``plot_*`` takes a list of reports (:func:`~.report.analyze`, one per checkpoint) and a
path, writes a PNG and returns the path (``None`` when no report has that analysis).
Colours follow the run, line styles / markers the branch: DnA's positive branch solid, its
negative branch dashed, single-map attentions dotted; a TimeSformer's temporal and spatial
attentions get one panel each.
"""

from __future__ import annotations

import textwrap
from typing import Optional, Sequence

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .sites import BRANCH_LABELS  # noqa: E402

COLORS = plt.rcParams['axes.prop_cycle'].by_key()['color']
BRANCH_STYLE = {'pos': ('-', 'o'), 'neg': ('--', 's'), 'attn': (':', '^')}
DPI = 110


def _groups(reports: Sequence[dict], key: str) -> list[str]:
    seen: list[str] = []
    for rep in reports:
        for rec in rep.get(key) or []:
            if rec['group'] not in seen:
                seen.append(rec['group'])
    return seen


def _axes(n: int, width: float = 4.6, height: float = 3.4):
    fig, axes = plt.subplots(1, n, figsize=(max(width * n, 6.0), height), squeeze=False)
    return fig, list(axes[0])


def _finish(fig, path: str, title: str) -> str:
    fig.suptitle(textwrap.fill(title, int(fig.get_figwidth() * 11)), fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches='tight')
    plt.close(fig)
    return path


def _legend(ax) -> None:
    """Legend outside the axes, on the right (the figure grows to hold it)."""
    ax.legend(fontsize=7, loc='center left', bbox_to_anchor=(1.02, 0.5), frameon=False)


def _style(ax, group: str, ylabel: str) -> None:
    ax.set_xlabel('layer')
    ax.set_ylabel(ylabel)
    if group != 'attn':
        ax.set_title(group)
    ax.grid(alpha=0.3)
    ax.xaxis.get_major_locator().set_params(integer=True)


def _branch_label(rec: dict) -> str:
    return BRANCH_LABELS.get(rec.get('kind', ''), {}).get(rec.get('branch', ''), rec.get('branch', ''))


def _series(records: list[dict], group: str, field: str, branch: Optional[str] = None):
    rows = sorted(
        (r for r in records if r['group'] == group and (branch is None or r.get('branch') == branch)),
        key=lambda r: r['layer'],
    )
    return [r['layer'] for r in rows], [r[field] for r in rows], rows


def plot_alpha(reports: Sequence[dict], path: str) -> Optional[str]:
    """α mean, max, min and std over heads per layer (the paper's α figure)."""
    groups = _groups(reports, 'alpha')
    if not groups:
        return None
    fig, axes = _axes(4, 3.6, 3.2)
    for ax, stat in zip(axes, ('mean', 'max', 'min', 'std'), strict=True):
        for i, rep in enumerate(reports):
            for j, group in enumerate(groups):
                x, y, _ = _series(rep.get('alpha') or [], group, stat)
                if x:
                    ax.plot(
                        x,
                        y,
                        ['-', '--', ':'][j % 3],
                        marker='o',
                        ms=3,
                        color=COLORS[i % 10],
                        label=rep['label'] + ('' if group == 'attn' else f' {group}'),
                    )
        _style(ax, 'attn', f'α {stat}')
    _legend(axes[-1])
    return _finish(fig, path, 'α per layer (over heads)')


def _per_branch(
    reports: Sequence[dict],
    key: str,
    path: str,
    field: str,
    ylabel: str,
    title: str,
    extra: Optional[str] = None,
) -> Optional[str]:
    groups = _groups(reports, key)
    if not groups:
        return None
    fig, axes = _axes(len(groups))
    for ax, group in zip(axes, groups, strict=True):
        for i, rep in enumerate(reports):
            recs = rep.get(key) or []
            for branch in ('pos', 'neg', 'attn'):
                x, y, rows = _series(recs, group, field, branch)
                if not x:
                    continue
                ls, mk = BRANCH_STYLE[branch]
                name = f"{rep['label']} {_branch_label(rows[0])}"
                ax.plot(x, y, ls, marker=mk, ms=3, color=COLORS[i % 10], label=name)
                if extra:
                    ax.plot(
                        x,
                        [r[extra] for r in rows],
                        ls,
                        marker=mk,
                        ms=3,
                        alpha=0.45,
                        color=COLORS[i % 10],
                        label=f'{name}, top-{rows[0]["top_k_percent"]:g}%',
                    )
        _style(ax, group, ylabel)
    _legend(axes[-1])
    return _finish(fig, path, title)


def plot_entropy(reports: Sequence[dict], path: str) -> Optional[str]:
    """Mean row entropy per layer and branch (strong), and the top-k % rows (faint)."""
    return _per_branch(
        reports,
        'entropy',
        path,
        'mean',
        'entropy (nats)',
        'Attention entropy: mean over rows and heads; faint: top-k % rows',
        'top_k_mean',
    )


def plot_redundancy(reports: Sequence[dict], path: str) -> Optional[str]:
    """Mean ``1 - cos`` between heads per layer and branch (higher = less redundant)."""
    return _per_branch(
        reports,
        'redundancy',
        path,
        'mean',
        'mean 1 − cos(A_i, A_j)',
        'Head redundancy (pairwise cosine distance between heads)',
    )


def plot_cvv(reports: Sequence[dict], path: str) -> Optional[str]:
    """Histogram of C(V+, V-) over samples, heads and layers, and the branch-output cosine per
    layer."""
    have_c = [r for r in reports if r.get('cvv')]
    have_b = [r for r in reports if r.get('branch_cosine')]
    if not have_c and not have_b:
        return None
    fig, axes = _axes(2)
    for i, rep in enumerate(reports):
        recs = rep.get('cvv') or []
        if recs:
            edges = np.array(recs[0]['histogram']['edges'])
            counts = np.sum([r['histogram']['counts'] for r in recs], axis=0)
            group = max(1, counts.size // 50)  # drawn with ~50 bins
            counts = counts[: counts.size // group * group].reshape(-1, group).sum(axis=1)
            edges = edges[::group][: counts.size + 1]
            s = rep['summary']['cvv']
            axes[0].stairs(
                counts / counts.sum(),
                edges,
                color=COLORS[i % 10],
                fill=False,
                label=f"{rep['label']}: mean {s['mean']:.2f}, median {s['median']:.2f}",
            )
    axes[0].set_xlabel('C(V+, V−)')
    axes[0].set_ylabel('fraction')
    axes[0].set_title('value subspaces (sample × head × layer)')
    axes[0].grid(alpha=0.3)
    if have_c:
        axes[0].legend(fontsize=7)
    groups = _groups(reports, 'branch_cosine')
    for i, rep in enumerate(reports):
        for j, group in enumerate(groups):
            x, y, _ = _series(rep.get('branch_cosine') or [], group, 'mean')
            if x:
                ax_label = rep['label'] + ('' if group == 'attn' else f' {group}')
                axes[1].plot(
                    x, y, ['-', '--', ':'][j % 3], marker='o', ms=3, color=COLORS[i % 10], label=ax_label
                )
    _style(axes[1], 'attn', 'cos(branch₁, branch₂)')
    axes[1].set_title('branch-output cosine')
    if have_b:
        _legend(axes[1])
    return _finish(fig, path, 'Similarity of the two branches')


def plot_intruders(reports: Sequence[dict], path: str) -> Optional[str]:
    """Histogram of intruder-dimension counts (all samples, heads, layers), one bar set per run."""
    have = [r for r in reports if (r.get('summary') or {}).get('intruders')]
    if not have:
        return None
    fig, axes = _axes(1, 6.0, 3.6)
    ax = axes[0]
    width = 0.8 / len(have)
    for i, rep in enumerate(have):
        s = rep['summary']['intruders']
        hist = np.array(s['histogram'], dtype=float)
        x = np.arange(hist.size) + (i - (len(have) - 1) / 2) * width
        ax.bar(
            x,
            hist / hist.sum(),
            width,
            color=COLORS[reports.index(rep) % 10],
            label=f"{rep['label']}: mean {s['mean']:.2f}, mode {s['mode']}",
        )
    rec = have[0]['intruders'][0]
    ax.set_xlabel(f"intruders among top-{rec['k']} left singular vectors (ε = {rec['eps']:.2f})")
    ax.set_ylabel('fraction')
    ax.grid(alpha=0.3, axis='y')
    _legend(ax)
    return _finish(fig, path, 'Intruder dimensions between the two branches')


def plot_robustness(reports: Sequence[dict], path: str) -> Optional[str]:
    """Mean pairwise token distance per layer: clean (solid) vs noisy (dashed), a panel per σ."""
    have = [r for r in reports if r.get('robustness')]
    if not have:
        return None
    sigmas = sorted({e['sigma'] for r in have for e in r['robustness'] if e['sigma'] > 0})
    if not sigmas:
        sigmas = [0.0]
    fig, axes = _axes(len(sigmas), 4.0, 3.4)
    for ax, sigma in zip(axes, sigmas, strict=True):
        psnrs = []
        for rep in have:
            entries = {e['sigma']: e for e in rep['robustness']}
            for s, ls, suffix in ((0.0, '-', ''), (sigma, '--', '$^σ$')):
                e = entries.get(s)
                if e is None or (s == 0 and sigma == 0 and ls == '--'):
                    continue
                x = [layer['layer'] for layer in e['layers']]
                y = [layer['distance'] for layer in e['layers']]
                acc = '' if e.get('accuracy') is None else f" (acc {100 * e['accuracy']:.0f}%)"
                ax.plot(
                    x,
                    y,
                    ls,
                    marker='o',
                    ms=3,
                    color=COLORS[reports.index(rep) % 10],
                    label=f"{rep['label']}{suffix}{acc}",
                )
                if s > 0 and e.get('psnr') is not None:
                    psnrs.append(e['psnr'])
        title = f'σ = {sigma:g}' + (f', PSNR {np.mean(psnrs):.1f} dB' if psnrs else '')
        _style(ax, 'attn', 'mean pairwise cosine distance')
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=6.5, loc='upper center', bbox_to_anchor=(0.5, -0.2), frameon=False, ncol=2)
    return _finish(fig, path, 'Representational robustness (patch tokens, mean-centred)')


PLOTTERS = {
    'alpha': plot_alpha,
    'entropy': plot_entropy,
    'redundancy': plot_redundancy,
    'cvv': plot_cvv,
    'intruders': plot_intruders,
    'robustness': plot_robustness,
}


def plot_relevance(frames: np.ndarray, maps: dict[str, np.ndarray], path: str, title: str) -> str:
    """Input frames with relevance overlays: one column per frame, rows = input, positive
    (red, ``'pos'`` / ``'attn'``) and negative (blue, ``'neg'``) relevance.

    Args:
        frames: ``[T, H, W, 3]`` in ``[0, 1]`` (``T = 1`` for an image).
        maps: Chain → ``[T, H, W]`` in ``[0, 1]``.
    """
    rows = [('input', None)] + [(c, maps[c]) for c in ('pos', 'attn', 'neg') if c in maps]
    t = frames.shape[0]
    cell = 1.9 if t > 1 else 2.6
    fig, axes = plt.subplots(len(rows), t, figsize=(cell * t + 0.4, cell * len(rows)), squeeze=False)
    names = {'input': 'input', 'pos': 'positive', 'attn': 'relevance', 'neg': 'negative'}
    for r, (chain, rel) in enumerate(rows):
        for f in range(t):
            ax = axes[r][f]
            ax.imshow(frames[f])
            if rel is not None:
                ax.imshow(
                    rel[f], cmap='Blues' if chain == 'neg' else 'Reds', alpha=0.6 * rel[f], vmin=0, vmax=1
                )
            ax.set_xticks([])
            ax.set_yticks([])
            if f == 0:
                ax.set_ylabel(names[chain], fontsize=9)
            if r == 0 and t > 1:
                ax.set_title(f'frame {f}', fontsize=8)
    return _finish(fig, path, title)
