"""tools/analysis/study.py end to end (minutes): `make test-slow`, skipped by `make test` / CI."""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path

import pytest
import torch
from conftest import REPO, load_tool, run_main, run_tool
from mmengine.hooks import Hook

from dna_mm.analysis.plots.study import method_label
from dna_mm.analysis.study_runs import RUN_RECORD
from dna_mm.checkpoint import weights_only_loads


@pytest.mark.parametrize(
    'args, message',
    [
        (['--methods', 'dna', 'diff'], "--reference softmax is not one of --methods ['dna', 'diff']"),
        (['--seeds', '0'], '--seeds must be at least 1, got 0'),
        (['--heldout-per-class', '0'], '--heldout-per-class must be at least 1, got 0'),
        (['--distractors', '2', '-1'], '--distractors must be at least 0 each, got 2 -1'),
        (['--report-only'], '--out {out}: no study there (no runs/ folder) for --report-only to summarise'),
        (
            ['--cfg-options', 'randomness.seed=7'],
            '--cfg-options randomness.seed=7: the study gives each run its seed',
        ),
    ],
)
def test_bad_options_are_one_line_before_any_work(tmp_path, args, message) -> None:
    proc = run_main(['tools/analysis/study.py', *args, '--out', str(tmp_path / 'out')], check=False)
    message = message.format(out=tmp_path / 'out')
    assert proc.returncode == 2 and f'study.py: error: {message}' in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr and not (tmp_path / 'out').exists()


@pytest.mark.slow
@pytest.mark.integration
def test_two_seed_one_epoch_study_runs_resumes_and_reports(tmp_path) -> None:
    out = tmp_path / 'study'
    cmd = [
        'tools/analysis/study.py',
        '--methods', 'softmax', 'dna',
        '--seeds', '2',
        '--epochs', '1',
        '--distractors', '2', '6',
        '--heldout-per-class', '2',
        '--data-root', str(tmp_path / 'demo'),
        '--out', str(out),
    ]  # fmt: skip
    first = run_tool(cmd, timeout=1800).stdout
    assert '[4/4] dna seed 1: top-1' in first, first[-3000:]
    study = json.loads((out / 'study.json').read_text())
    summary, runs = study['summary'], study['runs']
    assert summary['seeds'] == [0, 1] and summary['methods'] == ['softmax', 'dna']
    row = summary['table']['dna']
    assert row['top1']['n'] == 2 and row['top1']['std'] is not None
    assert (
        row['diff_top1']['n'] == 2
        and row['diff_top1']['low'] <= row['diff_top1']['mean'] <= row['diff_top1']['high']
    )
    for run in runs:
        sets = {s['name']: s for s in run['sets']}
        assert set(sets) == {'demo_test', 'demo_2', 'demo_6', 'color_2', 'color_6'}
        # the in-process evaluation (eager attention) agrees with tools/test.py (fast path), to a clip
        assert abs(sets['demo_test']['top1'] - run['test']['top1']) <= 100 / 64 + 1e-6, run['test']
        branches = {r['branch'] for r in sets['demo_test']['mass']}
        assert branches == ({'attn'} if run['method'] == 'softmax' else {'pos', 'neg', 'combined'})
        assert all(0 <= r['mean'] <= 1 and 0 < r['uniform'] < 1 for r in sets['demo_test']['mass'])
    assert {c['num_distractors'] for c in summary['curve']['dna'].values()} == {2, 6}
    # each seed trains its own model (tools/train.py --seed overrides the config's randomness.seed)
    with weights_only_loads():
        first, second = (
            torch.load(out / 'runs' / f'dna_seed{s}' / 'epoch_1.pth', map_location='cpu')['state_dict']
            for s in (0, 1)
        )
    assert any(not torch.equal(first[k], second[k]) for k in first)
    table = (out / 'table.md').read_text()
    label = method_label('softmax')
    assert f'| {method_label("dna")} |' in table and '±' in table and f'top-1 − {label} [95 % CI]' in table
    for png in ('accuracy_vs_distractors.png', 'target_mass.png'):
        assert (out / png).stat().st_size > 10_000
    again = run_tool(cmd, timeout=600).stdout  # resumed: every finished run kept, nothing trained
    assert again.count(': kept (') == 4 and 'tools/train.py' not in again
    assert json.loads((out / 'study.json').read_text())['summary']['table'] == summary['table']


def _result(method: str, seed: int, top1: float) -> dict:
    """A finished run as ``result.json`` holds it (numbers made up, layout as written)."""
    branches = ['attn'] if method == 'softmax' else ['pos', 'neg', 'combined']
    mass = [
        dict(
            layer=layer,
            group=group,
            kind=method,
            branch=b,
            region=region,
            mean=0.3 + 0.01 * seed,
            uniform=0.2,
        )
        for layer in range(3)
        for group in ('temporal', 'spatial')
        for region in ('target', 'distractors')
        for b in branches
    ]
    sets = [
        dict(
            name='demo_test',
            num_distractors=2,
            likeness='demo',
            heldout=False,
            top1=top1,
            mca=top1,
            mass=mass,
        )
    ]
    sets += [
        dict(
            name=f'{like}_{n}',
            num_distractors=n,
            likeness=like,
            heldout=True,
            top1=top1 - n,
            mca=top1 - n,
            mass=mass,
        )
        for like in ('demo', 'color')
        for n in (2, 8)
    ]
    test = dict(top1=top1, mca=top1, line=f'Test results: top-1: {top1:.2f}  mCA: {top1:.2f}')
    return dict(
        method=method, seed=seed, epochs=None, test=test, train_test_seconds=90.0, eval_seconds=5.0, sets=sets
    )


def test_report_only_summarises_the_finished_runs(tmp_path) -> None:
    out = tmp_path / 'study'
    for method, seed, top1 in (
        ('softmax', 0, 84.375),
        ('dna', 0, 79.6875),
        ('softmax', 1, 90.625),
        ('dna', 1, 87.5),
    ):
        run = out / 'runs' / f'{method}_seed{seed}'
        run.mkdir(parents=True)
        (run / 'result.json').write_text(json.dumps(_result(method, seed, top1)))
    command = 'python tools/analysis/study.py --methods softmax dna diff --seeds 2 --out study'
    (out / 'study.json').write_text(json.dumps(dict(summary=dict(command=command))))  # an earlier report
    proc = run_main(['tools/analysis/study.py', '--report-only', '--out', str(out)])
    assert json.loads((out / 'study.json').read_text())['summary']['command'] == command
    assert 'diff seed 0: not finished yet' in proc.stdout and 'softmax seed 1: kept' in proc.stdout
    table = (out / 'table.md').read_text().splitlines()
    softmax, dna = method_label('softmax'), method_label('dna')  # as the members name themselves
    # DnA - softmax per seed: -4.6875, -3.125 -> mean -3.91, interval ± 12.706 · 1.105 / √2
    assert table[2].startswith(f'| {softmax} | 87.50 ± 4.42 | 87.50 ± 4.42 | — |')
    assert table[3].startswith(f'| {dna} | 83.59 ± 5.52 | 83.59 ± 5.52 | -3.91 [-13.83, +6.02] |')
    assert table[3].endswith('| 2 | 90 s |')
    # the held-out sets (top-1 minus the number of distractors in the made-up runs), paired the same
    assert table[5].startswith(f'| held-out set | {softmax} top-1 (%) | {dna} top-1 (%) |')
    assert '| 2 distractors | 85.50 ± 4.42 | 81.59 ± 5.52 | -3.91 [-13.83, +6.02] |' in table
    colour = "| 8 distractors in the target's colour | 79.50 ± 4.42 | 75.59 ± 5.52 | -3.91 [-13.83, +6.02] |"
    assert colour in table
    for png in ('accuracy_vs_distractors.png', 'target_mass.png'):
        assert (out / png).stat().st_size > 10_000


def test_a_gated_method_names_its_member_and_the_gate() -> None:
    from dna_mm.family import method_attention

    assert method_attention('dna') == ('dna', {})
    assert method_attention('dna+gated') == ('dna', {'gated': True})
    assert method_label('dna+gated') == f'{method_label("dna")} + gate'
    assert method_label('nobody+gated') == 'nobody+gated'  # a member this process does not have


def test_a_gated_method_runs_its_own_config_with_the_gate(tmp_path) -> None:
    """``dna+gated``: the run's config is the demo's with ``attn_cfg=dict(type='DnAAttention',
    gated=True)``, every attention of the built model has the gate (keys ``...attn.gate.*``)."""
    from dna_mm.config import build_part, read_config

    study = load_tool('tools/analysis/study.py')
    config = study.run_config(tmp_path, 'dna', {'gated': True})
    cfg = read_config(str(config), clear_pretrained=True)
    assert cfg.model.backbone.attn_cfg == dict(type='DnAAttention', gated=True)
    keys = build_part(cfg, 'backbone').state_dict().keys()
    gates = [k for k in keys if k.endswith('.gate.weight')]
    assert len(gates) == 2 * cfg.model.backbone.num_transformer_layers  # temporal and spatial, each layer
    plain = build_part(read_config(str(REPO / study.CONFIG), clear_pretrained=True), 'backbone').state_dict()
    assert set(keys) - set(plain) == {k for k in keys if '.gate.' in k}


def test_an_unknown_member_in_a_gated_method_is_one_line(tmp_path) -> None:
    cmd = ['tools/analysis/study.py', '--methods', 'softmax', 'nope+gated', '--out', str(tmp_path / 'out')]
    proc = run_main(cmd, check=False)
    said = "study.py: error: --methods nope+gated: attention type 'nope' is not registered"  # as given
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr


class StopAt(Hook):
    """Send this process ``SIGTERM`` (a real signal) at the end of iteration ``at`` (1-based): the
    run's ``PreemptionHook`` saves ``preempted_iter_<at>.pth`` and stops, as a preempted run does."""

    priority = 'NORMAL'  # before PreemptionHook ('LOWEST'), which then sees it in the same iteration

    def __init__(self, at: int) -> None:
        self.at = at

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 == self.at:
            os.kill(os.getpid(), signal.SIGTERM)


#: the study's runs at a seconds-long size: a 1-block, 32-wide TimeSformer, batch 2, no workers
TINY_RUN = [
    'model.backbone.embed_dims=32',
    'model.backbone.num_heads=2',
    'model.backbone.num_transformer_layers=1',
    'model.cls_head.in_channels=32',
    'default_hooks.logger.interval=1',
    'param_scheduler=[]',
] + [f'{s}_dataloader.{k}' for s in ('train', 'val', 'test') for k in ('batch_size=2', 'num_workers=0')]


def test_a_run_stopped_half_way_resumes_from_its_checkpoint(tiny_video_set, tmp_path, monkeypatch) -> None:
    """A study's run preempted at iteration 3 of 4 (``SIGTERM``: ``preempted_iter_3.pth``); the
    study started again trains that run on from there (``tools/train.py --resume``), not anew.
    The tools run in this process (``run_main``), each as the study runs it."""
    from mmengine.registry import HOOKS

    from dna_mm.utils import tool_runs

    HOOKS.register_module('StudyStopAt', module=StopAt, force=True)
    study = load_tool('tools/analysis/study.py')
    out = tmp_path / 'study'
    run_dir = out / 'runs' / 'dna_seed0'
    opts = tool_runs.demo_options('dna', str(tiny_video_set), 1) + TINY_RUN
    stopping = tmp_path / 'stopping' / Path(study.CONFIG).name  # the demo's, with the stop
    stopping.parent.mkdir()
    stopping.write_text(
        f"_base_ = [{str(REPO / study.CONFIG)!r}]\ncustom_hooks = [dict(type='StudyStopAt', at=3)]\n"
    )
    cut = ['tools/train.py', str(stopping), '--work-dir', str(run_dir), '--seed', '0', '--cfg-options', *opts]
    assert run_main(cut, check=False).returncode == 128 + signal.SIGTERM
    assert (run_dir / 'preempted_iter_3.pth').is_file()

    commands = []

    def in_process(args: list[str], repo, name: str = 'demo', work_dir=None) -> str:
        commands.append(args)
        return run_main(args).stdout

    monkeypatch.setattr(tool_runs, 'run_script', in_process)
    args = argparse.Namespace(
        epochs=1,
        imports=[],
        run_options=TINY_RUN,
        batch_size=2,
        device='cpu',
        distractors=[],
        likeness=[],
        heldout_per_class=1,
    )
    result = study.run_one(args, 'dna', 0, tiny_video_set, [], out)
    train = commands[0]
    assert train[0] == 'tools/train.py' and '--resume' in train, train
    assert not list(run_dir.glob('earlier_run_*'))  # nothing set aside: the run went on
    logs = sorted(run_dir.glob('*/*.log'))
    assert len(logs) == 3, logs  # the cut run's, the resumed one's, the test's
    resumed = logs[1].read_text()
    assert 'Epoch(train) [1][4/4]' in ' '.join(resumed.split()) and '[1][1/4]' not in resumed
    assert result['test']['line'].startswith('Test results: top-1: ')
    assert (run_dir / 'epoch_1.pth').is_file() and (run_dir / 'result.json').is_file()
    # the seconds of both attempts: the cut one's (from its first file to its last) and this one's
    attempts = json.loads((run_dir / RUN_RECORD).read_text())['attempts']
    assert len(attempts) == 2 and attempts[0][1] - attempts[0][0] > 0
    assert result['train_test_seconds'] == pytest.approx(sum(end - start for start, end in attempts))
