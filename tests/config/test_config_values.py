"""Config values that agree with each other and that a run can take, checked before anything is
built (:func:`dna_mm.config.check_config`): the head's classes against the data's, the
TimeSformer's sizes against the pipelines and the head, dropout rates, the optimizer, its
scheduler and AMP dtype. Each mistake is one line naming the key, the value and what was
expected, where the run would otherwise stop at the first iteration with a stock traceback (or
train without a word)."""

from __future__ import annotations

import argparse

import pytest
from conftest import DEMO_CONFIG, REPO
from mmengine.config import Config, DictAction

from dna_mm.config import check_config
from dna_mm.config.prepare import limit_topk
from dna_mm.errors import ConfigError

DET_DEMO = str(REPO / 'configs' / 'vitdet_dna_demo.py')
K400 = str(REPO / 'configs' / 'timesformer_dna_k400.py')
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


def _cfg(*opts: str, config: str = DEMO_CONFIG) -> Config:
    """``config`` with ``opts`` merged as ``--cfg-options`` merges them, prepared as the tools
    prepare it (top-k limited to the classes)."""
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(config)
    if str(cfg.get('label_map')).startswith(str(REPO / 'data')):
        cfg.label_map = None  # made by `make demo`: in a checkout that ran it, not in a clean one
    if opts:
        cfg.merge_from_dict(parser.parse_args(['--o', *opts]).o)
    limit_topk(cfg)
    return cfg


def _refused(cfg: Config, mode: str = 'train') -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg, mode)
    return str(err.value)


def _where(key: str) -> str:
    return ', '.join(f'{loader}.{key}' for loader in LOADERS)


#: ``(--cfg-options, config, what the error says)``
MISTAKES = [
    # the demo's 4 classes: 3 would be "Target 3 is out of bounds" at the first iteration, 10 silent
    *[
        (
            (f'model.cls_head.num_classes={n}',),
            DEMO_CONFIG,
            f'model.cls_head.num_classes ({n}) must be the number of classes of the data: 4 '
            f'({_where("dataset.num_classes")})',
        )
        for n in (3, 10)
    ],
    (
        ('model.roi_head.bbox_head.num_classes=4',),  # MMDetection's NumClassCheckHook, statically
        DET_DEMO,
        'model.roi_head.bbox_head.num_classes (4) must be the number of classes of the data: 3 '
        f'({_where("dataset.metainfo.classes")})',
    ),
    (
        ('model.roi_head.mask_head.num_classes=2',),
        DET_DEMO,
        'model.roi_head.mask_head.num_classes (2) must be the number of classes of the data: 3 (',
    ),
    (
        ('model.backbone.num_frames=4',),  # a RuntimeError at the first iteration
        DEMO_CONFIG,
        'model.backbone.num_frames (4) must be the clip length the pipelines sample (clip_len): 8 in '
        + ', '.join(f'{loader}.dataset.pipeline[1] (SampleFrames)' for loader in LOADERS),
    ),
    (
        ('model.backbone.img_size=48',),
        DEMO_CONFIG,
        'model.backbone.img_size (48) must be the size of the frames the pipelines give: 32x32 from '
        + ', '.join(f'{loader}.dataset.pipeline[3] (Resize)' for loader in LOADERS),
    ),
    (
        ('model.cls_head.in_channels=64',),
        DEMO_CONFIG,
        'model.cls_head.in_channels (64) must be model.backbone.embed_dims (96): the head reads the '
        "backbone's features",
    ),
    (
        ('model.backbone.patch_size=5',),  # MMAction2's AssertionError
        DEMO_CONFIG,
        'model.backbone.img_size (32) must be a multiple of model.backbone.patch_size (5)',
    ),
    (('model.backbone.patch_size=0',), DEMO_CONFIG, 'model.backbone.patch_size must be > 0, got 0'),
    (('model.backbone.embed_dims=0',), DEMO_CONFIG, 'model.backbone.embed_dims must be > 0, got 0'),
    (
        ('model.backbone.num_transformer_layers=0',),
        DEMO_CONFIG,
        'model.backbone.num_transformer_layers must be > 0, got 0',
    ),
    (
        ('model.backbone.attn_cfg.alpha_init=half',),  # float('half') in DnAAttention.__init__
        DEMO_CONFIG,
        "model.backbone.attn_cfg.alpha_init must be a number, got 'half'",
    ),
    (
        ('model.backbone.attn_cfg.alpha_init=[1,2]',),
        DEMO_CONFIG,
        'model.backbone.attn_cfg.alpha_init must be a number, got [1, 2]',
    ),
    (
        ('model.backbone.drop_path_rate=2.0',),  # "loss is nan" after a step, today
        DEMO_CONFIG,
        'model.backbone.drop_path_rate must be a number in [0, 1) (a probability), got 2.0',
    ),
    (
        ('model.cls_head.dropout_ratio=1.0',),
        DEMO_CONFIG,
        'model.cls_head.dropout_ratio must be a number in [0, 1) (a probability), got 1.0',
    ),
    (
        ('model.backbone.attn_cfg.attn_drop=-0.1',),
        DEMO_CONFIG,
        'model.backbone.attn_cfg.attn_drop must be a number in [0, 1) (a probability), got -0.1',
    ),
    (
        ('optim_wrapper.optimizer.weight_decay=-0.05',),
        DEMO_CONFIG,
        'optim_wrapper.optimizer.weight_decay must be a number >= 0, got -0.05',
    ),
    (
        ('randomness.seed=abc',),
        DEMO_CONFIG,
        "randomness.seed must be an int in [0, 2**32) (NumPy's seeds) or None (a random one), got 'abc'",
    ),
    (('randomness.seed=-1',), DEMO_CONFIG, 'randomness.seed must be an int in [0, 2**32)'),
    (
        ('optim_wrapper.clip_grad.max_norm=0',),
        DEMO_CONFIG,
        'optim_wrapper.clip_grad.max_norm must be a number > 0 (the largest gradient norm), got 0',
    ),
    (
        ('param_scheduler.0.start_factr=0.5',),  # a TypeError once the model is built
        DEMO_CONFIG,
        "param_scheduler[0].start_factr is not an argument of LinearLR (did you mean 'start_factor'? valid: ",
    ),
    (
        ('param_scheduler.1.type=CosineAnealingLR',),
        DEMO_CONFIG,
        "param_scheduler[1].type: unknown parameter scheduler 'CosineAnealingLR'; did you mean "
        "'CosineAnnealingLR'?",
    ),
    (
        ('optim_wrapper.optimizer.type=AdamWW',),  # "None is not a callable object" today
        DEMO_CONFIG,
        "optim_wrapper.optimizer.type: unknown optimizer 'AdamWW'; did you mean 'AdamW'?",
    ),
    (
        ('optim_wrapper.type=AutoAmpOptimWrapper', 'optim_wrapper.dtype=fp16x'),  # passed on a CPU
        DEMO_CONFIG,
        "optim_wrapper.dtype must be one of 'float16', 'bfloat16', 'float32', 'float64' (mmengine's "
        "AmpOptimWrapper), None or a torch dtype, got 'fp16x'",
    ),
    (
        ('optim_wrapper.dtype=bf16',),  # mmengine asserts on it too: its names are torch's
        str(REPO / 'configs' / 'vitdet_dna_coco.py'),
        "optim_wrapper.dtype must be one of 'float16', 'bfloat16', 'float32', 'float64' (mmengine's "
        "AmpOptimWrapper), None or a torch dtype, got 'bf16' (did you mean 'bfloat16'?)",
    ),
]


@pytest.mark.parametrize('opts, config, message', MISTAKES, ids=[opts[-1] for opts, _, _ in MISTAKES])
def test_a_value_that_cannot_work_is_named_before_the_build(opts, config, message) -> None:
    assert message in _refused(_cfg(*opts, config=config))


def test_the_frame_size_is_checked_only_where_the_pipeline_fixes_it() -> None:
    """K400's pipelines end in a crop of 224 (RandomCrop, CenterCrop, ThreeCrop): a 32-pixel
    model is named against each. A demo pipeline resized with ``keep_ratio=True`` gives frames
    of the video's shape, and one with a step of another library's (MMAction2's
    PytorchVideoWrapper) clips the check cannot read: those are left alone."""
    message = _refused(_cfg('model.backbone.img_size=32', config=K400))
    assert message == (
        'model.backbone.img_size (32) must be the size of the frames the pipelines give: 224x224 from '
        'train_dataloader.dataset.pipeline[4] (RandomCrop), val_dataloader.dataset.pipeline[4] '
        '(CenterCrop), test_dataloader.dataset.pipeline[4] (ThreeCrop)'
    )
    message = _refused(
        _cfg('model.backbone.img_size=48', 'train_dataloader.dataset.pipeline.3.keep_ratio=True')
    )
    assert 'train_dataloader' not in message and '32x32 from val_dataloader.dataset.pipeline[3]' in message
    cfg = _cfg('model.backbone.img_size=48', 'model.backbone.num_frames=4')
    wrapped = dict(type='PytorchVideoWrapper', op='RandomResizedCrop', target_height=48, target_width=48)
    cfg.train_dataloader.dataset.pipeline.insert(4, wrapped)
    message = _refused(cfg)
    assert 'train_dataloader' not in message and '32x32 from val_dataloader.dataset.pipeline[3]' in message
    assert '8 in val_dataloader.dataset.pipeline[1] (SampleFrames), test_dataloader' in message


def test_the_label_map_counts_where_it_exists(tmp_path) -> None:
    """The demo's label map comes with its data: where it is not written yet it is skipped; a
    file of another length is named, one of the head's length passes."""
    five = tmp_path / 'classes.txt'
    five.write_text('still\nhorizontal\n\nvertical\ndiagonal\nround\n')  # a blank line is no class
    assert _refused(_cfg(f'label_map={five}')) == (
        f"model.cls_head.num_classes (4) must be the number of classes of the data: 5 (the class names "
        f"of label_map '{five}')"
    )
    wider = [f'{loader}.dataset.num_classes=5' for loader in LOADERS]
    check_config(_cfg('model.cls_head.num_classes=5', *wider, f'label_map={five}'), 'train')
    check_config(_cfg(f'label_map={tmp_path / "not_yet.txt"}'), 'train')


def test_every_problem_is_in_one_error_and_a_test_run_keeps_its_checkpoints_classes() -> None:
    """Two mistakes, one line each; a test / inference run does not compare the classes (the
    checkpoint fixes them; tools/infer.py names them from the label map only where it fits), but
    its own pipeline's clip length still counts."""
    message = _refused(_cfg('model.cls_head.num_classes=3', 'optim_wrapper.optimizer.type=AdamWW'))
    assert message == (
        "optim_wrapper.optimizer.type: unknown optimizer 'AdamWW'; did you mean 'AdamW'?; "
        f'model.cls_head.num_classes (3) must be the number of classes of the data: 4 '
        f'({_where("dataset.num_classes")})'
    )
    check_config(_cfg('model.cls_head.num_classes=7'), 'test')
    assert _refused(_cfg('model.backbone.num_frames=4'), 'test') == (
        'model.backbone.num_frames (4) must be the clip length the pipelines sample (clip_len): 8 in '
        'test_dataloader.dataset.pipeline[1] (SampleFrames)'
    )


def test_every_shipped_config_passes_and_its_head_is_held_to_its_data() -> None:
    """Every config of configs/ and configs/imagenet/ passes as it ships (after the top-k limit
    the tools apply); where its data states its classes (the video datasets' ``num_classes``, the
    detection demo's ``metainfo``), one class more in the head is named."""
    configs = sorted([*(REPO / 'configs').glob('*.py'), *(REPO / 'configs' / 'imagenet').glob('*.py')])
    held = []
    for path in configs:
        cfg = _cfg(config=str(path))
        check_config(cfg, 'train')
        model = cfg.model
        head, key = (model.cls_head, 'model.cls_head') if 'cls_head' in model else (None, None)
        if head is None and 'roi_head' in model:
            head, key = model.roi_head.bbox_head, 'model.roi_head.bbox_head'
        states = any(
            'num_classes' in cfg[loader].dataset or 'classes' in (cfg[loader].dataset.get('metainfo') or {})
            for loader in LOADERS
        )
        if head is None or not states:
            continue
        head.num_classes += 1
        assert f'{key}.num_classes ({head.num_classes}) must be the number of classes' in _refused(cfg), path
        held.append(path.name)
    assert len(configs) > 30 and {
        'timesformer_dna_demo.py',
        'vitdet_dna_demo.py',
        'timesformer_dna_k400.py',
    } <= set(held)
