"""The denoising study's figures (``tools/analysis/study.py``; the summary of
:func:`dna_mm.analysis.study.summarize`): accuracy and attention on the target against the
number of distractors, and the attention on the target per layer; mean ± std over seeds, each
method named as its member says (:func:`method_label`) and in its member's colour, the same on
every figure (:func:`.style.run_colors`)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ...family import PAPER_NAMES, method_attention
from ...models.attention.builder import attention_class, short_names
from ...synthetic.motion_clips import SIMILARITY
from .style import (
    BRANCH_STYLE,
    branch_handles,
    color_handles,
    error_bars,
    finish,
    grid,
    group_title,
    panel,
    run_colors,
    style_handle,
)


def method_label(name: str) -> str:
    """How figures, tables and reports name the attention ``name`` (a study method: a short or
    registered name, ``NAME:VARIANT``, ``NAME+gated``; :func:`~dna_mm.family.method_attention`):
    as its member says, the ``label`` its class states itself where it states one, else its class
    name without ``Attention`` (``DiffAttention``: ``Diff``); a DnA variant with its paper's name in
    place of the default variant's the member's label names (``dna:apm``: ``DnA (A±)``); a gated
    method (``dna+gated``) followed by ``+ gate``. A name no member has now (the runs of a member
    whose module this process did not import) as it is."""
    member, settings = method_attention(name)
    try:
        cls = attention_class(member)
    except ValueError:
        return name
    label = vars(cls).get('label') or cls.__name__.removesuffix('Attention')
    if settings.get('variant'):
        label = f'{_without_variant(label)} ({PAPER_NAMES[settings["variant"]]})'
    return f'{label} + gate' if settings.get('gated') else label


def _without_variant(label: str) -> str:
    """A member's ``label`` without the paper name of a variant at its end (``DnA (Q±V±)``: ``DnA``)."""
    for paper in PAPER_NAMES.values():
        label = label.removesuffix(f' ({paper})')
    return label


def __getattr__(name: str) -> object:
    """``METHOD_NAMES`` of earlier releases (short name → label), read from the members now."""
    if name == 'METHOD_NAMES':
        return {short: method_label(short) for short in short_names()}
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


#: what a held-out set's distractors share with the target: ``'demo'`` (nothing: as in training)
#: or one of the generator's ``distractor_*`` fields (``datasets.synthetic.SIMILARITY``) set to
#: ``'target'``, named without its prefix (``'color'``)
LIKENESS = ('demo', *(field.removeprefix('distractor_') for field in SIMILARITY))
#: line style per likeness
LIKENESS_STYLE = dict(zip(LIKENESS, ('-', '--', '-.', ':'), strict=True))
_AS_TARGET = {
    'distractor_color': "in the target's colour",
    'distractor_size': "of the target's size",
    'distractor_motion': 'moving as targets do',
}
LIKENESS_NAMES = {
    'demo': 'distractors as in training',
    **{field.removeprefix('distractor_'): f'distractors {_AS_TARGET[field]}' for field in SIMILARITY},
}


def _method_handles(methods: Sequence[str]) -> list:
    """A legend entry per method, named and coloured by its member (:func:`_method_colors`)."""
    return color_handles([method_label(m) for m in methods])


def _method_colors(methods: Sequence[str]) -> list[str]:
    """Each method's colour: its member's, by the label :func:`method_label` gives it (as its
    legend entry's, :func:`_method_handles`)."""
    return run_colors([method_label(m) for m in methods])


def _seeds_note(summary: dict) -> str:
    n = len(summary['seeds'])
    return f'mean over {n} seed{"s" if n > 1 else ""}; error bars: ± one standard deviation over the seeds'


def plot_accuracy_vs_distractors(
    summary: dict, path: str, train_distractors: Optional[int] = None
) -> Optional[str]:
    """Top-1 against the number of distractors of the held-out sets (left) and the share of the
    attention the last layer's spatial class token puts on the target (the map the layer applies;
    right), mean ± std over seeds per method; a line style per kind of distractor."""
    methods = [m for m in summary['methods'] if summary['curve'].get(m)]
    if not methods:
        return None
    fig, (axes,) = grid(2, 4.6, 3.4, sharey=False)
    acc, mass_ax = axes
    offsets = np.linspace(-0.15, 0.15, len(methods)) if len(methods) > 1 else [0.0]
    likeness = list(dict.fromkeys(e['likeness'] for m in methods for e in summary['curve'][m].values()))
    xs_all: set = set()
    uniform: dict = {}
    tops = [1e-3]
    last = None
    colors = _method_colors(methods)
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
            error_bars(acc, xs + offsets[i], [p[2] for p in pts], colors[i], ls)
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
                x = np.array([r[0] for r in rows], dtype=float) + offsets[i]
                error_bars(mass_ax, x, [r[1] for r in rows], colors[i], ls)
    ticks = sorted(xs_all)
    acc.axhline(100 / 4, color='0.45', ls=(0, (4, 3)), lw=1)
    acc.set_ylim(0, 102)
    panel(acc, 'accuracy on held-out sets', 'top-1 (%)', ticks, 'distractors per clip')
    handles = _method_handles(methods)
    if len(likeness) > 1 or likeness != ['demo']:
        handles += [style_handle(LIKENESS_NAMES.get(k, k), LIKENESS_STYLE.get(k, '-')) for k in likeness]
    handles.append(style_handle('chance (4 classes)', (0, (4, 3)), '0.45'))
    if uniform:
        ns = sorted({n for _, n in uniform})
        level = [float(np.mean([u for (_, n2), v in uniform.items() if n2 == n for u in v])) for n in ns]
        mass_ax.plot(ns, level, color='0.45', ls=(0, (1, 2)), lw=1.2)
        tops += level
        handles.append(style_handle('uniform attention over the patches', (0, (1, 2)), '0.45'))
    mass_ax.set_ylim(0, min(1.0, 1.15 * max(tops)))
    title = f'layer {last[0]}, {group_title(last[1])}: class token on the target' if last else 'target mass'
    panel(mass_ax, title, 'share of attention on the target', ticks, 'distractors per clip')
    if train_distractors is not None:
        for ax in axes:
            ax.axvline(train_distractors, color='0.6', lw=0.9, ls='-')
        handles.append(style_handle(f'training set: {train_distractors} distractors', '-', '0.6'))
    return finish(
        fig,
        path,
        'Robustness to distractors: models trained with few distractors, tested with more',
        handles,
        _seeds_note(summary) + '. Right: the map the layer applies (of an attention with two maps, '
        'the two combined).',
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
    fig, axes = grid(len(groups), 4.4, 2.9, rows=len(rows))
    layers = sorted({r['layer'] for m in methods for r in recs[m]})
    offsets = np.linspace(-0.15, 0.15, len(methods) * 2) if len(methods) > 1 else [0.0, 0.05]
    top = max(r['mean'] + (r['std'] or 0) for m in methods for r in recs[m])
    top = max(top, max(r['uniform'] for m in methods for r in recs[m]))
    used: list[str] = []
    colors = _method_colors(methods)
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
                    x = np.array([r['layer'] for r in sel]) + offsets[(2 * i + j) % len(offsets)]
                    error_bars(ax, x, sel, colors[i], *BRANCH_STYLE[branch])
            ax.set_ylim(0, min(1.0, 1.12 * top))
            title = f'{group_title(group)}: {label}'
            panel(ax, title, 'share of attention' if col == 0 else None, layers)
            if row < len(rows) - 1:
                ax.set_xlabel('')
    handles = _method_handles(methods)
    handles += branch_handles(used)
    handles.append(style_handle('uniform attention over the patches (chance)', (0, (1, 2)), '0.45'))
    return finish(
        fig,
        path,
        f'Attention on the target ({set_name}): Σ |a| over the target\'s patches / Σ |a| over all patches',
        handles,
        _seeds_note(summary) + '. Spatial: the class token\'s row, per frame; temporal (no class token): '
        'the mean row of each patch\'s sequence over the frames.',
    )
