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


def test_the_saved_config_repeats_the_run_with_the_seed_in_effect(tiny_video_set, tmp_path) -> None:
    """A config that draws its seed: the work dir's config holds the one drawn; a resume given
    another ``--seed`` goes on with the checkpoint's, and its saved config says so; ``--seed``
    and ``--cfg-options randomness.seed`` that disagree are one line (the options would win)."""
    from mmengine.config import Config

    def trained(work, *args: str, epochs: int = 1) -> int:
        opts = [
            *tiny_run_options(tiny_video_set, epochs=epochs),
            *(['randomness.seed=None'] * ('--seed' not in args)),
            'default_hooks.checkpoint.save_best=acc/top1',
        ]
        run_main(['tools/train.py', DEMO_CONFIG, '--work-dir', str(work), *args, '--cfg-options', *opts])
        (log,) = work.glob('*/*.log')
        used = int(re.search(r'^\s+seed: (\d+)$', log.read_text(), re.M)[1])  # mmengine's record
        saved = Config.fromfile(work / 'timesformer_dna_demo.py').randomness.seed
        return used, saved

    used, saved = trained(tmp_path / 'drawn')
    assert saved == used
    resumed = trained(
        tmp_path / 'resumed', '--resume', str(tmp_path / 'drawn/epoch_1.pth'), '--seed', '7', epochs=2
    )
    assert resumed[1] == used != 7
    # the resumed run's saved config (resume=True) tests a checkpoint, not a resume: its best one
    # (saved without the optimizer) was resumed, and stopped on the optimizer's config
    saved = str(tmp_path / 'resumed/timesformer_dna_demo.py')
    (best,) = (tmp_path / 'drawn').glob('best_acc_top1_epoch_*.pth')
    assert Config.fromfile(saved).resume is True
    out = run_main(['tools/test.py', saved, str(best), '--work-dir', str(tmp_path / 't')])
    assert 'Test results: top-1' in out.stdout
    proc = run_main(
        ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path / 'w'), '--seed', '0', '--cfg-options']
        + ['randomness.seed=7'],
        check=False,
    )
    assert (
        proc.returncode == 2
        and 'train.py: error: --seed 0 and --cfg-options randomness.seed=7 disagree' in proc.stderr
    )


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
