"""The authors' checkpoint chain (github rjccv/DnA), with files shaped exactly as their code writes
them (:mod:`authors_models`):

* ImageNet DnA-ViT, ``vit/main.py``: ``{'model', 'optimizer', 'lr_scheduler', 'epoch',
  'model_ema', 'scaler', 'args'}`` with ``args`` a real ``argparse.Namespace`` of their flags;
  it goes through every route (TimeSformer ``pretrained``, ViTDet ``init_cfg``,
  ``convert_checkpoint``, the strict whole-model load, timm's ``pretrained_cfg_overlay``);
* their fine-tuned TimeSformer, PySlowFast's ``save_checkpoint``: ``{'epoch', 'model_state',
  'optimizer_state', 'cfg'}`` with ``model.*`` keys; it loads whole (head included) into the
  NTU config's recognizer and gives their logits (float64), through ``tools/test.py`` too.
"""

from __future__ import annotations

import argparse
import os
import re
import types
from pathlib import Path

import pytest
import timm
import torch
from authors_models import (
    AuthorsDnABase,
    AuthorsDnAViT,
    save_pyslowfast_checkpoint,
    save_vit_main_checkpoint,
    vit_main_args,
)
from conftest import REPO, lists_of_another_label_set, load_tool, run_main, tiny_backbone
from tolerance import REORDERED, assert_close_as, tolerance

from dna_mm.checkpoint import (
    CheckpointMismatchError,
    UnsafeCheckpointError,
    load_whole_model,
    read_checkpoint,
)

C, H, DEPTH, CLASSES = 32, 4, 2, 5
NTU_CONFIG = REPO / 'configs' / 'timesformer_dna_ntu60.py'


class _Payload:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


@pytest.fixture(scope='module')
def vit_main_file(tmp_path_factory) -> tuple[Path, AuthorsDnAViT, torch.nn.Module]:
    """``(checkpoint.pth, their model, their EMA model)`` as ``vit/main.py`` writes them."""
    torch.manual_seed(0)
    model = AuthorsDnAViT(img_size=32, patch=8, dim=C, depth=DEPTH, heads=H, num_classes=CLASSES).double()
    args = vit_main_args(['--input-size', '32', '--batch-size', '2', '--model', 'dna_vit_tiny'], CLASSES)
    path = save_vit_main_checkpoint(model, tmp_path_factory.mktemp('vit_main') / 'checkpoint.pth', args)
    ema = AuthorsDnAViT(img_size=32, patch=8, dim=C, depth=DEPTH, heads=H, num_classes=CLASSES).double()
    ema.load_state_dict(read_checkpoint(str(path))['model_ema'])
    return path, model.eval(), ema.eval()


def _dna_vit(**kwargs) -> torch.nn.Module:
    return timm.create_model(
        'dna_vit_tiny_patch16_224',
        img_size=32,
        patch_size=8,
        embed_dim=C,
        depth=DEPTH,
        num_heads=H,
        num_classes=CLASSES,
        **kwargs,
    )


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def test_the_vit_main_file_loads_weights_only_and_keeps_its_args(vit_main_file) -> None:
    path, model, _ = vit_main_file
    ckpt = read_checkpoint(str(path))
    assert set(ckpt) == {'model', 'optimizer', 'lr_scheduler', 'epoch', 'model_ema', 'scaler', 'args'}
    args = ckpt['args']
    assert type(args) is argparse.Namespace
    assert (args.model, args.input_size, args.opt, args.sched, args.nb_classes) == (
        'dna_vit_tiny',
        32,
        'adamw',
        'cosine',
        CLASSES,
    )
    assert ckpt['optimizer']['state'] and ckpt['epoch'] == 3
    assert all(torch.equal(ckpt['model'][k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize(
    'payload,refused',
    [
        ('callable in the Namespace', 'posix.system'),
        ('SimpleNamespace', 'types.SimpleNamespace'),
        ('another argparse class', 'argparse.FileType'),
    ],
)
def test_only_the_namespace_is_allowed_not_what_it_carries(payload, refused, tmp_path) -> None:
    """``argparse.Namespace`` and nothing broader: a callable inside it, a look-alike class and
    another class of ``argparse`` are refused, naming the global; nothing runs."""
    marker = tmp_path / 'MARKER'
    extra = {
        'callable in the Namespace': argparse.Namespace(lr=1e-3, hook=_Payload(marker)),
        'SimpleNamespace': types.SimpleNamespace(lr=1e-3),
        'another argparse class': argparse.FileType('r'),
    }[payload]
    torch.save({'model': {'w': torch.zeros(2)}, 'args': extra}, tmp_path / 'bad.pth')
    with pytest.raises(UnsafeCheckpointError, match=rf'bad\.pth.*the global {re.escape(refused)}'):
        read_checkpoint(str(tmp_path / 'bad.pth'))
    assert not marker.exists()


def test_timesformer_pretrained_takes_the_vit_main_file(vit_main_file) -> None:
    """``model.backbone.pretrained``: the spatial and the (copied) temporal attention of each
    block get their ``Q-`` from the ``Q-`` rows of ``qqkvv`` (by meaning), α from
    ``neg_scalers``."""
    from mmaction.registry import MODELS

    path, model, _ = vit_main_file
    cfg = tiny_backbone('DnATimeSformer', embed_dims=C, num_heads=H, num_transformer_layers=DEPTH)
    backbone = MODELS.build(dict(cfg, pretrained=str(path)))
    backbone.init_weights()
    got = backbone.state_dict()
    qqkvv = model.blocks[1].attn.qqkvv.weight.detach()
    for j in (0, 1):
        p = f'transformer_layers.layers.1.attentions.{j}.attn.'
        assert torch.equal(got[p + 'q_neg.weight'], qqkvv[C : 2 * C].float())
        assert torch.equal(got[p + 'alpha'], model.blocks[1].attn.neg_scalers.detach().float())


def test_vitdet_init_cfg_takes_the_vit_main_file(vit_main_file) -> None:
    from mmdet.registry import MODELS
    from mmengine.registry import init_default_scope

    init_default_scope('mmdet')
    path, model, _ = vit_main_file
    vitdet = MODELS.build(
        tiny_backbone(
            'ViTDet',
            embed_dim=C,
            depth=DEPTH,
            num_heads=H,
            init_cfg=dict(type='Pretrained', checkpoint=str(path)),
        )
    )
    vitdet.init_weights()
    got = vitdet.state_dict()
    qqkvv = model.blocks[0].attn.qqkvv.weight.detach()
    assert torch.equal(got['blocks.0.attn.q_neg.weight'], qqkvv[C : 2 * C].float())
    assert torch.equal(got['blocks.0.attn.v_neg.weight'], qqkvv[4 * C :].float())


def test_the_strict_whole_model_load_gives_their_logits(vit_main_file) -> None:
    """``load_whole_model`` (behind ``load_from``, ``tools/test.py``, the analyses) takes
    ``model`` (the weights their ``--eval`` uses), maps their layout and gives their logits."""
    path, model, _ = vit_main_file
    ours = _dna_vit().double().eval()
    report = load_whole_model(ours, str(path))
    assert report.complete and report.layout == 'deit'
    x = torch.randn(3, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        assert_close_as(ours(x), model(x), ulps=REORDERED)


def test_the_timm_route_takes_the_vit_main_file(vit_main_file) -> None:
    """timm's loader (``pretrained_cfg_overlay=dict(file=...)``) allows ``argparse.Namespace``
    itself and, by timm's rule, prefers ``model_ema``: the logits are their EMA model's."""
    path, model, ema = vit_main_file
    ours = _dna_vit(pretrained=True, pretrained_cfg_overlay=dict(file=str(path), num_classes=CLASSES))
    ours = ours.double().eval()
    x = torch.randn(3, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        assert _max_diff(ours(x), model(x)) > 1e-6  # the EMA differs from the model ...
        assert_close_as(ours(x), ema(x), ulps=REORDERED, dtype=torch.float32)  # ... timm loaded it in float32


def test_convert_checkpoint_converts_the_vit_main_file(vit_main_file, tmp_path, capsys) -> None:
    """``official-to-dna-mm`` (the CLI's ``main``; its subprocess runs are in
    ``test_converters.py``): ``model`` and ``model_ema`` converted, optimizer / scheduler / args
    written back; the output loads strictly into ``dna_vit`` with their logits."""
    path, model, _ = vit_main_file
    out = tmp_path / 'dna_vit.pth'
    tool = load_tool('tools/model_converters/convert_checkpoint.py')
    assert tool.main(['official-to-dna-mm', str(path), str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "official-to-dna-mm 'model':" in stdout and "official-to-dna-mm 'model_ema':" in stdout
    converted = read_checkpoint(str(out))
    original = read_checkpoint(str(path))
    assert set(converted) == set(original) and converted['args'] == original['args']
    assert 'blocks.0.attn.alpha' in converted['model'] and 'blocks.0.attn.alpha' in converted['model_ema']
    ours = _dna_vit().double().eval()
    ours.load_state_dict(converted['model'], strict=True)
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        assert_close_as(ours(x), model(x), ulps=REORDERED)


# ---- the fine-tuned TimeSformer (PySlowFast's save_checkpoint) ------------------------------

TINY = dict(num_frames=4, img_size=32, patch_size=8, embed_dims=C, num_heads=2, num_transformer_layers=DEPTH)


@pytest.fixture(scope='module')
def pyslowfast_file(tmp_path_factory) -> tuple[Path, AuthorsDnABase]:
    """Their NTU-60 model (``dna_base_patch16_224`` wrapping ``DnATransformer``, 60 classes, tiny
    widths) saved as their ``save_checkpoint`` does, in float64."""
    torch.manual_seed(1)
    theirs = AuthorsDnABase(img_size=32, patch=8, dim=C, depth=DEPTH, heads=2, num_frames=4, num_classes=60)
    with torch.no_grad():
        for block in theirs.model.blocks:  # trained weights: nothing left at its init
            torch.nn.init.normal_(block.temporal_fc.weight, std=0.2)
            block.attn.neg_scalers.uniform_(-1.0, 1.0)
        theirs.model.head.weight.normal_(std=0.5)
    theirs = theirs.double()
    path = save_pyslowfast_checkpoint(theirs, tmp_path_factory.mktemp('pyth') / 'checkpoint_epoch_00015.pyth')
    return path, theirs.eval()


def _ntu_recognizer():
    from mmaction.registry import MODELS
    from mmengine.config import Config

    cfg = Config.fromfile(str(NTU_CONFIG))
    cfg.model.backbone.update(TINY, pretrained=None)
    cfg.model.cls_head.in_channels = C
    return MODELS.build(cfg.model)


def test_their_timesformer_loads_whole_with_their_logits(pyslowfast_file) -> None:
    """Backbone and head (``model.head.*`` → ``cls_head.fc_cls.*``) through the strict loader;
    the NTU config's data preprocessor on raw pixels equals their ``(x/255 − 0.45)/0.225``, and
    the logits equal theirs in float64."""
    path, theirs = pyslowfast_file
    ckpt = read_checkpoint(str(path))
    assert set(ckpt) == {'epoch', 'model_state', 'optimizer_state', 'cfg'}
    assert all(k.startswith('model.') for k in ckpt['model_state'])
    ours = _ntu_recognizer().double().eval()
    report = load_whole_model(ours, str(path))
    assert report.complete and report.layout == 'authors_timesformer'
    assert torch.equal(ours.state_dict()['cls_head.fc_cls.weight'], theirs.model.head.weight)

    pixels = torch.randint(0, 256, (2, 3, 4, 32, 32)).double()  # [B, C, T, H, W], 0..255
    data = ours.data_preprocessor({'inputs': [p[None] for p in pixels], 'data_samples': None}, False)
    with torch.no_grad():
        logits = ours.cls_head(ours.extract_feat(data['inputs'])[0])  # [B, 60]
        ref = theirs((pixels / 255 - 0.45) / 0.225)
    assert logits.dtype == torch.float64 and logits.shape == ref.shape == (2, 60)
    diff = _max_diff(logits, ref)
    print(f'their TimeSformer vs the NTU config: max |logit diff| = {diff:.3g} (float64)')
    assert_close_as(logits, ref, ulps=REORDERED)


def test_resume_refuses_their_checkpoint_saying_what_it_is(pyslowfast_file, tmp_path) -> None:
    from mmengine.config import Config

    from dna_mm.config import prepare_cfg
    from dna_mm.engine import build_runner

    path, _ = pyslowfast_file
    cfg = prepare_cfg(Config.fromfile(str(NTU_CONFIG)), str(NTU_CONFIG), work_dir=str(tmp_path))
    cfg.model.backbone.update(TINY, pretrained=None)
    cfg.model.cls_head.in_channels = C
    cfg.train_dataloader = cfg.train_cfg = cfg.optim_wrapper = None
    cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = cfg.param_scheduler = None
    cfg.update(load_from=str(path), resume=True, experiment_name='resume_theirs')
    runner = build_runner(cfg)
    with pytest.raises(CheckpointMismatchError) as err:
        runner.resume(str(path))
    message = str(err.value)
    assert f"cannot resume from {path}: it is the authors' TimeSformer checkpoint" in message
    assert f'load_from={path}' in message and f'tools/test.py CONFIG {path}' in message


def test_tools_test_evaluates_their_checkpoint(pyslowfast_file, tiny_video_set, tmp_path) -> None:
    """``python tools/test.py <the NTU config> their.pyth`` (a config inheriting it with the tiny
    widths and the test videos): a strict load, a metric, and per-video scores equal to their
    model's on the same decoded clips."""
    import csv

    path, theirs = pyslowfast_file
    lists = lists_of_another_label_set(tiny_video_set, tmp_path / 'ntu_lists')  # the demo clips as NTU's
    config = tmp_path / 'ntu_tiny.py'
    config.write_text(
        f'_base_ = [{str(NTU_CONFIG)!r}]\n'
        f'model = dict(backbone=dict({", ".join(f"{k}={v!r}" for k, v in TINY.items())},\n'
        f'                           drop_path_rate=0.0), cls_head=dict(in_channels={C}))\n'
        'test_pipeline = [\n'
        "    dict(type='DecordInit', io_backend='disk'),\n"
        "    dict(type='SampleFrames', clip_len=4, frame_interval=2, num_clips=1, test_mode=True),\n"
        "    dict(type='DecordDecode'),\n"
        "    dict(type='Resize', scale=(32, 32), keep_ratio=False),\n"
        "    dict(type='FormatShape', input_format='NCTHW'),\n"
        "    dict(type='PackActionInputs'),\n"
        ']\n'
        'test_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,\n'
        f'    dataset=dict(ann_file={str(lists / "test.txt")!r},\n'
        f'                 data_prefix=dict(video={str(tiny_video_set / "videos")!r}),\n'
        '                 pipeline=test_pipeline))\n'
    )
    dump = tmp_path / 'preds.csv'
    cmd = ['tools/test.py', str(config), str(path), '--work-dir', str(tmp_path), '--dump', str(dump)]
    proc = run_main(cmd, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r'Test results: top-1: [\d.]+', proc.stdout), proc.stdout[-2000:]
    assert "the authors' TimeSformer checkpoint" in proc.stdout + proc.stderr

    from mmaction.registry import DATASETS
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    init_default_scope('mmaction')
    dataset = DATASETS.build(Config.fromfile(str(config)).test_dataloader.dataset)
    rows = {r['video']: r for r in csv.DictReader(dump.open())}
    assert len(rows) == len(dataset) == 4
    for sample in dataset:
        clip = sample['inputs'].double()  # [1, C, T, H, W] uint8 values
        with torch.no_grad():
            probs = theirs((clip / 255 - 0.45) / 0.225).softmax(-1)[0]
        row = rows[sample['data_samples'].filename]
        assert int(row['pred']) == int(probs.argmax())
        written = 5e-7 + tolerance(torch.float32, 1.0, REORDERED)['atol']  # 6 decimals of a float32 run
        assert abs(float(row['score']) - probs.max().item()) <= written
