"""Validation metrics are logged at the step the training scalars are (dna_mm.config.prepare.
log_metrics_by_iteration): at the iteration where the run counts iterations. mmengine's
``LoggerHook`` logs them at the epoch by default: an iteration-based run's every validation at step
0, an epoch-based run with ``log_processor.by_epoch=False`` its metrics at 1, 2 beside losses at
iterations 1 ... 8."""

from __future__ import annotations

import json

from conftest import DEMO_CONFIG, REPO, run_main, tiny_run_options
from mmengine.config import Config

from dna_mm.config.prepare import log_metrics_by_iteration


def _steps(work_dir, key: str) -> list[int]:
    (scalars,) = work_dir.glob('*/vis_data/scalars.json')
    rows = [json.loads(line) for line in scalars.read_text().splitlines()]
    return [row['step'] for row in rows if key in row]


def test_an_epoch_run_counting_iterations_logs_its_metrics_at_the_iteration(tiny_video_set, tmp_path) -> None:
    opts = [
        o for o in tiny_run_options(tiny_video_set, epochs=2) if not o.startswith('train_cfg.val_interval')
    ]
    opts += ['train_cfg.val_interval=1', 'log_processor.by_epoch=False']
    run_main(['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path / 'w'), '--cfg-options', *opts])
    assert _steps(tmp_path / 'w', 'loss') == list(range(1, 9))  # 8 clips in batches of 2, twice
    assert _steps(tmp_path / 'w', 'acc/top1') == [4, 8]  # at each epoch's last iteration


def test_the_rule_follows_the_loop_and_the_log_processor_unless_the_logger_says() -> None:
    cfg = Config.fromfile(DEMO_CONFIG)  # by epoch: the metrics at the epoch, as mmengine logs them
    assert not log_metrics_by_iteration(cfg) and 'log_metric_by_epoch' not in cfg.default_hooks.logger
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=8)
    assert log_metrics_by_iteration(cfg) and cfg.default_hooks.logger.log_metric_by_epoch is False
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.log_processor.by_epoch = False
    cfg.default_hooks.logger.log_metric_by_epoch = True  # the user's choice stays
    assert not log_metrics_by_iteration(cfg) and cfg.default_hooks.logger.log_metric_by_epoch is True
    det = Config.fromfile(str(REPO / 'configs' / 'vitdet_dna_coco.py'))  # iteration-based: says so itself
    assert det.default_hooks.logger.log_metric_by_epoch is False
