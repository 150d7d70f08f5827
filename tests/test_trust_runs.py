"""What a person running the tools sees: the schedule follows ``max_epochs``, TensorBoard,
a terminal without the setup dump, and ``convert_checkpoint``'s head count and help."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, run_tool, tiny_run_options
from mmengine.config import Config

from dna_mm.apis import enable_tensorboard, prepare_cfg, sync_schedule


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
    proc = run_tool(
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


def test_verbose_prints_the_setup_dump(tiny_video_set, tmp_path, capsys) -> None:
    import argparse

    from mmengine.config import DictAction

    from dna_mm.apis import build_runner

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


def _convert_tool():
    path = REPO / 'tools' / 'convert_checkpoint.py'
    spec = importlib.util.spec_from_file_location('convert_checkpoint', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    'command,expected',
    [
        (
            'softmax-to-dna',
            [
                '--config CONFIG',
                '--num-heads NUM_HEADS',
                '(default: 0.0001)',
                '(default: -0.0001)',
                '(default: qpm_vpm)',
            ],
        ),
        ('dna-to-softmax', ['--layout {timm,mha}', '(default: timm)', 'CHANGES THE FUNCTION']),
        (
            'official-to-dna-mm',
            [
                '--combine {add,sub}',
                '(default: add)',
                'vit/dna_models.py',
                'vit/dna.py',
                'VisCoP',
                'TimeSformer',
            ],
        ),
    ],
)
def test_each_subcommand_help_shows_its_own_options(command, expected, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        _convert_tool().parse_args([command, '--help'])
    assert done.value.code == 0
    text = re.sub(r'\s+', ' ', capsys.readouterr().out)
    for item in expected:
        assert item in text, (item, text)
    others = {
        'softmax-to-dna': '--num-heads',
        'dna-to-softmax': '--layout',
        'official-to-dna-mm': '--combine',
    }
    assert not any(flag in text for cmd, flag in others.items() if cmd != command)


def test_softmax_to_dna_takes_the_heads_from_the_config_or_refuses(tmp_path, capsys) -> None:
    """The report's case: a 4-head, 96-wide model (the demo's); no guess from the width."""
    from mmaction.registry import MODELS

    demo = Config.fromfile(DEMO_CONFIG).model.backbone
    common = dict(
        type='DnATimeSformer',
        num_frames=demo.num_frames,
        img_size=demo.img_size,
        patch_size=demo.patch_size,
        embed_dims=96,
        num_heads=4,
        num_transformer_layers=1,
    )
    softmax = MODELS.build(dict(common, temporal_attn='softmax', spatial_attn='softmax')).eval()
    torch.save({'state_dict': softmax.state_dict()}, tmp_path / 'softmax.pth')
    tool = _convert_tool()

    assert tool.main(['softmax-to-dna', str(tmp_path / 'softmax.pth'), str(tmp_path / 'x.pth')]) == 2
    err = capsys.readouterr().err
    assert 'softmax.pth' in err and '--num-heads' in err and '--config' in err
    assert not (tmp_path / 'x.pth').exists()

    assert (
        tool.main(
            [
                'softmax-to-dna',
                str(tmp_path / 'softmax.pth'),
                str(tmp_path / 'dna.pth'),
                '--config',
                DEMO_CONFIG,
            ]
        )
        == 0
    )
    converted = torch.load(tmp_path / 'dna.pth', weights_only=True)['state_dict']
    alphas = {k: v for k, v in converted.items() if k.endswith('alpha')}
    assert len(alphas) == 2 and all(v.tolist() == [0.5] * 4 for v in alphas.values())
    dna = MODELS.build(dict(common, temporal_attn='dna', spatial_attn='dna')).eval()
    dna.load_state_dict(converted, strict=True)
    x = torch.randn(1, 3, demo.num_frames, demo.img_size, demo.img_size)
    with torch.no_grad():
        torch.testing.assert_close(dna(x), softmax(x), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize('combine,sign', [('add', 1.0), ('sub', -1.0)])
def test_official_to_dna_mm_passes_the_combine_sign(combine, sign, tmp_path) -> None:
    """The authors' TimeSformer / older ViT layout (qkv, q_neg, v_neg, neg_scalers)."""
    c, heads = 8, 2
    sd = {
        'blocks.0.attn.qkv.weight': torch.randn(3 * c, c),
        'blocks.0.attn.qkv.bias': torch.randn(3 * c),
        'blocks.0.attn.q_neg.weight': torch.randn(c, c),
        'blocks.0.attn.v_neg.weight': torch.randn(c, c),
        'blocks.0.attn.neg_scalers': torch.tensor([0.3, -0.7]).reshape(1, heads, 1, 1),
        'blocks.0.attn.proj.weight': torch.randn(c, c),
    }
    torch.save({'model': sd}, tmp_path / 'authors.pth')
    args = ['official-to-dna-mm', str(tmp_path / 'authors.pth'), str(tmp_path / 'ours.pth')]
    assert _convert_tool().main(args + (['--combine', combine] if combine == 'sub' else [])) == 0
    ours = torch.load(tmp_path / 'ours.pth', weights_only=True)['model']
    assert ours['blocks.0.attn.alpha'].tolist() == pytest.approx([sign * 0.3, sign * -0.7])
    assert torch.equal(ours['blocks.0.attn.q_neg.weight'], sd['blocks.0.attn.q_neg.weight'])
