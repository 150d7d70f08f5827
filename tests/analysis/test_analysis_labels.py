"""How the analysis tools name a run and what they refuse: the default label is the model's
attention member (``softmax``, ``Diff``, ``DnA (A±)``), not the config's file name (a demo work
dir saves every run's config as ``timesformer_dna_demo.py``); labels that would repeat are refused
or told apart; a checkpoint of another model gets advice the analysis tools can follow; a noise
level <= 0 is one line. Randomly initialised tiny demo models (1 block, 32 wide, 2 heads), each
saved as a demo work dir is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import DEMO_CONFIG, load_tool, run_main, tiny_run_options

import dna_mm  # noqa: F401
from dna_mm.models.attention.builder import build_attention

ANALYZE = 'tools/analysis/analyze_attention.py'
RELEVANCE = 'tools/analysis/relevance_maps.py'
STEM = Path(DEMO_CONFIG).stem  # timesformer_dna_demo


@pytest.fixture(scope='module')
def work_dirs(tiny_video_set, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """name → (config, checkpoint) of a demo work dir ``<name>/timesformer_dna_demo.py``,
    ``<name>/epoch_1.pth``: softmax, a second softmax, Diff, DnA Q±V± and A± (random weights)."""
    from dna_mm.config.model import model_from_config
    from dna_mm.tools.cli import cfg_options

    root = tmp_path_factory.mktemp('label_runs')
    attns = dict(
        softmax='softmax', softmax_b='softmax', diff='diff', dna='dna', apm=dict(type='dna', variant='A±')
    )
    out = {}
    for name, attn in attns.items():
        options = cfg_options(tiny_run_options(tiny_video_set, 'softmax'))
        options['model.backbone.attn_cfg'] = attn
        torch.manual_seed(0)
        cfg, model = model_from_config(DEMO_CONFIG, options)
        (root / name).mkdir()
        cfg.dump(str(root / name / f'{STEM}.py'))
        torch.save(dict(state_dict=model.state_dict(), meta={}), root / name / 'epoch_1.pth')
        out[name] = (str(root / name / f'{STEM}.py'), str(root / name / 'epoch_1.pth'))
    return out


def _analyse(runs: list[tuple[str | None, str]], work_dirs, out: Path, *extra: str, check: bool = True):
    """analyze_attention.py on ``runs`` (label or None, work dir name): the first as CONFIG
    CHECKPOINT (``--label`` when given), the others as ``--compare``."""
    (label, first), rest = runs[0], runs[1:]
    argv = [ANALYZE, *work_dirs[first], '--out', str(out), '--analyses', 'entropy', '--num-samples', '2']
    argv += ['--label', label] if label else []
    for label, name in rest:
        argv += ['--compare', label, *work_dirs[name]]
    return run_main([*argv, *extra], check=check)


def _last_line(proc) -> str:
    return proc.stderr.strip().splitlines()[-1]


# -- the default label: the attention member ------------------------------------------------------
@pytest.mark.parametrize(
    ('cfg', 'label'),
    [
        ('softmax', 'softmax'),
        ('diff', 'Diff'),
        (dict(type='dna', variant='apm'), 'DnA (A±)'),
        (dict(type='dna', variant='Q±V'), 'DnA (Q±V)'),
        ('dna', 'DnA (Q±V±)'),  # the default variant
        (dict(type='dna', variant='apm', gated=True), 'DnA (A±) + gate'),  # as the study's dna+gated
    ],
)
def test_member_label_is_the_study_name_with_the_variant(cfg, label) -> None:
    from dna_mm.analysis.models import member_label

    assert member_label(build_attention(cfg, 32, 2)) == label


def test_member_label_is_the_method_label_of_its_class_variant_and_gate() -> None:
    """One route: a module's label is :func:`method_label` of a study method (its class's
    registered name, ``:VARIANT``, ``+gated``), the variant's paper name for the member's own."""
    from dna_mm.analysis.plots.study import method_label

    assert method_label('DnAAttention:apm+gated') == method_label('A±+gated') == 'DnA (A±) + gate'
    assert method_label('dna:Q±V') == 'DnA (Q±V)' and method_label('dna:qpm_vpm') == method_label('dna')
    assert method_label('diff+gated') == 'Diff + gate' and method_label('mine:apm') == 'mine:apm'


def test_model_label_falls_back_to_the_name_only_for_mixed_members() -> None:
    from dna_mm.analysis.models import model_label

    def blocks(*cfgs):
        n = len(cfgs)
        return torch.nn.ModuleList(
            build_attention(c, 32, 2, layer_index=i, num_layers=n) for i, c in enumerate(cfgs)
        )

    assert model_label(blocks('softmax', 'softmax'), 'cfg') == 'softmax'
    assert model_label(blocks(*['cog'] * 4), 'cfg') == 'Cog'  # softmax first and last: Cog's own rule
    assert model_label(blocks('softmax', 'dna'), 'cfg') == 'cfg'
    mixed_variants = blocks(dict(type='dna', variant='apm'), dict(type='dna', variant='qpm_vpm'))
    assert model_label(mixed_variants, 'cfg') == 'cfg'
    assert model_label(torch.nn.Linear(2, 2), 'cfg') == 'cfg'  # no attention of the family


def test_runs_are_labelled_by_their_attention_not_the_config_name(work_dirs, tmp_path) -> None:
    proc = _analyse([(None, 'softmax'), ('Diff', 'diff')], work_dirs, tmp_path / 'a')
    assert '[softmax] 2 samples' in proc.stdout and f'[{STEM}]' not in proc.stdout
    runs = json.loads((tmp_path / 'a' / 'analysis.json').read_text())['runs']
    assert [r['label'] for r in runs] == ['softmax', 'Diff']
    proc = _analyse([(None, 'apm')], work_dirs, tmp_path / 'b')
    (run,) = json.loads((tmp_path / 'b' / 'analysis.json').read_text())['runs']
    assert run['label'] == 'DnA (A±)' and '[DnA (A±)] 2 samples' in proc.stdout
    assert [s['variant'] for s in run['sites']] == ['apm', 'apm']  # temporal, spatial
    assert all(s['kind'] == 'dna' for s in run['sites'])


def test_relevance_title_names_the_attention(work_dirs, tiny_video_set, tmp_path, monkeypatch) -> None:
    import dna_mm.analysis.plots as plots

    titles = []
    draw = plots.plot_relevance

    def spy(frames, maps, path, title, *args, **kwargs):
        titles.append(title)
        return draw(frames, maps, path, title, *args, **kwargs)

    monkeypatch.setattr(plots, 'plot_relevance', spy)
    video = str(sorted(Path(tiny_video_set, 'videos').glob('test_*.mp4'))[0])
    tool = load_tool(RELEVANCE)
    for name, label in (('softmax', 'softmax'), ('diff', 'Diff')):
        tool.main([*work_dirs[name], '--input', video, '--out', str(tmp_path / name)])
        assert titles[-1].startswith(f'{label}: relevance for '), titles[-1]
    tool.main([*work_dirs['diff'], '--input', video, '--out', str(tmp_path / 'x'), '--label', 'mine'])
    assert titles[-1].startswith('mine: relevance for ')


# -- labels that would repeat ------------------------------------------------------------------
def test_a_label_given_twice_is_one_line(work_dirs, tmp_path) -> None:
    proc = _analyse([('DnA', 'apm'), ('DnA', 'softmax')], work_dirs, tmp_path / 'out', check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = next(ln for ln in proc.stderr.splitlines() if 'error:' in ln)
    assert "'DnA'" in line and 'must differ' in line and 'Traceback' not in proc.stderr
    assert not (tmp_path / 'out').exists()  # refused before any model is loaded


def test_a_default_label_that_another_run_has_is_told_apart(work_dirs, tmp_path) -> None:
    _analyse([(None, 'softmax'), ('softmax', 'softmax_b')], work_dirs, tmp_path)
    runs = json.loads((tmp_path / 'analysis.json').read_text())['runs']
    labels = [r['label'] for r in runs]
    assert labels == [f'softmax ({STEM})', 'softmax'] and len(set(labels)) == 2


def test_run_labels_tags_default_labels_by_what_differs() -> None:
    run_labels = load_tool(ANALYZE).run_labels
    a, b = (
        ('w/softmax_a/demo.py', 'w/softmax_a/epoch_5.pth'),
        ('w/softmax_b/demo.py', 'w/softmax_b/epoch_5.pth'),
    )
    assert run_labels([None, None], [a, b], ['softmax', 'softmax']) == [
        'softmax (softmax_a)',
        'softmax (softmax_b)',
    ]
    c = ('w/softmax_a/demo.py', 'w/softmax_a/epoch_20.pth')
    assert run_labels([None, None], [a, c], ['softmax', 'softmax']) == [
        'softmax (epoch_5)',
        'softmax (epoch_20)',
    ]
    other = ('w/x/other.py', 'w/x/e.pth')
    assert run_labels([None, None, 'Diff'], [a, other, b], ['softmax', 'softmax', 'Diff']) == [
        'softmax (demo)',
        'softmax (other)',
        'Diff',
    ]
    assert run_labels([None, 'DnA'], [a, b], ['softmax', 'softmax']) == ['softmax', 'DnA']  # no clash
    from dna_mm.errors import ConfigError

    with pytest.raises(ConfigError, match='given twice without a label'):
        run_labels([None, None], [a, a], ['softmax', 'softmax'])


# -- a checkpoint of another model ----------------------------------------------------------------
@pytest.mark.parametrize('tool', [ANALYZE, RELEVANCE])
def test_another_models_checkpoint_gets_advice_these_tools_can_follow(
    tool, work_dirs, tiny_video_set, tmp_path
) -> None:
    config = work_dirs['softmax'][0]
    wrong = work_dirs['dna'][1]  # DnA (Q±V±) weights into a softmax model (A±'s keys are softmax's)
    if tool == ANALYZE:
        argv = [ANALYZE, *work_dirs['dna'], '--compare', 'softmax', config, wrong]
    else:
        video = str(sorted(Path(tiny_video_set, 'videos').glob('test_*.mp4'))[0])
        argv = [RELEVANCE, config, wrong, '--input', video]
    proc = run_main([*argv, '--out', str(tmp_path / 'out')], check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = next(ln for ln in proc.stderr.splitlines() if 'error:' in ln)
    assert f'checkpoint {wrong} does not match the model' in line
    assert '--partial-load' not in line and 'load_partial' not in line  # options these tools lack
    assert f'analyse {config} with a checkpoint of its own model' in line


def test_train_and_test_keep_the_partial_load_advice() -> None:
    from dna_mm.checkpoint.loading import PARTIAL_ADVICE, StateDictReport, mismatch_line

    report = StateDictReport(missing=['a'], loaded=3, checkpoint={'state_dict': {}})
    model = torch.nn.Linear(2, 2)
    assert mismatch_line(model, 'x.pth', report).endswith(PARTIAL_ADVICE)
    assert '--partial-load' in PARTIAL_ADVICE
    assert mismatch_line(model, 'x.pth', report, 'do this').endswith('. do this')


# -- noise levels ---------------------------------------------------------------------------------
@pytest.mark.parametrize('sigmas', [['-1'], ['0'], ['0.5', '-0.1'], ['nan'], ['inf']])
def test_a_noise_level_that_is_not_positive_is_one_line(sigmas, capsys) -> None:
    tool = load_tool(ANALYZE)
    with pytest.raises(SystemExit) as done:
        tool.parse_args(
            [DEMO_CONFIG, 'ckpt.pth', '--out', 'out', '--analyses', 'robustness', '--sigmas', *sigmas]
        )
    assert done.value.code == 2
    assert 'error: --sigmas must be noise levels > 0' in capsys.readouterr().err.splitlines()[-1]


def test_analyze_refuses_a_negative_noise_level() -> None:
    from dna_mm.analysis.report import analyze

    with pytest.raises(ValueError, match='noise levels must be finite and >= 0'):
        analyze(object(), ['robustness'], sigmas=[-1.0])
