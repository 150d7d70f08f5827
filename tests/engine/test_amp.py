"""Mixed precision: the device rule of ``AutoAmpOptimWrapper`` (bf16 without loss scaling where
the GPU computes bf16, fp16 + ``GradScaler`` below sm80, full precision on the CPU), the
configs that use it, and one training step in each precision the rule picks, run on the CPU
(fp16 autocast with ``torch.amp.GradScaler('cpu')``, bf16 autocast without a scaler), of the
tiny TimeSformer-DnA (built through MMAction2's registry from the demo config) and of a tiny
DnA-ViT of the ImageNet recipe (MMPretrain's registry, its Mixup / CutMix and label smoothing)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import DEMO_CONFIG, REPO
from mmaction.registry import MODELS
from mmaction.structures import ActionDataSample
from mmengine.config import Config
from mmengine.optim import AmpOptimWrapper, OptimWrapper, build_optim_wrapper
from mmengine.registry import DefaultScope

from dna_mm.engine.optim_wrapper import NO_LOSS_SCALE, amp_settings
from dna_mm.models import DnAAttention

SCHEDULES = [
    *sorted((REPO / 'configs' / '_base_' / 'schedules').glob('*.py')),
    REPO / 'configs' / 'imagenet' / '_base_' / 'adamw_cosine_300e.py',
]
IMAGENET_CONFIG = REPO / 'configs' / 'imagenet' / 'dna_vit-t16_in1k.py'
FP16 = dict(dtype='float16', loss_scale='dynamic')
BF16 = dict(dtype='bfloat16', loss_scale=NO_LOSS_SCALE)


@pytest.mark.parametrize(
    'capability, expected',
    [
        (None, {}),
        ((6, 1), FP16),
        ((7, 0), FP16),
        ((7, 5), FP16),
        ((8, 0), BF16),
        ((8, 9), BF16),
        ((9, 0), BF16),
    ],
)
def test_the_rule_picks_bf16_from_sm80_and_fp16_with_a_scaler_below(capability, expected) -> None:
    assert amp_settings(capability) == expected


def test_a_config_overrides_the_rule_key_by_key() -> None:
    assert amp_settings((9, 0), dtype='float16') == FP16  # fp16 asked for: scaled by default
    assert amp_settings((9, 0), dtype=torch.float16) == FP16
    assert amp_settings((7, 0), dtype='bfloat16') == BF16
    assert amp_settings((7, 0), loss_scale=512.0) == dict(dtype='float16', loss_scale=512.0)
    assert amp_settings((9, 0), loss_scale='dynamic', use_fsdp=True) == dict(
        dtype='bfloat16', loss_scale='dynamic', use_fsdp=True
    )
    assert amp_settings(None, dtype='float16') == {}


@pytest.mark.skipif(torch.cuda.is_available(), reason='the CPU branch')
def test_without_cuda_the_wrapper_is_a_plain_optim_wrapper() -> None:
    model = torch.nn.Linear(2, 2)
    cfg = dict(
        type='AutoAmpOptimWrapper', optimizer=dict(type='SGD', lr=0.1), dtype='float16', loss_scale=8.0
    )
    wrapper = build_optim_wrapper(model, cfg)
    assert type(wrapper) is OptimWrapper


@pytest.mark.parametrize('path', SCHEDULES, ids=lambda p: p.stem)
def test_every_schedule_uses_the_rule(path: Path) -> None:
    """Video and ImageNet schedules leave dtype and scaling to the rule; detection ones ask for
    fp16 (mmcv's RoIAlign has no bf16 kernel) and leave the scaling to the rule (a GradScaler)."""
    wrapper = Config.fromfile(str(path)).optim_wrapper
    assert wrapper.type == 'AutoAmpOptimWrapper'
    assert 'loss_scale' not in wrapper, wrapper
    assert wrapper.get('dtype') == ('float16' if path.stem.startswith('vitdet') else None), wrapper


def test_mmaction_heads_take_bf16_scores() -> None:
    """MMAction2's ``BaseHead.loss_by_feat`` fails on bf16 scores (NumPy has no bf16); the
    wrapper dna_mm installs hands them over as fp32, the loss and accuracy as for fp32."""
    from mmaction.models.heads.base import BaseHead

    head = MODELS.build(dict(type='TimeSformerHead', num_classes=4, in_channels=8))
    scores = torch.randn(3, 4)
    samples = [ActionDataSample().set_gt_labels([i]) for i in range(3)]
    with pytest.raises(TypeError, match='BFloat16'):
        BaseHead.loss_by_feat.__wrapped__(head, scores.bfloat16(), samples)
    got = head.loss_by_feat(scores.bfloat16(), samples)
    expected = head.loss_by_feat(scores.bfloat16().float(), samples)
    assert got.keys() == expected.keys() and 'top1_acc' in got
    for key in got:
        assert torch.equal(got[key], expected[key]), key


def _tiny_recognizer() -> tuple[torch.nn.Module, Config]:
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.model.backbone.update(embed_dims=32, num_heads=2, num_transformer_layers=2, num_frames=4)
    cfg.model.cls_head.in_channels = 32
    model = MODELS.build(cfg.model).train()
    assert isinstance(model.backbone.transformer_layers.layers[0].attentions[0].attn, DnAAttention)
    return model, cfg


def _tiny_video_step() -> tuple[torch.nn.Module, Config, torch.Tensor, list]:
    """The tiny TimeSformer-DnA, its config, and a batch of 2 clips."""
    model, cfg = _tiny_recognizer()
    samples = [ActionDataSample().set_gt_labels([i]) for i in range(2)]
    return model, cfg, torch.randn(2, 1, 3, 4, 32, 32), samples


def _tiny_imagenet_step() -> tuple[torch.nn.Module, Config, torch.Tensor, list]:
    """A 2-block DnA-ViT-T at 32 px (patch 8, no stochastic depth) of the ImageNet config,
    through MMPretrain's registry, and 4 images after its data preprocessor in training (Mixup
    or CutMix: soft labels)."""
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS
    from mmpretrain.structures import DataSample

    cfg = Config.fromfile(IMAGENET_CONFIG)
    cfg.model.backbone.update(img_size=32, patch_size=8, depth=2, drop_path_rate=0.0)  # deterministic
    cfg.model.head.num_classes = 4
    cfg.model.data_preprocessor = dict(cfg.data_preprocessor, num_classes=4)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):  # mmpretrain's types
        model = PRETRAIN_MODELS.build(cfg.model).train()
    assert type(model.backbone.timm_model.blocks[0].attn).__name__ == 'TimmDnAAttention'
    images = [torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8) for _ in range(4)]
    data = dict(inputs=images, data_samples=[DataSample().set_gt_label(i) for i in range(4)])
    batch = model.data_preprocessor(data, training=True)
    assert batch['data_samples'][0].gt_score.shape == (4,)  # the batch augments' soft labels
    return model, cfg, batch['inputs'], batch['data_samples']


def _grads(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize('make_step', [_tiny_video_step, _tiny_imagenet_step], ids=['video', 'imagenet'])
@pytest.mark.parametrize('capability', [(7, 5), (9, 0)], ids=['fp16+GradScaler', 'bf16'])
def test_one_training_step_in_the_precision_the_rule_picks(capability, make_step, monkeypatch) -> None:
    """The step ``AmpOptimWrapper`` takes (autocast forward, scaled backward, unscale, clip
    where the config clips, scaler step and update) with the rule's dtype and scaler, on the
    CPU: autocast reaches every attention, the unscaled gradients match fp32's, and the fp32
    master weights move."""
    torch.manual_seed(0)
    amp = amp_settings(capability)
    dtype = getattr(torch, amp['dtype'])
    scale = amp['loss_scale']
    scaler = torch.amp.GradScaler('cpu', **({} if scale == 'dynamic' else scale))
    assert scaler.is_enabled() == (dtype == torch.float16)
    model, cfg, inputs, samples = make_step()
    reference = copy.deepcopy(model)

    loss32 = reference.parse_losses(reference(inputs, samples, mode='loss'))[0]
    loss32.backward()

    seen = []
    real_sdpa = F.scaled_dot_product_attention

    def spy(q, *args, **kwargs):
        seen.append(q.dtype)
        return real_sdpa(q, *args, **kwargs)

    monkeypatch.setattr(F, 'scaled_dot_product_attention', spy)
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)  # the config's optimizer
    assert not isinstance(wrapper, AmpOptimWrapper)  # (no GPU: its step is mirrored below)
    before = [p.detach().clone() for p in model.parameters()]
    skipped = 0
    while True:  # dynamic scaling: a step whose scaled gradients overflow is skipped, scale halved
        model.zero_grad()
        scale_before = scaler.get_scale() if scaler.is_enabled() else 1.0
        with torch.autocast('cpu', dtype=dtype, cache_enabled=False):
            loss = model.parse_losses(model(inputs, samples, mode='loss'))[0]
        scaler.scale(loss).backward()
        scaler.unscale_(wrapper.optimizer)
        if cfg.optim_wrapper.get('clip_grad'):
            torch.nn.utils.clip_grad_norm_(model.parameters(), **cfg.optim_wrapper.clip_grad)
        grads = _grads(model)
        scaler.step(wrapper.optimizer)
        scaler.update()
        if torch.isfinite(grads).all():
            break
        skipped += 1
        assert scaler.is_enabled() and scaler.get_scale() == scale_before / 2 and skipped < 8
        assert all(torch.equal(p, old) for p, old in zip(model.parameters(), before, strict=True))

    assert seen and set(seen) == {dtype}, seen  # 2 SDPA calls per DnA attention, all in `dtype`
    assert torch.isfinite(loss) and abs(loss.item() - loss32.item()) < 0.05 * abs(loss32.item())
    # the unscaled gradients (clipping rescales all alike) point as fp32's
    assert F.cosine_similarity(grads.float(), _grads(reference), dim=0) > 0.99
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in model.parameters())
    moved = [not torch.equal(p, old) for p, old in zip(model.parameters(), before, strict=True)]
    assert sum(moved) > 0.9 * len(moved)


@pytest.mark.cuda
@pytest.mark.parametrize('make_step', [_tiny_video_step, _tiny_imagenet_step], ids=['video', 'imagenet'])
def test_on_cuda_the_configs_wrapper_is_amp_in_the_rules_dtype_and_trains(make_step) -> None:
    """On a GPU the configs' ``AutoAmpOptimWrapper`` is MMEngine's ``AmpOptimWrapper`` in the
    dtype the rule gives the device (bf16 without a scaler from sm80, fp16 with one below), and
    one step of the tiny TimeSformer-DnA or ImageNet DnA-ViT through it gives a finite loss
    close to fp32's, fp32 weights that moved."""
    torch.manual_seed(0)
    model, cfg, inputs, samples = make_step()
    model, inputs = model.cuda(), inputs.cuda()
    samples = [sample.to('cuda') for sample in samples]
    reference = copy.deepcopy(model)
    loss32 = reference.parse_losses(reference(inputs, samples, mode='loss'))[0]
    assert cfg.optim_wrapper.type == 'AutoAmpOptimWrapper'
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    expected = amp_settings(torch.cuda.get_device_capability())
    assert isinstance(wrapper, AmpOptimWrapper) and wrapper.cast_dtype == getattr(torch, expected['dtype'])
    assert wrapper.loss_scaler.is_enabled() == (expected['dtype'] == 'float16')
    before = [p.detach().clone() for p in model.parameters()]
    with wrapper.optim_context(model):
        loss = model.parse_losses(model(inputs, samples, mode='loss'))[0]
    wrapper.update_params(loss)
    assert torch.isfinite(loss) and abs(loss.item() - loss32.item()) < 0.05 * abs(loss32.item())
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in model.parameters())
    moved = [not torch.equal(p, old) for p, old in zip(model.parameters(), before, strict=True)]
    assert sum(moved) > 0.9 * len(moved)
