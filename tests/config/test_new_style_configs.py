"""MMEngine's new-style configs (``with read_base(): from ._base_.x import *``, ``type=SomeClass``)
are checked as the old-style ones are: every pre-run check names a class-typed step by its name,
a base variable set to no effect and every mistake of the file or its inheritance is one line,
a dumped config's dotted ``type`` paths are read, and inference runs on a class-typed pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, load_tool, run_main

from dna_mm.config import check_config, read_config
from dna_mm.config.build import type_name
from dna_mm.config.prepare import limit_topk
from dna_mm.errors import ConfigError, MissingFileError
from dna_mm.models.attention.builder import attention_cfg, member_type
from dna_mm.synthetic.videos import write_video

DEMO = REPO / 'data' / 'demo'

#: the tiny recognizer the configs below share (lz/_base_/tiny_model.py of the audit)
TINY_MODEL = """
from mmaction.models import ActionDataPreprocessor, Recognizer3D, TimeSformerHead
from dna_mm.models import DnAAttention
from dna_mm.models.backbones import DnATimeSformer

model = dict(
    type=Recognizer3D,
    backbone=dict(
        type=DnATimeSformer, pretrained=None, num_frames=8, img_size=32, patch_size=8, embed_dims=32,
        num_heads=2, num_transformer_layers=1, in_channels=3, dropout_ratio=0.0, drop_path_rate=0.0,
        attention_type='divided_space_time', norm_cfg=dict(type='LN', eps=1e-6),
        attn_cfg=dict(type=DnAAttention, variant='qpm_vpm')),
    cls_head=dict(type=TimeSformerHead, num_classes=4, in_channels=32, average_clips='prob'),
    data_preprocessor=dict(type=ActionDataPreprocessor, mean=[127.5] * 3, std=[127.5] * 3,
                           format_shape='NCTHW'),
)
"""
#: its data and schedule, every type a class (lz/_base_/runtime.py of the audit)
RUNTIME = f"""
from mmengine.hooks import CheckpointHook, LoggerHook
from mmengine.runner import EpochBasedTrainLoop, ValLoop, TestLoop
from mmengine.optim import OptimWrapper
from torch.optim import AdamW
from mmaction.evaluation import AccMetric
from mmaction.datasets import VideoDataset
from mmaction.datasets.transforms import DecordInit, SampleFrames, DecordDecode, Resize, FormatShape
from mmaction.datasets.transforms import PackActionInputs
from mmengine.dataset import DefaultSampler

default_scope = 'mmaction'
data_root = '{DEMO}'
test_pipeline = [
    dict(type=DecordInit, io_backend='disk'),
    dict(type=SampleFrames, clip_len=8, frame_interval=2, num_clips=1, test_mode=True),
    dict(type=DecordDecode),
    dict(type=Resize, scale=(32, 32), keep_ratio=False),
    dict(type=FormatShape, input_format='NCTHW'),
    dict(type=PackActionInputs),
]
train_dataloader = dict(
    batch_size=4, num_workers=0, sampler=dict(type=DefaultSampler, shuffle=True),
    dataset=dict(type=VideoDataset, ann_file=data_root + '/train.txt',
                 data_prefix=dict(video=data_root + '/videos'), pipeline=test_pipeline))
val_dataloader = dict(
    batch_size=4, num_workers=0, sampler=dict(type=DefaultSampler, shuffle=False),
    dataset=dict(type=VideoDataset, ann_file=data_root + '/test.txt',
                 data_prefix=dict(video=data_root + '/videos'), pipeline=test_pipeline, test_mode=True))
test_dataloader = val_dataloader
val_evaluator = dict(type=AccMetric)
test_evaluator = val_evaluator
train_cfg = dict(type=EpochBasedTrainLoop, max_epochs=1, val_interval=1)
val_cfg = dict(type=ValLoop)
test_cfg = dict(type=TestLoop)
optim_wrapper = dict(type=OptimWrapper, optimizer=dict(type=AdamW, lr=5e-4, weight_decay=0.05))
param_scheduler = []
default_hooks = dict(logger=dict(type=LoggerHook, interval=10),
                     checkpoint=dict(type=CheckpointHook, interval=1))
"""
#: a base whose schedule takes a variable (lz/_base_/sched_var.py of the audit)
SCHEDULE = """
from mmengine.runner import EpochBasedTrainLoop
max_epochs = 20
train_cfg = dict(type=EpochBasedTrainLoop, max_epochs=max_epochs, val_interval=max_epochs)
"""
BASES = """from mmengine.config import read_base

with read_base():
    from ._base_.tiny_model import *
    from ._base_.runtime import *
"""


def _config(tmp_path: Path, *lines: str, head: str = BASES, name: str = 'child.py') -> str:
    """A new-style config in ``tmp_path`` importing the tiny model and its runtime (``head``),
    then ``lines``; its bases are written beside it."""
    base = tmp_path / '_base_'
    base.mkdir(exist_ok=True)
    for file, text in (('tiny_model.py', TINY_MODEL), ('runtime.py', RUNTIME), ('schedule.py', SCHEDULE)):
        (base / file).write_text(text)
    path = tmp_path / name
    path.write_text(head + '\n'.join(lines) + '\n')
    return str(path)


def _refusal(config: str, mode: str = 'train') -> str:
    """The one line :func:`read_config` then :func:`check_config` refuse ``config`` with."""
    with pytest.raises(ConfigError) as err:
        check_config(read_config(config), mode)
    return str(err.value)


def test_type_name_of_a_string_a_dotted_path_and_a_class() -> None:
    from mmaction.datasets.transforms import SampleFrames

    assert [type_name(k) for k in ('SampleFrames', 'mmaction.SampleFrames', 'a.b.SampleFrames')] == [
        'SampleFrames'
    ] * 3
    assert type_name(SampleFrames) == 'SampleFrames' and type_name(None) is None


def test_the_class_typed_config_passes_its_checks(tmp_path) -> None:
    check_config(read_config(_config(tmp_path)), 'train')


PIPES = ('train_dataloader', 'val_dataloader', 'test_dataloader')


@pytest.mark.parametrize(
    'lines, message',
    [
        (
            ['model.backbone.img_size = 64'],
            'model.backbone.img_size (64) must be the size of the frames the pipelines give: 32x32 from '
            + ', '.join(f'{p}.dataset.pipeline[3] (Resize)' for p in PIPES),
        ),
        (
            ['model.backbone.num_frames = 4'],
            'model.backbone.num_frames (4) must be the clip length the pipelines sample (clip_len): 8 in '
            + ', '.join(f'{p}.dataset.pipeline[1] (SampleFrames)' for p in PIPES),
        ),
        (
            ['default_hooks.checkpoint.update(intervall=5)'],
            "default_hooks.checkpoint.intervall: the hook CheckpointHook takes no argument 'intervall'; "
            "did you mean 'interval'?",
        ),
        (
            ["default_hooks.checkpoint.update(save_best='acc/top_1')"],
            "default_hooks.checkpoint.save_best='acc/top_1': the validation reports acc/top1, acc/top5, "
            "acc/mean1 (or 'auto': the first of them)",
        ),
        (
            ['train_dataloader.dataset.pipeline[1] = dict(type=SampleFrames, clip_len=8, frame_intervall=4)'],
            'train_dataloader.dataset.pipeline[1].frame_intervall is not an argument of SampleFrames (which '
            "ignores the others) (did you mean 'frame_interval'? valid: clip_len, frame_interval, num_clips, "
            'temporal_jitter, twice_sample, out_of_bound_opt, test_mode, keep_tail_frames, target_fps)',
        ),
        (
            [
                'from dna_mm.models.adapters import with_attention',
                'model.backbone = dict(type=with_attention, model=dict(type=DnATimeSformer), num_frames=8,',
                '                      attn_cfg=dict(type=DnAAttention))',
            ],
            'model.backbone.num_frames is not an argument of with_attention (the model\'s own go in '
            'model.backbone.model) (valid: model, attn_cfg, q_neg_scale, v_neg_scale)',
        ),
        (
            ["model.backbone.attn_cfg.update(variant='qpm_vmp')"],
            "model.backbone.attn_cfg.variant: unknown DnA variant 'qpm_vmp'; did you mean 'qpm_vpm'? "
            "(expected one of ['apm', 'apm_alpha', 'q_vpm', 'qpm_v', 'qpm_vpm'] or ['A±', 'QV±', 'Q±V', "
            "'Q±V±', 'Â±'] (± or +-))",
        ),
        (
            ['model.backbone.attn_cfg.update(varaint=1)'],
            "model.backbone.attn_cfg.varaint: DnAAttention takes no argument 'varaint'; did you mean "
            "'variant'?",
        ),
    ],
    ids=[
        'img_size',
        'num_frames',
        'checkpoint-key',
        'save_best',
        'sampler-key',
        'with_attention',
        'variant',
        'arg',
    ],
)
def test_a_check_fires_on_class_types(tmp_path, lines, message) -> None:
    assert _refusal(_config(tmp_path, *lines)) == message


def test_limit_topk_drops_top5_of_a_class_typed_acc_metric(tmp_path) -> None:
    cfg = read_config(_config(tmp_path))
    assert limit_topk(cfg) == [5]
    assert cfg.val_evaluator.metric_options == {'top_k_accuracy': {'topk': (1,)}}


def test_a_base_variable_set_in_a_new_style_child_is_refused(tmp_path) -> None:
    head = BASES.replace('runtime import *\n', 'runtime import *\n    from ._base_.schedule import *\n')
    config = _config(tmp_path, 'max_epochs = 1', head=head)
    with pytest.raises(ConfigError) as err:
        read_config(config)
    assert str(err.value) == (
        f"config {config}: 'max_epochs' is a variable of its base, used when the base was read: setting it "
        'here changes nothing; set train_cfg.max_epochs in this file too'
    )
    set_again = _config(tmp_path, 'max_epochs = 1', 'train_cfg.update(max_epochs=max_epochs)', head=head)
    assert read_config(set_again).train_cfg.max_epochs == 1


def _read_refusal(config: str, kind: type = ConfigError) -> str:
    with pytest.raises(kind) as err:
        read_config(config)
    return str(err.value)


SHIPPED = (
    "dna_mm's shipped configs are old-style (an old-style config inherits one: "
    "_base_ = ['dna_mm::timesformer_dna_demo.py']); a new-style config (with read_base()) cannot import "
    'them: copy what it needs into it, or write it old-style (docs/adding_dna.md, "Config styles")'
)


def test_a_failing_line_is_one_line(tmp_path) -> None:
    config = _config(tmp_path, 'train_cfg.update(max_epochs=max_epoch)')
    assert _read_refusal(config) == f"config {config}, line 6: NameError: name 'max_epoch' is not defined"


def test_a_misspelt_base_module_is_one_line(tmp_path) -> None:
    config = _config(tmp_path, head=BASES.replace('tiny_model', 'tiny_modle'))
    assert _read_refusal(config, MissingFileError) == (
        f'config {config}, line 4: its base ._base_.tiny_modle ({tmp_path}/_base_/tiny_modle.py) does not '
        'exist (did you mean ._base_.tiny_model?)'
    )


def test_a_class_from_a_wrong_module_is_one_line(tmp_path) -> None:
    config = _config(
        tmp_path,
        'model.backbone.type = DnATimeSformer',
        head='from dna_mm.models import DnATimeSformer\n' + BASES,
    )
    assert _read_refusal(config) == (
        f"config {config}, line 1: dna_mm.models has no 'DnATimeSformer': import it from the module that "
        'defines it'
    )


def test_an_old_style_child_of_a_new_style_config_is_one_line(tmp_path) -> None:
    base = _config(tmp_path, name='tiny.py')
    child = tmp_path / 'old.py'
    child.write_text("_base_ = ['./tiny.py']\ntrain_cfg = dict(max_epochs=1)\n")
    assert _read_refusal(str(child)) == (
        f'config {child}: its _base_ {base} is a new-style config (with read_base()), which an old-style '
        'one (_base_ = [...]) cannot inherit: write this config new-style too (with read_base(): from '
        '.tiny import *)'
    )


def test_a_new_style_child_of_an_old_style_config_is_one_line(tmp_path) -> None:
    (tmp_path / 'old.py').write_text('_base_ = []\nmax_epochs = 2\n')
    head = 'from mmengine.config import read_base\n\nwith read_base():\n    from .old import *\n'
    config = _config(tmp_path, head=head)
    assert _read_refusal(config) == (
        f'config {config}, line 4: its base .old ({tmp_path}/old.py) is an old-style config '
        '(_base_ = [...]), which a new-style one (with read_base()) cannot import: write this config '
        f"old-style (_base_ = ['{tmp_path}/old.py']), or the base new-style"
    )


@pytest.mark.parametrize('where', ['before', 'after'])
def test_a_file_of_both_styles_is_one_line(tmp_path, where) -> None:
    old = "_base_ = ['./other.py']\n"
    head = f'from torch.optim import AdamW\n{old}{BASES}' if where == 'before' else BASES + old
    config = _config(tmp_path, head=head)
    assert _read_refusal(config) == (
        f'config {config}: it mixes the two config styles, _base_ = [...] (old) and imports or with '
        'read_base() (new): keep one (docs/adding_dna.md, "Config styles")'
    )


@pytest.mark.parametrize(
    'module', ['dna_mm.configs.timesformer_dna_demo', 'relative'], ids=['package', 'relative']
)
def test_a_shipped_config_as_a_new_style_base_is_one_line(tmp_path, module) -> None:
    if module == 'relative':  # the shipped file itself, by a relative import from tmp_path
        module = '.' * len(tmp_path.parts) + '.'.join((REPO / 'configs' / 'timesformer_dna_demo').parts[1:])
    config = _config(
        tmp_path,
        head=f'from mmengine.config import read_base\n\nwith read_base():\n    from {module} import *\n',
    )
    assert _read_refusal(config) == f'config {config}, line 4: {SHIPPED}'


def test_the_tools_say_a_new_style_mistake_in_one_line(tmp_path) -> None:
    config = _config(tmp_path, 'train_cfg.update(max_epochs=max_epoch)')
    done = run_main(['tools/train.py', config, '--work-dir', str(tmp_path / 'work')], check=False)
    assert done.returncode == 2
    line = f"train.py: error: config {config}, line 6: NameError: name 'max_epoch' is not defined"
    assert done.stderr.splitlines()[0] == line


def test_a_dotted_attention_path_and_a_class_are_accepted(tmp_path) -> None:
    from dna_mm.models import DnAAttention

    assert attention_cfg(dict(type='dna_mm.models.DnAAttention', variant='apm'))['type'] == 'DnAAttention'
    assert attention_cfg(dict(type=DnAAttention))['type'] is DnAAttention
    assert member_type('dna_mm.models.NoSuchAttention') is None and member_type(int) is None
    dumped = tmp_path / 'dumped.py'  # what the runner dumps for a new-style run: dotted paths
    read_config(_config(tmp_path)).dump(dumped)
    assert "type='dna_mm.models.DnAAttention'" in dumped.read_text()
    check_config(read_config(str(dumped)), 'test')
    dumped.write_text(dumped.read_text().replace('models.DnAAttention', 'models.DnAAtention'))
    assert _refusal(str(dumped), 'test').startswith(
        "model.backbone.attn_cfg.type: unknown attention 'dna_mm.models.DnAAtention'; did you mean "
        'DnAAttention / dna?'
    )


@pytest.fixture(scope='module')
def tiny_run(tmp_path_factory):
    """``(config, checkpoint, video)``: the class-typed tiny config, its recognizer's random weights
    and a 2 s video (25 fps, 64x48)."""
    from mmaction.apis import init_recognizer

    root = tmp_path_factory.mktemp('new_style')
    config = _config(root)
    torch.manual_seed(0)
    model = init_recognizer(read_config(config), None, device='cpu')
    ckpt = root / 'random.pth'
    torch.save({'state_dict': model.state_dict()}, ckpt)
    rng = np.random.default_rng(0)
    frames = (rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8) for _ in range(50))
    write_video(root / 'videos' / 'two.mp4', frames, fps=25, codec='libx264')
    return config, ckpt, root / 'videos' / 'two.mp4'


def test_infer_over_time_on_a_class_typed_pipeline(tiny_run, capsys) -> None:
    config, ckpt, video = tiny_run
    assert load_tool('tools/infer.py').main([config, str(ckpt), str(video), '--over-time']) == 0
    assert ' windows; ' in capsys.readouterr().out


def test_extract_features_on_a_class_typed_pipeline(tiny_run, tmp_path) -> None:
    config, ckpt, video = tiny_run
    args = [
        config,
        str(ckpt),
        '--videos',
        str(video.parent),
        '--out',
        str(tmp_path / 'out'),
        '--workers',
        '0',
    ]
    assert load_tool('tools/extract_features.py').main([*args, '--over-time']) == 0
    assert (tmp_path / 'out' / 'index.csv').is_file()
