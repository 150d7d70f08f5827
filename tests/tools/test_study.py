"""tools/analysis/study.py end to end (minutes): `make test-slow`, skipped by `make test` / CI."""

from __future__ import annotations

import json

import pytest
from conftest import run_main, run_tool


@pytest.mark.parametrize(
    'args, message',
    [
        (['--methods', 'dna', 'diff'], "--reference softmax is not one of --methods ['dna', 'diff']"),
        (['--seeds', '0'], '--seeds, --epochs and --heldout-per-class must be at least 1'),
    ],
)
def test_bad_options_are_one_line_before_any_work(tmp_path, args, message) -> None:
    proc = run_main(['tools/analysis/study.py', *args, '--out', str(tmp_path / 'out')], check=False)
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
    table = (out / 'table.md').read_text()
    assert 'DnA (Q±V±)' in table and '±' in table and 'top-1 − softmax [95 % CI]' in table
    for png in ('accuracy_vs_distractors.png', 'target_mass.png'):
        assert (out / png).stat().st_size > 10_000
    again = run_tool(cmd, timeout=600).stdout  # resumed: every finished run kept, nothing trained
    assert again.count(': kept (') == 4 and 'tools/train.py' not in again
    assert json.loads((out / 'study.json').read_text())['summary']['table'] == summary['table']
