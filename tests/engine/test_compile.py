"""``torch.compile`` as users call it: mmengine's ``compile=True`` (the runner compiles the model's
``train_step``) with inductor on the CPU, against the same run in eager mode; the attention
compiles without a graph break, the Triton kernel's route included (in Triton's interpreter here:
the operator is a ``torch.library.custom_op``, so the compiler keeps it whole)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import REPO, TINY_MASK_RCNN, coco_run_options, tiny_backbone, tiny_runner
from mmengine.registry import MODELS, init_default_scope

from dna_mm.models import DnAAttention

#: inductor against eager: fused kernels reorder float sums
TOL = dict(rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize('kernel', ['sdpa', 'sdpa_2h', 'sdpa_stacked', 'triton', 'eager'])
def test_the_attention_compiles_without_a_graph_break(kernel: str) -> None:
    """One graph for the module, forward and backward (``fullgraph=True`` would raise at a
    break); inductor's output and gradients equal eager's."""
    torch.manual_seed(0)
    attn = DnAAttention(64, 2, kernel='sdpa' if kernel == 'eager' else kernel)
    attn.fused_attn = kernel != 'eager'  # the eager route: explicit maps
    x = torch.randn(2, 17, 64, requires_grad=True)
    explain = torch._dynamo.explain(attn)(x)
    assert explain.graph_break_count == 0 and explain.graph_count == 1, explain.break_reasons
    torch._dynamo.reset()
    want = attn(x)
    want.square().sum().backward()
    want_grads = [p.grad.clone() for p in (x, *attn.parameters())]
    x.grad = None
    attn.zero_grad()
    got = torch.compile(attn, fullgraph=True)(x)  # inductor
    got.square().sum().backward()
    torch.testing.assert_close(got, want, **TOL)
    for g, w in zip((p.grad for p in (x, *attn.parameters())), want_grads, strict=True):
        torch.testing.assert_close(g, w, **TOL)


def _recognizer_step(model, compiled: bool):
    """The loss and every gradient of one step of ``model`` on a fixed batch."""
    torch.manual_seed(1)
    inputs = torch.randn(2, 1, 3, 4, 32, 32)  # [B, views, C, T, H, W]
    from mmaction.structures import ActionDataSample

    samples = [ActionDataSample().set_gt_labels(torch.tensor([i])) for i in (0, 1)]
    data = model.data_preprocessor(dict(inputs=list(inputs), data_samples=samples), training=True)
    forward = torch.compile(model) if compiled else model
    losses = forward(**data, mode='loss')
    loss = sum(v for k, v in losses.items() if 'loss' in k)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.slow
@pytest.mark.parametrize('kernel', ['sdpa', 'triton'])
def test_timesformer_dna_compiled_equals_eager(kernel: str) -> None:
    init_default_scope('mmaction')
    cfg = dict(
        type='Recognizer3D',
        backbone=tiny_backbone(
            'DnATimeSformer', attn_cfg=dict(type='DnAAttention', kernel=kernel), embed_dims=64
        ),
        cls_head=dict(type='TimeSformerHead', num_classes=4, in_channels=64),
        data_preprocessor=dict(type='ActionDataPreprocessor', format_shape='NCTHW'),
    )
    torch.manual_seed(0)
    eager = MODELS.build(cfg).eval()  # no dropout: inductor draws its random numbers otherwise
    compiled = copy.deepcopy(eager)
    want_loss, want = _recognizer_step(eager, compiled=False)
    got_loss, got = _recognizer_step(compiled, compiled=True)
    torch.testing.assert_close(got_loss, want_loss, **TOL)
    assert got.keys() == want.keys() and any('alpha' in n for n in got)
    for name in want:
        torch.testing.assert_close(got[name], want[name], **TOL, msg=name)


@pytest.mark.slow
def test_vitdet_dna_backbone_compiled_equals_eager() -> None:
    """Windowed and global blocks with the relative-position bias in both branches."""
    init_default_scope('mmdet')
    torch.manual_seed(0)
    eager = MODELS.build(tiny_backbone('ViTDet', attn_cfg='dna')).eval()
    compiled = copy.deepcopy(eager)
    x = torch.randn(1, 3, 64, 64)
    grads = []
    for model, run in ((eager, eager), (compiled, torch.compile(compiled))):
        out = run(x)
        sum(o.square().mean() for o in out).backward()
        grads.append((out, {n: p.grad for n, p in model.named_parameters()}))
    (want, want_grads), (got, got_grads) = grads
    torch.testing.assert_close(got, want, **TOL)
    for name, g in want_grads.items():
        torch.testing.assert_close(got_grads[name], g, **TOL, msg=name)


@pytest.mark.slow
def test_the_runners_compile_true_trains_as_eager(tiny_video_set, tmp_path) -> None:
    """``compile=True`` in the config (mmengine compiles ``train_step``): the same weights after
    an epoch of the tiny demo run as without it."""
    runs = {}
    for mode in ('eager', 'compiled'):
        runner = tiny_runner(tmp_path / mode, tiny_video_set, max_epochs=1, deterministic=True)
        if mode == 'compiled':
            runner.cfg.compile = True  # what Runner.train reads (it compiles train_step)
        runner.train()
        runs[mode] = {k: v.detach().clone() for k, v in runner.model.state_dict().items()}
        torch._dynamo.reset()
    for name, want in runs['eager'].items():
        torch.testing.assert_close(runs['compiled'][name], want, rtol=1e-3, atol=1e-4, msg=name)


def _vitdet_demo_runner(work_dir, root, compiled: bool):
    """The ViTDet-DnA Mask R-CNN demo config, made tiny, for 2 iterations on the generated set,
    no validation; ``compiled``: ``compile=True`` as a user writes it in the config."""
    from mmengine.config import Config

    from dna_mm.config import check_config
    from dna_mm.engine import build_runner

    cfg = Config.fromfile(str(REPO / 'configs' / 'vitdet_dna_demo.py'))
    cfg.merge_from_dict(dict(TINY_MASK_RCNN, **coco_run_options(root)))
    cfg.merge_from_dict(
        {'model.backbone.window_size': 4, 'train_cfg.max_iters': 2, 'train_cfg.val_interval': 2}
    )
    cfg.train_dataloader.sampler.shuffle = False  # the same batches in both runs
    random_transforms = ('RandomFlip', 'RandomResize', 'RandomCrop')
    pipeline = cfg.train_dataloader.dataset.pipeline
    cfg.train_dataloader.dataset.pipeline = [t for t in pipeline if t.type not in random_transforms]
    cfg.work_dir, cfg.val_cfg, cfg.val_dataloader, cfg.val_evaluator = str(work_dir), None, None, None
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=10**6, save_last=False)
    cfg.randomness = dict(seed=0)
    cfg.compile = compiled
    check_config(cfg)
    return build_runner(cfg)  # as tools/train.py builds it


@pytest.mark.slow
def test_the_runners_compile_true_trains_vitdet_dna_as_eager(tmp_path, monkeypatch) -> None:
    """``compile=True`` on the ViTDet-DnA Mask R-CNN (mmcv's RoIAlign and nms run between the
    compiled graphs): the same losses at each iteration and the same weights after them as in
    eager mode. Inductor draws its random numbers as eager does (``fallback_random``), so that
    the proposal sampler picks the same RoIs in both runs."""
    pytest.importorskip('mmcv.ops')
    from dna_mm.synthetic.coco_shapes import CocoDatasetSpec, ensure_coco_dataset

    monkeypatch.setattr(torch._inductor.config, 'fallback_random', True)
    root = ensure_coco_dataset(
        tmp_path / 'coco',
        CocoDatasetSpec(train_images=4, test_images=1, size=64, min_object=18, max_object=30, max_objects=2),
    )
    runs = {}
    for mode in ('eager', 'compiled'):
        runner = _vitdet_demo_runner(tmp_path / mode, root, compiled=mode == 'compiled')
        runner.train()
        losses = runner.message_hub.get_scalar('train/loss').data[0]
        weights = {k: v.detach().clone() for k, v in runner.model.state_dict().items()}
        runs[mode] = losses, weights
        torch._dynamo.reset()
    (want_losses, want), (got_losses, got) = runs['eager'], runs['compiled']
    assert len(want_losses) == 2
    torch.testing.assert_close(torch.tensor(got_losses), torch.tensor(want_losses), rtol=1e-4, atol=1e-5)
    assert any('alpha' in name for name in want)
    for name, w in want.items():
        torch.testing.assert_close(got[name], w, rtol=1e-3, atol=1e-4, msg=name)
