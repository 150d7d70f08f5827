"""tools/analysis/study.py: a study started again keeps only runs made as it makes its own (the
training settings of each run recorded and compared, a run evaluated on other held-out sets
evaluated again), the seconds of a run stopped and resumed, a DnA variant as a method. No
training: the runs are written as the study writes them, the tools' work replaced where needed."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pytest
from conftest import load_tool

from dna_mm.analysis.plots.study import method_label

LR = 'optim_wrapper.optimizer.lr=1e-3'
#: a run's record of its settings and attempts (dna_mm.analysis.study_runs.RUN_RECORD)
RECORD = 'study_run.json'


@pytest.fixture()
def study(monkeypatch):
    """The tool as a module; making the clip sets or training a run fails the test (a refusal
    comes before any work)."""
    tool = load_tool('tools/analysis/study.py')

    def no_work(*args, **kwargs):
        raise AssertionError('the study went to work')

    monkeypatch.setattr(tool, 'clip_sets', no_work)
    monkeypatch.setattr(tool, 'run_one', no_work)
    return tool


def _sets(names: list[tuple[str, int, str, bool]], clips: int = 4) -> list[dict]:
    mass = [
        dict(layer=0, group='spatial', branch='attn', region=r, mean=0.3, uniform=0.2)
        for r in ('target', 'distractors')
    ]
    return [
        dict(
            name=name,
            num_distractors=n,
            likeness=like,
            heldout=heldout,
            num_clips=clips,
            top1=50.0,
            mca=50.0,
            mass=mass,
            seconds=0.1,
        )
        for name, n, like, heldout in names
    ]


HELDOUT = [('demo_test', 2, 'demo', False), ('demo_2', 2, 'demo', True), ('demo_8', 8, 'demo', True)]


def write_run(out: Path, method: str, seed: int, top1: float = 50.0, old: bool = False, **settings) -> Path:
    """``runs/<method>_seed<seed>/result.json`` as :func:`run_one` writes it (``old``: as an
    earlier study.py did, without the settings it did not record)."""
    run = out / 'runs' / f'{method}_seed{seed}'
    run.mkdir(parents=True)
    result = dict(
        method=method,
        seed=seed,
        epochs=settings.pop('epochs', 2),
        cfg_options=settings.pop('cfg_options', []),
        distractors=[2, 8],
        likeness=['demo'],
        heldout_per_class=1,
        test=dict(top1=top1, mca=top1, line=f'Test results: top-1: {top1:.2f}  mCA: {top1:.2f}'),
        train_test_seconds=90.0,
        eval_seconds=5.0,
        checkpoint=str(run / 'epoch_2.pth'),
        sets=settings.pop('sets', _sets(HELDOUT)),
    )
    if old:
        for key in ('cfg_options', 'distractors', 'likeness', 'heldout_per_class'):
            del result[key]
    result.update(settings)
    (run / 'result.json').write_text(json.dumps(result))
    return run


def refused(tool, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        tool.main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and 'Traceback' not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith('study.py: error: ')]
    assert len(lines) == 1, err
    return lines[0].removeprefix('study.py: error: ')


def test_a_kept_run_of_other_cfg_options_is_refused_naming_both(study, tmp_path, capsys) -> None:
    out = tmp_path / 'study'
    for method in ('softmax', 'dna'):
        write_run(out, method, 0)
    argv = ['--methods', 'softmax', 'dna', '--seeds', '3', '--epochs', '2', '--out', str(out)]
    line = refused(study, [*argv, '--cfg-options', LR], capsys)
    assert line == (
        f'{out}/runs/softmax_seed0/result.json: made with --cfg-options (none), this study asks for '
        f'{LR}; use another --out, or remove the runs made otherwise from {out}/runs'
    )
    # the other way round: runs made with an option, a study without it
    other = tmp_path / 'other'
    write_run(other, 'softmax', 0, cfg_options=[LR])
    line = refused(study, ['--methods', 'softmax', '--epochs', '2', '--out', str(other)], capsys)
    assert f'made with --cfg-options {LR}, this study asks for (none); ' in line


def test_a_kept_run_of_an_earlier_study_py_is_refused_as_unknown(study, tmp_path, capsys) -> None:
    out = tmp_path / 'study'
    for seed in (0, 1):
        for method in ('softmax', 'dna'):
            write_run(out, method, seed, old=True)
    argv = ['--methods', 'softmax', 'dna', '--seeds', '3', '--epochs', '2', '--out', str(out)]
    line = refused(study, [*argv, '--cfg-options', LR], capsys)
    assert line.startswith(
        f'{out}/runs/softmax_seed0/result.json: made by an earlier study.py, which did not record its '
        f"--cfg-options: whether it matches this study's ({LR}) is unknown; use another --out"
    ), line


def test_the_epochs_of_a_study_without_epochs_are_the_configs(study, tmp_path, capsys) -> None:
    out = tmp_path / 'study'
    write_run(out, 'softmax', 0, epochs=2)
    line = refused(study, ['--methods', 'softmax', '--out', str(out)], capsys)
    assert "made with --epochs 2, this study asks for 20 (the config's); use another --out" in line, line


def test_a_stopped_run_of_other_settings_is_not_continued(study, tmp_path, capsys) -> None:
    """A run stopped half-way (its checkpoint and its record, as the study leaves them) is not
    resumed under other settings."""
    run = tmp_path / 'study' / 'runs' / 'dna_seed0'
    run.mkdir(parents=True)
    (run / 'preempted_iter_3.pth').write_bytes(b'')
    record = dict(settings=dict(epochs=2, cfg_options=[]), attempts=[[time.time() - 60, None]])
    (run / RECORD).write_text(json.dumps(record))
    argv = ['--methods', 'dna', '--reference', 'dna', '--epochs', '2', '--out', str(tmp_path / 'study')]
    line = refused(study, [*argv, '--cfg-options', LR], capsys)
    assert line.startswith(f'{run}/{RECORD}: made with --cfg-options (none), this study asks for {LR}')
    # one stopped by an earlier study.py (no record): its settings are unknown
    (run / RECORD).unlink()
    line = refused(study, argv, capsys)
    assert line.startswith(f'{run}: a run begun by an earlier study.py, which did not record its settings')


def test_report_only_refuses_runs_trained_otherwise(study, tmp_path, capsys) -> None:
    out = tmp_path / 'study'
    write_run(out, 'softmax', 0)
    write_run(out, 'dna', 0)
    write_run(out, 'softmax', 1, cfg_options=[LR])
    argv = ['--methods', 'softmax', 'dna', '--seeds', '2', '--report-only', '--out', str(out)]
    line = refused(study, argv, capsys)
    assert line.startswith(
        f'{out}/runs/softmax_seed1/result.json: made with --cfg-options {LR}, '
        f'{out}/runs/softmax_seed0/result.json with --cfg-options (none): runs trained otherwise'
    ), line
    # evaluated on other held-out sets: not summarised together either
    (out / 'runs' / 'softmax_seed1' / 'result.json').unlink()
    (out / 'runs' / 'softmax_seed1').rmdir()
    write_run(out, 'softmax', 1, sets=_sets(HELDOUT[:2]))
    line = refused(study, argv, capsys)
    assert line.startswith(f'{out}/runs/softmax_seed1/result.json: evaluated on the held-out sets demo_2'), (
        line
    )


def _clip_set(study, root: Path, name: str, n: int, heldout: bool = True, clips: int = 4):
    from dna_mm.analysis.study import ClipSet

    root.mkdir(parents=True)
    (root / 'test.txt').write_text(''.join(f'c{i}.mp4 {i % 4}\n' for i in range(clips)))
    return ClipSet(name, root, n, 'demo', heldout)


def test_a_kept_run_of_other_heldout_sets_is_evaluated_on_this_studys(study, tmp_path, monkeypatch, capsys):
    """Kept runs evaluated on ``demo_2`` and ``demo_8``; a study asking for ``demo_4`` evaluates
    their checkpoints on its sets (exact: what a new run gets), so that no table mixes them."""
    import dna_mm.analysis.study as lib

    out = tmp_path / 'study'
    for method in ('softmax', 'dna'):
        run = write_run(out, method, 0)
        (run / 'epoch_2.pth').write_bytes(b'')
        (run / Path(study.CONFIG).name).write_text('')
    sets = [
        _clip_set(study, tmp_path / 'demo', 'demo_test', 2, heldout=False),
        _clip_set(study, tmp_path / 'demo_4', 'demo_4', 4),
    ]
    monkeypatch.setattr(study, 'clip_sets', lambda args, root: sets)
    evaluated = []

    def evaluate(config, checkpoint, clip_sets, batch_size=8, device=None):
        evaluated.append((config, checkpoint, [c.name for c in clip_sets]))
        return _sets([(c.name, c.num_distractors, c.likeness, c.heldout) for c in clip_sets])

    monkeypatch.setattr(lib, 'evaluate', evaluate)
    argv = ['--methods', 'softmax', 'dna', '--seeds', '1', '--epochs', '2', '--distractors', '4']
    study.main([*argv, '--likeness', 'demo', '--heldout-per-class', '1', '--out', str(out)])
    assert [e[2] for e in evaluated] == [['demo_test', 'demo_4']] * 2
    assert evaluated[0][1] == str(out / 'runs' / 'softmax_seed0' / 'epoch_2.pth')
    stdout = capsys.readouterr().out
    assert "softmax seed 0: kept, evaluated again on this study's held-out sets (it had demo_2" in stdout
    result = json.loads((out / 'runs' / 'dna_seed0' / 'result.json').read_text())
    assert result['distractors'] == [4] and [s['name'] for s in result['sets']] == ['demo_test', 'demo_4']
    assert result['test']['top1'] == 50.0 and result['train_test_seconds'] == 90.0  # the run's own
    table = (out / 'table.md').read_text()
    assert '| 4 distractors |' in table and '8 distractors' not in table
    # held-out sets with 8 distractors, one kept run's checkpoint gone: refused before any work
    os.remove(out / 'runs' / 'dna_seed0' / 'epoch_2.pth')
    eight = _clip_set(study, tmp_path / 'demo_8', 'demo_8', 8)
    monkeypatch.setattr(study, 'clip_sets', lambda args, root: [sets[0], eight])
    evaluated.clear()
    argv[argv.index('--distractors') + 1] = '8'
    line = refused(study, [*argv, '--out', str(out)], capsys)
    assert line == (
        f'{out}/runs/dna_seed0/result.json: evaluated on the held-out sets demo_4 (4 clips), demo_test '
        f'(4 clips), this study asks for demo_8 (4 clips), demo_test (4 clips), and its checkpoint '
        f'{out}/runs/dna_seed0/epoch_2.pth is gone to evaluate it again; give the --distractors, '
        '--likeness and --heldout-per-class it was made with, use another --out, or remove the run'
    )
    assert not evaluated


def test_the_seconds_of_a_run_stopped_and_resumed_are_every_attempts(tmp_path, monkeypatch) -> None:
    """A run stopped by ``SIGTERM`` (its study killed with it: the record's attempt has no end,
    its last write, the checkpoint, 100 s after its start) and then by Ctrl-C, resumed: its
    train + test seconds are the three attempts' together."""
    import dna_mm.analysis.study as lib
    from dna_mm.utils import tool_runs

    tool = load_tool('tools/analysis/study.py')
    out = tmp_path / 'study'
    run = out / 'runs' / 'dna_seed0'
    run.mkdir(parents=True)
    start = time.time() - 1000
    record = dict(settings=dict(epochs=2, cfg_options=[]), attempts=[[start, None]])
    (run / RECORD).write_text(json.dumps(record))
    ckpt = run / 'preempted_iter_3.pth'
    ckpt.write_bytes(b'')
    os.utime(ckpt, (start + 100, start + 100))
    os.utime(run / RECORD, (start, start))
    calls = []

    def train_then_test(config, work_dir, opts, dump, repo, name, seed, resume):
        calls.append(resume)
        if len(calls) == 1:
            time.sleep(0.2)
            raise KeyboardInterrupt
        (Path(work_dir) / 'last_checkpoint').write_text(str(ckpt))
        return {'acc/top1': 0.5, 'acc/mean1': 0.5}, 0.01  # this attempt's seconds only

    monkeypatch.setattr(tool_runs, 'train_then_test', train_then_test)
    monkeypatch.setattr(lib, 'evaluate', lambda *args, **kwargs: [])
    args = argparse.Namespace(
        epochs=2,
        imports=[],
        run_options=[],
        batch_size=2,
        device='cpu',
        distractors=[2],
        likeness=['demo'],
        heldout_per_class=1,
    )
    with pytest.raises(KeyboardInterrupt):
        tool.run_one(args, 'dna', 0, tmp_path / 'demo', [], out)
    result = tool.run_one(args, 'dna', 0, tmp_path / 'demo', [], out)
    assert calls == [True, True]
    attempts = json.loads((run / RECORD).read_text())['attempts']
    assert (
        len(attempts) == 3 and attempts[0] == [start, start + 100] and attempts[1][1] - attempts[1][0] >= 0.2
    )
    assert 100.2 <= result['train_test_seconds'] < 200, result['train_test_seconds']
    assert result['epochs'] == 2 and result['cfg_options'] == [] and result['distractors'] == [2]


def test_a_dna_variant_is_a_method_of_its_own(tmp_path) -> None:
    from dna_mm.config import build_part, read_config
    from dna_mm.family import canonical_method, method_attention
    from dna_mm.models.attention import DnAAttention

    for name in ('dna:apm', 'dna:A±', 'A±'):
        assert method_attention(name) == ('dna', {'variant': 'apm'}) and canonical_method(name) == 'dna:apm'
    assert method_attention('QV±+gated') == ('dna', {'variant': 'q_vpm', 'gated': True})
    assert canonical_method('dna:QV±+gated') == 'dna:q_vpm+gated'
    assert method_attention('dna') == ('dna', {}) and method_attention('dna+gated') == (
        'dna',
        {'gated': True},
    )
    assert method_label('dna:apm') == 'DnA (A±)' and method_label('Â±') == 'DnA (Â±)'
    assert method_label('dna:q_vpm+gated') == 'DnA (QV±) + gate'
    assert method_label('dna') == 'DnA (Q±V±)' and method_label('dna+gated') == 'DnA (Q±V±) + gate'
    assert method_label('nobody:apm') == 'nobody:apm'  # a member this process does not have

    study = load_tool('tools/analysis/study.py')
    run = tmp_path / 'dna:apm_seed0'
    run.mkdir()
    config = study.run_config(run, *method_attention('dna:apm'))
    cfg = read_config(str(config), clear_pretrained=True)
    assert cfg.model.backbone.attn_cfg == dict(type='DnAAttention', variant='apm')
    attns = [m for m in build_part(cfg, 'backbone').modules() if isinstance(m, DnAAttention)]
    assert attns and {a.variant for a in attns} == {'apm'}
    assert all(a.q_neg is None and a.v_neg is None and a.alpha is None for a in attns)


def test_variant_methods_are_checked_and_named(study, tmp_path, capsys) -> None:
    out = str(tmp_path / 'out')
    line = refused(study, ['--methods', 'softmax', 'softmax:apm', '--out', out], capsys)
    assert line == (
        "--methods softmax:apm: softmax has no variants; a variant is a DnA attention's (dna:apm, dna:A±, A±)"
    )
    line = refused(study, ['--methods', 'softmax', 'dna:apx', '--out', out], capsys)
    assert line.startswith("--methods dna:apx: unknown DnA variant 'apx'; did you mean 'apm'?"), line
    args = study.parse_args(['--methods', 'softmax', 'A±', 'dna:apm', 'dna', '--reference', 'dna:A±'])
    study.check_args(args)
    assert args.methods == ['softmax', 'dna:apm', 'dna'] and args.reference == 'dna:apm'


def test_one_model_named_twice_is_one_method(study, capsys) -> None:
    """DnA's default variant is ``dna`` and softmax with the gate is ``gated``, the gate and the
    variant in either order: each such model is trained once, with one note per repeat."""
    from dna_mm.family import DNA_DEFAULT_VARIANT, canonical_method
    from dna_mm.models.attention import DnAAttention, GatedAttention, SoftmaxAttention

    assert DnAAttention(16, 2).variant == DNA_DEFAULT_VARIANT
    gated = SoftmaxAttention(16, 2, gated=True)
    assert gated.state_dict().keys() == GatedAttention(16, 2).state_dict().keys()
    assert {canonical_method(m) for m in ('dna', 'dna:qpm_vpm', 'dna:Q±V±', 'Q±V±')} == {'dna'}
    assert {canonical_method(m) for m in ('dna+gated:A±', 'dna:apm+gated', 'A±+gated')} == {'dna:apm+gated'}
    assert canonical_method('softmax+gated') == canonical_method('gated') == 'gated'
    methods = ['softmax', 'dna', 'dna:Q±V±', 'softmax+gated', 'gated', 'dna+gated:A±', 'dna:apm+gated']
    args = study.parse_args(['--methods', *methods, '--reference', 'dna:qpm_vpm'])
    study.check_args(args)
    assert args.methods == ['softmax', 'dna', 'gated', 'dna:apm+gated'] and args.reference == 'dna'
    assert capsys.readouterr().err.splitlines() == [
        'note: --methods dna:Q±V± is dna (the same model): run once',
        'note: --methods gated is softmax+gated (the same model): run once',
        'note: --methods dna:apm+gated is dna+gated:A± (the same model): run once',
    ]


def test_a_variant_is_named_by_the_papers_name_in_the_table_and_figures(tmp_path, monkeypatch) -> None:
    from dna_mm.analysis.plots import study as plots

    study = load_tool('tools/analysis/study.py')
    out = tmp_path / 'study'
    for seed, (a, b, c) in enumerate(((80.0, 70.0, 75.0), (90.0, 85.0, 80.0))):
        write_run(out, 'softmax', seed, a)
        write_run(out, 'dna', seed, b)
        write_run(out, 'dna:apm', seed, c)
    shown = []
    real = plots.color_handles

    def color_handles(labels):
        shown.append(list(labels))
        return real(labels)

    monkeypatch.setattr(plots, 'color_handles', color_handles)
    study.main(['--methods', 'softmax', 'dna', 'A±', '--seeds', '2', '--report-only', '--out', str(out)])
    table = (out / 'table.md').read_text()
    assert '| DnA (A±) | 77.50 ± 3.54 |' in table and '| DnA (Q±V±) | 77.50 ± 10.61 |' in table
    assert 'DnA (A±) top-1 (%)' in table
    assert shown and all(labels == ['softmax', 'DnA (Q±V±)', 'DnA (A±)'] for labels in shown), shown
    summary = json.loads((out / 'study.json').read_text())['summary']
    assert summary['labels']['dna:apm'] == 'DnA (A±)' and set(summary['table']) == {
        'softmax',
        'dna',
        'dna:apm',
    }


def test_a_refusal_names_the_options_that_differ(study, tmp_path, capsys) -> None:
    out = tmp_path / 'study'
    shared = ['model.backbone.embed_dims=32', 'param_scheduler=[]']
    write_run(out, 'softmax', 0, cfg_options=shared)
    argv = ['--methods', 'softmax', '--epochs', '2', '--out', str(out), '--cfg-options', *shared, LR]
    line = refused(study, argv, capsys)
    assert 'made with --cfg-options (none) (besides the 2 both have), this study asks for ' + LR + ';' in line
