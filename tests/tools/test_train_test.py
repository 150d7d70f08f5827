"""tools/train.py then tools/test.py on the tiny demo model (in process), and the same through
tools/dist_train.sh / dist_test.sh: two gloo processes each."""

from __future__ import annotations

import csv
import os
import re
import sys

import pytest
from conftest import DEMO_CONFIG, free_port, run_cmd, run_main, tiny_run_options

from dna_mm.config import format_metrics
from dna_mm.utils.tool_runs import read_test_metrics


@pytest.mark.parametrize('attn', ['dna', 'softmax'])
def test_train_then_test_through_the_tools(attn, tiny_video_set, tmp_path) -> None:
    opts = tiny_run_options(tiny_video_set, attn)
    run_main(
        ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path), '--seed', '3', '--cfg-options', *opts]
    )
    ckpt = tmp_path / 'epoch_1.pth'
    assert ckpt.exists()
    saved = tmp_path / 'timesformer_dna_demo.py'  # the config training saved in its work dir
    trained_with = saved.read_text()
    # --seed wins over the config's randomness.seed (0): mmengine's own record of the run's seed
    (log,) = tmp_path.glob('*/*.log')
    assert re.search(r'^\s+seed: 3$', log.read_text(), re.M), 'the run did not use --seed 3'
    out = run_main(
        [
            'tools/test.py',
            DEMO_CONFIG,
            str(ckpt),
            '--work-dir',
            str(tmp_path),
            '--dump',
            str(tmp_path / 'preds.csv'),
            '--cfg-options',
            *opts,
        ]
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith('Test results:'))
    assert format_metrics(read_test_metrics(tmp_path)) == line  # the JSON mmengine writes says the same
    assert re.search(r'top-1: [\d.]+ .*mCA: [\d.]+', line)
    assert 'top-5' not in line  # 4 classes: top-k only for k < the number of classes
    assert 'WARNING' not in out, out  # no prefix notice for --dump's metric, no FileClient notices
    rows = list(csv.DictReader(open(tmp_path / 'preds.csv')))
    assert len(rows) == 4 and {'video', 'label', 'pred', 'score', 'top5'} <= set(rows[0])
    # the tests into the work dir left training's config there as it was (not with --dump's
    # evaluator added), and it tests as it is, after a test that added a confusion matrix too
    assert saved.read_text() == trained_with
    if attn == 'dna':
        for extra in (['--confusion-matrix', str(tmp_path / 'cm.png')], []):
            again = run_main(['tools/test.py', str(saved), str(ckpt), '--work-dir', str(tmp_path), *extra])
            assert [ln for ln in again.stdout.splitlines() if ln.startswith('Test results:')] == [line]
            assert saved.read_text() == trained_with
        assert (tmp_path / 'cm.png').is_file()


@pytest.mark.integration
def test_distributed_train_and_test_with_gloo(tiny_video_set, tmp_path) -> None:
    env = {**os.environ, 'PYTHON': sys.executable, 'PORT': str(free_port()), 'OMP_NUM_THREADS': '1'}
    opts = tiny_run_options(tiny_video_set)
    run_cmd(
        [
            'bash',
            'tools/dist_train.sh',
            DEMO_CONFIG,
            '2',
            '--work-dir',
            str(tmp_path),
            '--cfg-options',
            *opts,
        ],
        env=env,
    )
    assert (tmp_path / 'epoch_1.pth').exists()
    env['PORT'] = str(free_port())
    out = run_cmd(
        [
            'bash',
            'tools/dist_test.sh',
            DEMO_CONFIG,
            str(tmp_path / 'epoch_1.pth'),
            '2',
            '--work-dir',
            str(tmp_path),
            '--cfg-options',
            *opts,
        ],
        env=env,
    ).stdout
    assert out.count('Test results:') == 1  # printed by rank 0 only
    logs = list(tmp_path.glob('*/*.log'))
    assert any(
        'world_size: 2' in p.read_text() or 'Distributed training: True' in p.read_text() for p in logs
    )
