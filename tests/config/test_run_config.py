"""What a person running the tools sees (dna_mm.config.prepare): the schedule follows
``max_epochs`` / ``max_iters``, TensorBoard, a terminal without the setup dump."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DEMO_CONFIG, REPO, run_main, tiny_run_options
from mmengine.config import Config

from dna_mm.config import enable_tensorboard, prepare_cfg, sync_schedule


def test_max_epochs_moves_what_the_config_derived_from_it() -> None:
    cfg = prepare_cfg(Config.fromfile(DEMO_CONFIG), DEMO_CONFIG, cfg_options={'train_cfg.max_epochs': 3})
    cosine = cfg.param_scheduler[1]
    assert (cosine.type, cosine.T_max, cosine.end, cosine.begin) == ('CosineAnnealingLR', 2, 3, 1)
    assert cfg.param_scheduler[0].end == 1  # the warm-up epoch stays
    assert cfg.train_cfg.val_interval == 3 and cfg.default_hooks.checkpoint.interval == 3
    # values given explicitly are kept
    cfg = prepare_cfg(
        Config.fromfile(DEMO_CONFIG),
        DEMO_CONFIG,
        cfg_options={'train_cfg.max_epochs': 3, 'train_cfg.val_interval': 1},
    )
    assert cfg.train_cfg.val_interval == 1 and cfg.param_scheduler[1].T_max == 2
    # one epoch: the cosine that begins after the warm-up epoch is dropped, not made empty
    cfg = prepare_cfg(Config.fromfile(DEMO_CONFIG), DEMO_CONFIG, cfg_options={'train_cfg.max_epochs': 1})
    assert [s.type for s in cfg.param_scheduler] == ['LinearLR']
    # a 15-epoch step schedule: its end follows, intervals of 1 stay
    cfg = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_ntu60.py'))
    cfg.train_cfg.max_epochs = 5
    assert sync_schedule(cfg, 15) == [
        'param_scheduler[0](MultiStepLR).milestones [11, 14] -> [4, 5]',
        'param_scheduler[0](MultiStepLR).end 15 -> 5',
    ]
    assert cfg.train_cfg.val_interval == 1
    # a step schedule after a warm-up: mmengine counts its milestones from its begin
    cfg = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_ntu60.py'))
    cfg.param_scheduler = [dict(type='MultiStepLR', begin=5, end=40, by_epoch=True, milestones=[20, 30])]
    cfg.train_cfg.max_epochs = 20
    assert sync_schedule(cfg, 40) == [
        'param_scheduler[0](MultiStepLR).milestones [20, 30] -> [9, 13]',  # 20 / 35 and 30 / 35 of 15
        'param_scheduler[0](MultiStepLR).end 40 -> 20',
    ]
    assert _drops(cfg.param_scheduler[0], 20) == [14, 18]  # epochs 14 and 18 of 20 (25 and 35 of 40)


def _drops(sched: dict, epochs: int) -> list[int]:
    """The epochs at which mmengine's scheduler built from ``sched`` lowers the lr."""
    import torch
    from mmengine.registry import PARAM_SCHEDULERS

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = PARAM_SCHEDULERS.build(dict(sched, optimizer=optimizer))
    drops, lr = [], 1.0
    for epoch in range(1, epochs):
        scheduler.step()
        if optimizer.param_groups[0]['lr'] < lr:
            drops.append(epoch)
        lr = optimizer.param_groups[0]['lr']
    return drops


def test_a_new_max_iters_moves_an_iteration_schedule() -> None:
    """ViTDet's 184,375 iterations with steps at 88.9% / 96.3%: a 1000-iteration run keeps
    the steps' fractions; the 250-iteration warm-up and the 5000 intervals are left alone."""
    from mmengine.logging import MMLogger

    path = str(REPO / 'configs' / 'vitdet_dna_coco.py')
    MMLogger.get_instance('sync_iters')
    cfg = prepare_cfg(Config.fromfile(path), path, cfg_options={'train_cfg.max_iters': 1000})
    warmup, steps = cfg.param_scheduler
    assert (warmup.end, steps.end, steps.milestones) == (250, 1000, [889, 963])
    assert cfg.train_cfg.val_interval == 5000
    # given explicitly, a scheduler is left as written
    cfg = prepare_cfg(
        Config.fromfile(path), path, cfg_options={'train_cfg.max_iters': 1000, 'param_scheduler.1.end': 900}
    )
    assert (cfg.param_scheduler[1].end, cfg.param_scheduler[1].milestones) == (900, [163889, 177546])


def _event_scalars(work_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = work_dir.glob('*/vis_data/events.out.tfevents.*')
    acc = EventAccumulator(str(events.parent))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()['scalars']}


def test_train_run_schedule_tensorboard_and_a_quiet_terminal(tiny_video_set, tmp_path) -> None:
    """One real 3-epoch run of the demo config with its cosine schedule (tiny model)."""
    opts = [
        o
        for o in tiny_run_options(tiny_video_set, epochs=3)
        if o != 'param_scheduler=[]' and not o.startswith('train_cfg.val_interval')
    ]
    proc = run_main(
        ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path), '--tensorboard', '--cfg-options', *opts]
    )
    out = proc.stdout
    assert 'train_cfg.max_epochs 20 -> 3, so also: param_scheduler[1](CosineAnnealingLR).T_max 19 -> 2' in out

    # the lr of epoch 3 is the cosine's midpoint (4.97e-4 when T_max stayed at 19)
    scalars = _event_scalars(tmp_path)
    lr = dict(scalars['lr'])
    assert len(lr) == 12  # 4 iterations x 3 epochs, each logged
    assert lr[12] == pytest.approx(2.5e-4, rel=1e-3) and lr[5] == pytest.approx(5e-4, rel=1e-3)
    assert len(scalars['loss']) == 12 and 'acc/top1' in scalars
    dumped = Config.fromfile(str(tmp_path / 'timesformer_dna_demo.py'))
    assert dumped.default_hooks.checkpoint.interval == 3 and dumped.train_cfg.val_interval == 3

    # the terminal starts with the run; the setup dump is in the log file
    head = out[: out.index('Epoch(train)')]
    for dump in ('System environment', 'Config:', 'Hooks will be executed'):
        assert dump not in out
    assert len(head.splitlines()) < 25, head
    (log,) = tmp_path.glob('*/*.log')
    text = log.read_text()
    assert 'System environment' in text and 'Config:' in text and 'Hooks will be executed' in text
    assert f'environment, config and hook order: see {log}' in out
    # mmengine's notices about MMAction2's DecordInit (the demo config's) stay in the log file
    assert '"FileClient" will be deprecated' in text
    assert 'FileClient' not in out and 'HardDiskBackend' not in out


def test_verbose_prints_the_setup_dump(tiny_video_set, tmp_path, capsys) -> None:
    import argparse

    from mmengine.config import DictAction

    from dna_mm.engine import build_runner

    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    options = parser.parse_args(['--o', *tiny_run_options(tiny_video_set)]).o
    for verbose in (False, True):
        cfg = prepare_cfg(
            Config.fromfile(DEMO_CONFIG),
            DEMO_CONFIG,
            work_dir=str(tmp_path / str(verbose)),
            cfg_options=options,
        )
        cfg.log_setup_to_console, cfg.experiment_name = verbose, f'verbose_{verbose}'
        build_runner(cfg)
        shown = capsys.readouterr().out
        assert ('System environment' in shown) is verbose and ('Config:' in shown) is verbose


def test_enable_tensorboard_adds_the_backend_once() -> None:
    cfg = enable_tensorboard(enable_tensorboard(Config.fromfile(DEMO_CONFIG)))
    assert [b['type'] for b in cfg.visualizer.vis_backends] == ['LocalVisBackend', 'TensorboardVisBackend']


def test_the_runner_builds_the_loops_the_config_names(tiny_video_set, tmp_path, capsys) -> None:
    """dna_mm's configs name the exactly resumable loop and RNGStateHook; a config naming
    mmengine's loop trains with it, and one line says that exact resume is not guaranteed."""
    import argparse

    from mmengine.config import DictAction
    from mmengine.runner import EpochBasedTrainLoop

    from dna_mm.engine import (
        PendingGradsHook,
        ResumableEpochBasedTrainLoop,
        RNGStateHook,
        UnreadableVideosTestLoop,
        build_runner,
    )

    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    options = parser.parse_args(['--o', *tiny_run_options(tiny_video_set)]).o
    stock = {'train_cfg.type': 'EpochBasedTrainLoop', 'custom_hooks': [], 'test_cfg.type': 'TestLoop'}
    for name, extra in (('named', {}), ('stock', stock)):
        cfg = prepare_cfg(
            Config.fromfile(DEMO_CONFIG),
            DEMO_CONFIG,
            work_dir=str(tmp_path / name),
            cfg_options={**options, **extra},
        )
        cfg.experiment_name = f'loops_{name}'
        runner = build_runner(cfg)
        loop, hooks = runner.train_loop, [type(h) for h in runner.hooks]
        shown = capsys.readouterr().out
        if name == 'named':
            assert type(loop) is ResumableEpochBasedTrainLoop and {RNGStateHook, PendingGradsHook} <= set(
                hooks
            )
            assert type(runner.test_loop) is UnreadableVideosTestLoop
            assert 'exact resume not guaranteed' not in shown
        else:
            assert type(loop) is EpochBasedTrainLoop and RNGStateHook not in hooks
            assert type(runner.test_loop).__name__ == 'TestLoop'
            (line,) = [ln for ln in shown.splitlines() if 'exact resume not guaranteed' in ln]
            assert 'train_cfg.type is EpochBasedTrainLoop' in line


def test_skip_unreadable_needs_the_loop_that_skips(caplog) -> None:
    """``tools/test.py --skip-unreadable``: dna_mm's runtime names the loop that can skip; a
    config naming mmengine's ``TestLoop`` gets it, and a log line says so."""
    from mmengine.logging import MMLogger

    from dna_mm.config import skip_unreadable

    logger = MMLogger.get_current_instance()  # print_log's; it does not propagate to caplog's
    logger.addHandler(caplog.handler)
    try:
        cfg = skip_unreadable(Config.fromfile(DEMO_CONFIG))
        assert cfg.test_cfg == dict(type='UnreadableVideosTestLoop', skip_unreadable=True)
        assert '--skip-unreadable' not in caplog.text
        stock = Config.fromfile(DEMO_CONFIG)
        stock.test_cfg = dict(type='TestLoop')
        assert skip_unreadable(stock).test_cfg == dict(type='UnreadableVideosTestLoop', skip_unreadable=True)
    finally:
        logger.removeHandler(caplog.handler)
    assert "test_cfg.type 'TestLoop' -> 'UnreadableVideosTestLoop'" in caplog.text


def test_every_top_k_accuracy_is_printed_in_percent() -> None:
    """An ``AccMetric`` with ``topk=(1, 2, 3)`` (or MMPretrain's ``Accuracy``): each top-k in %,
    as top-1 is, not some in % and some as fractions."""
    from dna_mm.config import format_metrics

    line = format_metrics({'acc/top1': 0.25, 'acc/top2': 0.5, 'acc/top3': 0.75, 'acc/mean1': 0.25})
    assert line == 'Test results: top-1: 25.00  top-2: 50.00  top-3: 75.00  mCA: 25.00'
    assert (
        format_metrics({'accuracy/top1': 80.0, 'accuracy/top3': 95.5})
        == 'Test results: top-1: 80.00  top-3: 95.50'
    )


def test_a_multi_label_map_is_printed_in_percent_and_other_floats_shortly() -> None:
    """MMAction2's ``AccMetric`` mAP (a fraction) and MMPretrain's ``AveragePrecision`` (in %)
    as ``mAP`` in %; a metric of another name keeps its key, a float to 6 significant digits."""
    from dna_mm.config import format_metrics

    line = format_metrics({'acc/mean_average_precision': 0.34644342452277477, 'ood/auroc': 0.8123456789})
    assert line == 'Test results: mAP: 34.64  ood/auroc: 0.812346'
    assert (
        format_metrics({'multi-label/mAP': 70.83333587646484, 'count': 3})
        == 'Test results: mAP: 70.83  count: 3'
    )
