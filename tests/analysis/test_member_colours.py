"""One palette keyed by attention member, the same on every analysis figure: a member's runs
are drawn in its colour whether given first or second, in the analyses' figures
(``analyze_attention.py``) and the study's (``study.py``) alike; a run of no known member (a
user's own member, a free ``--label`` without a recorded member, a second run of one member)
takes a colour of its own that no known member has. Drawn through the figures' own functions,
each figure kept as it is written, its colours read from its legend and lines."""

from __future__ import annotations

from typing import Callable

import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

import dna_mm  # noqa: F401
from dna_mm.analysis.models import AnalysisModel, model_label
from dna_mm.analysis.plots import plot_accuracy_vs_distractors, plot_alpha, plot_robustness
from dna_mm.analysis.report import analyze
from dna_mm.models.attention.builder import build_attention


def _member_colour(method: str) -> str:
    """The known member ``method``'s own colour, as matplotlib writes it back."""
    from dna_mm.analysis.plots.style import MEMBER_COLORS

    return to_hex(MEMBER_COLORS[method])


def _known_colours() -> set[str]:
    """Every known member's colour."""
    from dna_mm.analysis.plots.style import MEMBER_COLORS

    return {_member_colour(m) for m in MEMBER_COLORS}


@pytest.fixture
def drawn(monkeypatch) -> list[Figure]:
    """Every figure written from here on, as it was written."""
    kept, savefig = [], Figure.savefig
    monkeypatch.setattr(Figure, 'savefig', lambda fig, *a, **k: (kept.append(fig), savefig(fig, *a, **k))[1])
    return kept


def _grey(colour: str) -> bool:
    """``colour`` (``#rrggbb``) is a grey (not black, a run's colour): a reference line's or a
    line style's legend entry's."""
    return colour != '#000000' and len({colour[1:3], colour[3:5], colour[5:7]}) == 1


def _legend(fig: Figure) -> dict[str, str]:
    """Label → colour of the legend's coloured line entries (the runs' and methods')."""
    (legend,) = fig.legends
    entries = zip(legend.get_texts(), legend.legend_handles, strict=True)
    lines = {t.get_text(): to_hex(h.get_color()) for t, h in entries if isinstance(h, Line2D)}
    return {label: c for label, c in lines.items() if not _grey(c)}


def _line_colours(fig: Figure) -> set[str]:
    """The colours of the lines drawn in the panels (grey reference lines left out)."""
    colours = {to_hex(ln.get_color()) for ax in fig.axes for ln in ax.get_lines()}
    return {c for c in colours if not _grey(c)}


def _robustness(label: str, member: str | None) -> dict:
    """An analyses' report of one run with a clean and a noisy token distance (and its member,
    as ``analyze`` records it, unless ``None``: a report of an earlier release)."""
    layers = [dict(layer=i, distance=0.2 + 0.1 * i) for i in range(3)]
    entries = [dict(sigma=s, psnr=None, accuracy=0.9, layers=layers) for s in (0.0, 0.5)]
    report = dict(label=label, robustness=entries)
    return report if member is None else dict(report, member=member)


def _summary(methods: list[str]) -> dict:
    """A study summary of ``methods``: top-1 on two held-out sets, and the attention on the target."""
    sets = {f'demo_{n}': n for n in (2, 4)}
    top1 = dict(mean=90.0, std=3.0, n=2)
    stats = dict(mean=0.3, std=0.05, n=2)
    mass = [dict(layer=0, group='spatial', branch='attn', region='target', uniform=0.2, **stats)]
    return dict(
        methods=methods,
        seeds=[0, 1],
        curve={
            m: {s: dict(num_distractors=n, likeness='demo', top1=top1) for s, n in sets.items()}
            for m in methods
        },
        mass={m: {s: mass for s in sets} for m in methods},
    )


def _analysis_model(attn: torch.nn.Module) -> AnalysisModel:
    """A one-block model of the attention ``attn``, as the analysis tools load one (its label the
    model's own), for the analyses that need no data (α)."""
    model = torch.nn.ModuleList([attn])
    mean, std, label = torch.zeros(1), torch.ones(1), model_label(model, 'cfg')
    return AnalysisModel(model, model, None, mean, std, 1.0, False, 'cfg', None, label=label)


def _colours(plot: Callable, first: object, second: object, path: str) -> dict[str, str]:
    """The legend colours of ``plot`` drawn with ``first`` before ``second`` and with them swapped,
    each label's colour checked to be the same both ways."""
    legends = []
    for order in ((first, second), (second, first)):
        fig = plot(*order, path)
        legends.append(_legend(fig))
    assert legends[0] == legends[1], legends
    return legends[0]


def test_a_member_has_its_colour_first_or_second_in_every_figure(drawn, tmp_path) -> None:
    path = str(tmp_path / 'figure.png')

    def robustness(a: dict, b: dict, path: str) -> Figure:
        assert plot_robustness([a, b], path)
        return drawn[-1]

    def study(a: str, b: str, path: str) -> Figure:
        assert plot_accuracy_vs_distractors(_summary([a, b]), path)
        return drawn[-1]

    runs = _colours(robustness, _robustness('DnA', 'dna:qpm_vpm'), _robustness('softmax', 'softmax'), path)
    methods = _colours(study, 'dna', 'softmax', path)
    # the free --label 'DnA' by its recorded member: the study's DnA colour
    assert runs == {'DnA': methods['DnA (Q±V±)'], 'softmax': methods['softmax']}
    assert _line_colours(drawn[-1]) == set(methods.values())  # the lines in the legend's colours
    assert methods == {'DnA (Q±V±)': _member_colour('dna'), 'softmax': _member_colour('softmax')}


def test_analyze_records_the_member_the_figures_colour_a_run_by(drawn, tmp_path) -> None:
    """A DnA run labelled freely (``--label ours``) is DnA's colour in ``alpha.png``, as ``dna``
    is in the study's figure, and so is one of an unregistered subclass (timm's), named as its
    member; a report without ``member`` (an earlier release's) by its label."""
    from dna_mm.models.backbones.timm_vit import TimmDnAAttention

    ours = analyze(_analysis_model(build_attention('dna', 32, 2)), analyses=['alpha'], label='ours')
    other = analyze(
        _analysis_model(build_attention(dict(type='dna', variant='Q±V'), 32, 2)), analyses=['alpha']
    )
    timm = analyze(_analysis_model(TimmDnAAttention(32, 2)), analyses=['alpha'])
    assert (ours['label'], ours['member'], other['label'], other['member']) == (
        'ours',
        'dna:qpm_vpm',
        'DnA (Q±V)',
        'dna:qpm_v',
    )
    assert (timm['member'], timm['label']) == ('dna:qpm_vpm', 'DnA (Q±V±)')  # its member's name
    assert plot_alpha([timm, other], str(tmp_path / 'alpha.png'))
    assert _legend(drawn[-1]) == {
        timm['label']: _member_colour('dna'),
        'DnA (Q±V)': _member_colour('dna:qpm_v'),
    }

    def alpha(a: dict, b: dict, path: str) -> Figure:
        assert plot_alpha([a, b], path)
        return drawn[-1]

    legend = _colours(alpha, ours, other, str(tmp_path / 'alpha.png'))
    assert legend == {'ours': _member_colour('dna'), 'DnA (Q±V)': _member_colour('dna:qpm_v')}
    old = {k: v for k, v in other.items() if k != 'member'}
    assert _colours(alpha, ours, old, str(tmp_path / 'alpha.png')) == legend


@pytest.mark.parametrize(
    'runs',
    [
        [('relu', 'relu'), ('DnA', 'dna:qpm_vpm'), ('mine', None), ('softmax', 'softmax')],
        [('DnA', 'dna:qpm_vpm'), ('DnA again', 'dna:qpm_vpm'), ('DnA (epoch 10)', 'dna:qpm_vpm')],
        [('a', None), ('b', None), ('c', 'gated'), ('d', None), ('DnA (Q±V±)', None)],
    ],
)
def test_runs_of_no_known_member_take_distinct_colours_no_member_has(drawn, tmp_path, runs) -> None:
    assert plot_robustness([_robustness(*run) for run in runs], str(tmp_path / 'robustness.png'))
    legend = _legend(drawn[-1])
    assert len(set(legend.values())) == len(runs)  # no two runs alike
    known = {'dna:qpm_vpm': 'dna', 'softmax': 'softmax', 'gated': 'gated', 'DnA (Q±V±)': 'dna'}
    firsts = {member or label: label for label, member in reversed(runs)}
    for label, member in runs:  # a report without member: by its label, which may name a member
        if (member or label) in known and firsts[member or label] == label:
            assert legend[label] == _member_colour(known[member or label])
        else:
            assert legend[label] not in _known_colours(), (label, legend)


def test_a_users_member_in_the_study_takes_a_colour_no_member_has(drawn, tmp_path) -> None:
    assert plot_accuracy_vs_distractors(_summary(['relu', 'dna', 'mine']), str(tmp_path / 'a.png'))
    legend = _legend(drawn[-1])
    assert legend['DnA (Q±V±)'] == _member_colour('dna')
    assert legend['relu'] != legend['mine'] and not {legend['relu'], legend['mine']} & _known_colours()
