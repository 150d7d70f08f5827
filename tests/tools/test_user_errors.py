"""A user's mistake in train / test / infer (and every tool that reads user files) is one line and
exit status 2 (no traceback, unless --debug); every unreadable test video is named at once;
config values are checked first."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, load_tool, refused_line, run_main, tiny_run_options
from mmengine.config import Config, DictAction
from PIL import Image

from dna_mm.config import check_config, format_metrics
from dna_mm.config.prepare import limit_topk
from dna_mm.errors import ConfigError
from dna_mm.models.attention.builder import suggest_attention
from dna_mm.tools.cli import DEBUG_HELP, cli_main


def _tool(name: str):
    """``tools/<name>.py`` as a module (its ``main(argv)`` runs in this process)."""
    return load_tool(f'tools/{name}.py')


def _demo_cfg(*opts: str, config: str = DEMO_CONFIG) -> Config:
    parser = __import__('argparse').ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(config)
    if opts:
        cfg.merge_from_dict(parser.parse_args(['--o', *opts]).o)
    return cfg


@pytest.mark.parametrize(
    'opts, message',
    [
        (
            ['test_dataloader.dataset.pipeline.3.scale=(-1,200)'],
            'test_dataloader.dataset.pipeline[4] (ThreeCrop) crops 224x224 out of frames of short side 200 '
            '(test_dataloader.dataset.pipeline[3] (Resize) makes them)',
        ),
        (
            [
                'val_dataloader.dataset.pipeline.3.scale=(200,180)',
                'val_dataloader.dataset.pipeline.3.keep_ratio=False',
            ],
            'val_dataloader.dataset.pipeline[4] (CenterCrop) crops 224x224 out of 200x180 frames',
        ),
    ],
)
def test_a_crop_larger_than_the_frames_is_named(opts, message) -> None:
    """MMAction2's crops would cut smaller frames with a negative offset (CenterCrop: the model's
    convolution then fails), assert (ThreeCrop) or stack ragged arrays (TenCrop): every test video
    "unreadable". The shipped crops fit."""
    config = str(REPO / 'configs/timesformer_dna_ntu60.py')
    check_config(_demo_cfg(config=config), 'train')
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config(_demo_cfg(*opts, config=config), 'train')


def test_diff_rank_seed_leaves_room_for_every_ranks_seed(monkeypatch) -> None:
    """mmengine seeds rank r with seed + r: NumPy refuses 2**32 on rank 1 after rank 0 started."""
    monkeypatch.setenv('WORLD_SIZE', '2')
    check_config(_demo_cfg('randomness.seed=4294967294', 'randomness.diff_rank_seed=True'), 'train')
    with pytest.raises(
        ConfigError, match=r'randomness.seed 4294967295 with diff_rank_seed: .* on 2 processes'
    ):
        check_config(_demo_cfg('randomness.seed=4294967295', 'randomness.diff_rank_seed=True'), 'train')
    check_config(_demo_cfg('randomness.seed=4294967295'), 'train')  # one seed for every rank


@pytest.mark.parametrize(
    'opt, message',
    [
        # MMAction2's head refuses 'mean' after the test has run; None gives per-view scores
        ('model.cls_head.average_clips=mean', "model.cls_head.average_clips must be 'prob' or 'score'"),
        ('model.cls_head.average_clips=None', 'got None: None keeps one score per view, which the metrics'),
        (
            'default_hooks.checkpoint.rule=max',
            "default_hooks.checkpoint.rule must be 'greater', 'less' or None",
        ),
        ('train_cfg.max_epochs=-1', 'train_cfg.max_epochs must be > 0, got -1'),
        ('train_cfg.max_epochs=0', 'train_cfg.max_epochs must be > 0, got 0'),
        ('train_cfg.val_interval=0', 'train_cfg.val_interval must be > 0, got 0'),
        # counts are ints: mmengine's loop asserts on 1.5 and takes int('abc') once the model is built
        ('train_cfg.max_epochs=1.5', 'train_cfg.max_epochs must be an int > 0, got 1.5'),
        ('train_cfg.max_epochs=abc', "train_cfg.max_epochs must be an int > 0, got 'abc'"),
        ('train_cfg.val_interval=0.5', 'train_cfg.val_interval must be an int > 0, got 0.5'),
        ('model.cls_head.num_classes=0', 'model.cls_head.num_classes must be > 0, got 0'),
        (
            'model.cls_head.num_classes=[4',  # a list DictAction could not read: a string
            "model.cls_head.num_classes must be an int > 0, got '[4'",
        ),
        (
            'model.backbone.num_heads=5',  # MMAction2 builds torch's attention first: its assertion
            'model.backbone.num_heads (5) must divide model.backbone.embed_dims (96): each head takes '
            'embed_dims / num_heads channels',
        ),
        (
            'model.backbone.attn_cfg.variant=qpm_vmp',
            "model.backbone.attn_cfg.variant: unknown DnA variant 'qpm_vmp'; did you mean 'qpm_vpm'? "
            "(expected one of ['apm', 'apm_alpha', 'q_vpm', 'qpm_v', 'qpm_vpm'] or",
        ),
        ('train_dataloader.batch_size=0', 'train_dataloader.batch_size must be > 0, got 0'),
        ('optim_wrapper.optimizer.lr=-0.1', 'optim_wrapper.optimizer.lr must be > 0, got -0.1'),
        (
            'default_hooks.checkpoint.interval=0',
            'default_hooks.checkpoint.interval must be > 0 (or -1), got 0',
        ),
        (
            'train_dataloader.dataset.pipeline.1.clip_len=0',
            'train_dataloader.dataset.pipeline[1].clip_len (SampleFrames) must be > 0, got 0',
        ),
        (
            'test_dataloader.dataset.pipeline.1.clip_lenn=4',  # SampleFrames takes **kwargs and drops them
            "test_dataloader.dataset.pipeline[1].clip_lenn is not an argument of SampleFrames (which "
            "ignores the others) (did you mean 'clip_len'?",
        ),
        (
            'train_dataloader.dataset.pipeline.3.keep_ratoi=False',  # a TypeError once the model is built
            "train_dataloader.dataset.pipeline[3].keep_ratoi is not an argument of Resize (did you mean "
            "'keep_ratio'?",
        ),
        ('train_cfg.val_begin=abc', "train_cfg.val_begin must be an int > 0, got 'abc'"),  # after an epoch
        (
            'default_hooks.checkpoin.interval=5',  # mmengine's KeyError traceback: a hook without a type
            "default_hooks.checkpoin is not one of the runner's default hooks (did you mean 'checkpoint'?",
        ),
        (
            'val_evaluator.prefx=acc',  # a TypeError once the model is built
            "val_evaluator.prefx is not an argument of AccMetric (did you mean 'prefix'?",
        ),
        (
            'default_hooks.logger.intervl=5',  # a TypeError as the runner is made
            "default_hooks.logger(LoggerHook).intervl is not an argument of LoggerHook (did you mean "
            "'interval'?",
        ),
        (
            'test_dataloader.dataset.pipeline.3.scale=(0,32)',
            'test_dataloader.dataset.pipeline[3].scale (Resize) must be > 0 (or -1), got 0',
        ),
        (
            'default_hooks.checkpoint.intervl=1',  # CheckpointHook takes **kwargs: caught before the run
            "default_hooks.checkpoint.intervl: the hook CheckpointHook takes no argument 'intervl'; "
            "did you mean 'interval'?",
        ),
        (
            'compile=fast',  # mmengine asserts on it only when training starts
            'compile must be True / False or a dict of torch.compile arguments '
            "(e.g. dict(mode='max-autotune')), got 'fast'",
        ),
        (
            'compile.mdoe=max-autotune',
            "compile.mdoe is not an argument of torch.compile (did you mean 'mode'?",
        ),
        (
            'model.backbone.attn_cfg.type=dnaa',
            "model.backbone.attn_cfg.type: unknown attention 'dnaa'; did you mean DnAAttention / dna?",
        ),
        (
            'model.backbone.attn_cfg.temporl=softmax',  # merged onto the base's one attention
            "model.backbone.attn_cfg.temporl: DnAAttention takes no argument 'temporl' "
            '(one attention per step: attn_cfg=dict(_delete_=True, temporal=..., spatial=...))',
        ),
        (
            'model.backbone.attn_cfg.kernal=sdpa',
            "model.backbone.attn_cfg.kernal: DnAAttention takes no argument 'kernal'; did you mean 'kernel'?",
        ),
        (
            'train_dataloader.batchsize=4',  # torch's DataLoader would refuse it once the model is built
            "train_dataloader.batchsize is not a key of a dataloader (mmengine's, torch's DataLoader) "
            "(did you mean 'batch_size'?",
        ),
        ('val_dataloader.pin_memroy=True', "val_dataloader.pin_memroy is not a key of a dataloader"),
        (
            'randomness.sed=1',  # Runner.set_randomness would refuse it as the runner is made
            "randomness.sed is not an argument of mmengine's Runner.set_randomness (did you mean 'seed'?",
        ),
        (
            'env_cfg.dist_cfg.timeot=900',  # read in a distributed run only: silent on one machine
            "env_cfg.dist_cfg.timeot is not an argument of mmengine's init_dist or torch's "
            "init_process_group (did you mean 'timeout'?",
        ),
        (
            'env_cfg.cudnn_benchmarks=True',
            "env_cfg.cudnn_benchmarks is not a key mmengine's Runner.setup_env",
        ),
        (
            'env_cfg.mp_cfg.mp_start_methd=spawn',
            "env_cfg.mp_cfg.mp_start_methd is not an argument of mmengine's set_multi_processing "
            "(did you mean 'mp_start_method'?",
        ),
        (
            'model.backbone.temporal_attn=sofmax',
            "model.backbone.temporal_attn: unknown attention 'sofmax'; "
            'did you mean SoftmaxAttention / softmax?',
        ),
        # torch.compile's values: a traceback once the runner compiles
        ('compile.mode=fastest', 'compile.mode must be one of default, lite, reduce-overhead'),
        (
            'compile.backend=inductr',
            "compile.backend 'inductr' is not one of torch's (did you mean 'inductor'?",
        ),
        # any text is truthy: 'no' would turn checkpointing on
        (
            'model.backbone.with_cp=no',
            "model.backbone.with_cp must be True or False (activation checkpointing)",
        ),
        ('optim_wrapper.accumulative_counts=0', 'optim_wrapper.accumulative_counts must be > 0, got 0'),
    ],
)
def test_check_config_names_the_key_and_the_value(opt, message) -> None:
    with pytest.raises(ConfigError) as err:
        check_config(_demo_cfg(opt), 'train')
    assert message in str(err.value)


@pytest.mark.parametrize(
    'config, step, kind',
    [
        ('configs/vitdet_dna_coco.py', 1, 'Resize'),  # MMDetection's scope
        ('configs/imagenet/dna_vit-t16_in1k.py', 1, 'ResizeEdge'),  # MMPretrain's
    ],
)
def test_a_misspelt_argument_of_a_transform_is_named_in_every_scope(
    config: str, step: int, kind: str
) -> None:
    """Found in the registry of the config's scope (the dataset would build the step with it: a
    ``TypeError`` naming no key once the model is built)."""
    cfg = Config.fromfile(str(REPO / config))
    cfg.test_dataloader.dataset.pipeline[step]['sclae'] = 1
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'test')
    assert str(err.value).startswith(
        f"test_dataloader.dataset.pipeline[{step}].sclae is not an argument of {kind} (did you mean 'scale'?"
    )


@pytest.mark.parametrize(
    'config, metric',
    [('configs/vitdet_dna_coco.py', 'CocoMetric'), ('configs/imagenet/dna_vit-t16_in1k.py', 'Accuracy')],
)
def test_a_misspelt_argument_of_a_metric_is_named_in_every_scope(config: str, metric: str) -> None:
    cfg = Config.fromfile(str(REPO / config))
    cfg.test_evaluator['prefx'] = 'x'
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'test')
    assert str(err.value).startswith(
        f"test_evaluator.prefx is not an argument of {metric} (did you mean 'prefix'?"
    )


def test_a_wrong_call_in_a_parts_own_init_keeps_its_traceback() -> None:
    """A part of one's own whose ``__init__`` passes an argument it takes on wrongly raises the
    ``TypeError`` of a config typo, from its own code: a bug there, not a config mistake (it was
    one line pointing at a key the part does take: ``takes no argument 'scale'; did you mean
    'scale'?``); a key it does not take is still the config's."""
    from mmengine.registry import Registry

    from dna_mm.utils.build_errors import config_mistake

    metrics = Registry('metric')

    class Base:
        def __init__(self, prefix: str = '') -> None:
            self.prefix = prefix

    @metrics.register_module()
    class Scaled(Base):
        def __init__(self, scale: float = 1.0, **kwargs) -> None:
            super().__init__(scale=scale, **kwargs)  # the bug: Base takes no scale

    @metrics.register_module()
    class Fine(Base):
        def __init__(self, scale: float = 1.0, **kwargs) -> None:
            super().__init__(**kwargs)

    with pytest.raises(TypeError, match="unexpected keyword argument 'scale'") as bug:
        metrics.build(dict(type='Scaled', scale=2.0))
    assert config_mistake(bug.value) is None
    with pytest.raises(TypeError, match="unexpected keyword argument 'scal'") as typo:
        metrics.build(dict(type='Fine', scal=2.0))
    assert config_mistake(typo.value) == "the metric Fine takes no argument 'scal'; did you mean 'scale'?"


def test_a_misspelt_top_level_key_of_a_config_file_is_named(tmp_path) -> None:
    """A child config's ``randomnes``, ``load_fro`` and ``resum`` were dropped without a word (the
    run took seed 0, no weights, no resume, status 0); the file's own variables pass."""
    child = tmp_path / 'child.py'
    child.write_text(
        f"_base_ = ['{DEMO_CONFIG}']\n"
        "randomnes = dict(seed=123)\nload_fro = '/nowhere/pretrained.pth'\nresum = True\nmy_size = 32\n"
    )
    cfg = Config.fromfile(str(child))
    cfg.label_map = None
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'train')
    said = "is not a key that mmengine's runner or dna_mm reads (did you mean"
    assert str(err.value) == '; '.join(
        f"{key} {said} {near!r}?): its value would change nothing"
        for key, near in (('randomnes', 'randomness'), ('load_fro', 'load_from'), ('resum', 'resume'))
    )


def test_persistent_workers_without_workers_is_named() -> None:
    """torch's DataLoader refuses ``persistent_workers=True`` with ``num_workers=0`` (a
    ``ValueError`` traceback as the loop starts); the COCO configs' loaders have persistent workers,
    so a child that loads in the main process meets it."""
    cfg = _demo_cfg('train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=True')
    with pytest.raises(ConfigError, match='^train_dataloader.persistent_workers=True needs '):
        check_config(cfg, 'train')
    with pytest.raises(ValueError, match='persistent_workers option needs num_workers > 0'):
        torch.utils.data.DataLoader([0], num_workers=0, persistent_workers=True)


def test_check_config_accepts_the_shipped_values_and_mmengines_conventions() -> None:
    check_config(_demo_cfg(), 'train')
    check_config(_demo_cfg('default_hooks.checkpoint.interval=-1'), 'train')  # -1: never
    dist = ('env_cfg.dist_cfg.timeout=900', 'env_cfg.dist_cfg.backend=gloo', 'env_cfg.dist_cfg.port=29501')
    check_config(
        _demo_cfg(*dist, 'env_cfg.resource_limit=8192', 'env_cfg.mp_cfg.opencv_num_threads=1'), 'train'
    )
    for compile_cfg in ('compile=True', 'compile=False', 'compile.mode=max-autotune'):
        check_config(_demo_cfg(compile_cfg), 'train')
    # a train-only mistake does not stop a test run
    check_config(_demo_cfg('train_cfg.max_epochs=0'), 'test')
    valid = suggest_attention('zzzz')  # every member, in registration order (a test may register more)
    assert valid.startswith('valid: ') and {'softmax', 'dna', 'diff', 'cog', 'gated', 'sigmoid'} <= set(
        valid.removeprefix('valid: ').split(' or ')[0].split(', ')
    )


def test_an_attention_argument_its_member_does_not_take_is_named_at_build() -> None:
    """Built without the config check (a user's own script): one line naming the member and
    the key, not a ``TypeError`` from the constructor; Cog's own layer key is accepted."""
    from dna_mm.models.attention import build_attention

    with pytest.raises(ConfigError, match="DnAAttention takes no argument 'temporl'"):
        build_attention(dict(type='dna', temporl='softmax'), 32, 4)
    assert type(build_attention(dict(type='cog', softmax_first_last=False), 32, 4)).__name__ == 'CogAttention'


def test_a_variant_and_heads_that_cannot_work_are_config_errors_at_build() -> None:
    """Built without the config check (a user's own script, a timm ViT whose width comes from its
    model name): one line naming the value, a ``ConfigError`` (still a ``ValueError``)."""
    from dna_mm.family import canonical_variant
    from dna_mm.models.attention import build_attention

    with pytest.raises(ConfigError, match=r"^unknown DnA variant 'qpm_vmp'; did you mean 'qpm_vpm'\? \("):
        build_attention(dict(type='dna', variant='qpm_vmp'), 32, 4)
    with pytest.raises(ConfigError, match=r"^unknown DnA variant 'Q\+V\+'; expected one of \["):
        canonical_variant('Q+V+')
    refused = r'^DnAAttention: embed_dims \(96\) must be a positive multiple of num_heads \(5\)'
    with pytest.raises(ConfigError, match=refused):
        build_attention('dna', 96, 5)
    assert canonical_variant('Q±V') == 'qpm_v'


def test_the_imagenet_configs_name_a_bad_variant_and_with_attention_keys() -> None:
    """The DnA ViT takes its attention without a type (DnA's): its variant is checked too. On the
    ``with_attention`` baseline, the timm model's own arguments given beside ``model`` are named
    (not ``with_attention``'s ``TypeError`` once the run builds it), the place to put them said."""
    imagenet = REPO / 'configs' / 'imagenet'
    dna = _demo_cfg('model.backbone.attn_cfg.variant=qpm_vmp', config=str(imagenet / 'dna_vit-t16_in1k.py'))
    with pytest.raises(
        ConfigError, match=r"^model\.backbone\.attn_cfg\.variant: unknown DnA variant 'qpm_vmp'"
    ):
        check_config(dna)
    dna.model.backbone.attn_cfg.variant = 'Q±V'  # the paper's name
    check_config(dna)
    diff = str(imagenet / 'vit-b16_diff_in1k.py')
    with pytest.raises(ConfigError) as err:
        check_config(_demo_cfg('model.backbone.depth=2', 'model.backbone.attn=dna', config=diff))
    assert str(err.value) == (
        "model.backbone.depth is not an argument of with_attention (the model's own go in "
        'model.backbone.model) (valid: model, attn_cfg, q_neg_scale, v_neg_scale); '
        "model.backbone.attn is not an argument of with_attention (the model's own go in "
        "model.backbone.model) (did you mean 'attn_cfg'? valid: model, attn_cfg, q_neg_scale, v_neg_scale)"
    )
    check_config(_demo_cfg('model.backbone.model.depth=2', 'model.backbone.model.num_classes=0', config=diff))


def test_cfg_options_mmengine_cannot_read_are_one_line(capsys) -> None:
    """mmengine's DictAction recurses until Python stops it on ``dict(...)`` (what a config file
    says), asserts on brackets that do not pair up, and fails to unpack an option without ``=``:
    each is a ``ConfigError`` naming the option; for ``dict(...)``, the options that set its keys."""
    from dna_mm.tools.cli import cfg_options

    assert cfg_options(['a.b=1', 'c=[1,(2,3)]', 'd=x']) == {'a.b': 1, 'c': [1, (2, 3)], 'd': 'x'}
    with pytest.raises(ConfigError) as err:
        cfg_options(
            ['train_cfg.max_epochs=1', "m.attn_cfg=dict(type='DnAAttention', variant='apm', s=(1, 2))"]
        )
    assert str(err.value) == (
        "--cfg-options m.attn_cfg=dict(type='DnAAttention', variant='apm', s=(1, 2)): --cfg-options does "
        "not read dict(...) (mmengine's DictAction reads numbers, strings, lists, tuples); set its keys "
        'one by one: m.attn_cfg.type=DnAAttention m.attn_cfg.variant=apm m.attn_cfg.s=(1,2)'
    )
    with pytest.raises(ConfigError, match=r'^--cfg-options a=\[1,\(2\]: mmengine cannot read this value: '):
        cfg_options(['a=[1,(2]'])
    with pytest.raises(ConfigError, match=r'^--cfg-options max_epochs: expected KEY=VALUE'):
        cfg_options(['max_epochs'])
    opt = "model.backbone.attn_cfg=dict(type='DnAAttention',variant='qpm_vmp')"
    with pytest.raises(SystemExit) as done:  # as train.py reads it, before any config is read
        _tool('train').main([DEMO_CONFIG, '--cfg-options', opt])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"train.py: error: --cfg-options {opt}: --cfg-options does not read dict(...) (mmengine's "
        'DictAction reads numbers, strings, lists, tuples); set its keys one by one: '
        'model.backbone.attn_cfg.type=DnAAttention model.backbone.attn_cfg.variant=qpm_vmp'
    )


def test_check_config_reads_an_attention_per_step() -> None:
    cfg = _demo_cfg()
    cfg.model.backbone.attn_cfg = dict(temporal='softmax', spatial=dict(type='DnAAtention'))
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'train')
    assert "model.backbone.attn_cfg.spatial.type: unknown attention 'DnAAtention'" in str(err.value)


def test_topk_only_below_the_number_of_classes_and_coco_in_percent() -> None:
    cfg = _demo_cfg()  # 4 classes
    assert limit_topk(cfg) == [5]
    assert cfg.test_evaluator.metric_options == dict(top_k_accuracy=dict(topk=(1,)))
    assert cfg.model.cls_head.topk == (1,)  # the training log's top{k}_acc too
    big = _demo_cfg('model.cls_head.num_classes=400')
    assert limit_topk(big) == [] and 'topk' not in big.model.cls_head
    line = format_metrics({'coco/bbox_mAP': 0.703, 'coco/bbox_mAP_s': 0.685, 'coco/bbox_mAP_l': -1.0})
    assert line == 'Test results: bbox AP: 70.30  bbox AP_S: 68.50  bbox AP_L: n/a'


def test_cli_main_catches_only_the_users_mistakes(capsys) -> None:
    @cli_main('x.py')
    def user(argv=None):
        raise ConfigError('train_cfg.max_epochs must be > 0, got -1')

    @cli_main('x.py')
    def bug(argv=None):
        raise ZeroDivisionError('a bug')

    with pytest.raises(SystemExit) as done:
        user([])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0] == 'x.py: error: train_cfg.max_epochs must be > 0, got -1'
    with pytest.raises(ConfigError):
        user(['--debug'])
    with pytest.raises(ZeroDivisionError):
        bug([])

    @cli_main('x.py')
    def missing(argv=None):
        open('/nonexistent/train.txt')

    @cli_main('x.py')
    def unnamed(argv=None):  # a file error naming no file (a socket of a process that went away)
        raise FileNotFoundError(2, 'No such file or directory')

    with pytest.raises(SystemExit):
        missing([])
    assert "No such file or directory: '/nonexistent/train.txt'" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError):  # its traceback, not a line without a file
        unnamed([])


@pytest.mark.integration
@pytest.mark.parametrize(
    'opt, message',
    [
        ('train_cfg.max_epochs=-1', 'train_cfg.max_epochs must be > 0, got -1'),
        (
            'optim_wrapper.clip_grad.norm_typ=2',  # torch's TypeError at the first iteration otherwise
            "optim_wrapper.clip_grad.norm_typ is not an argument of torch's clip_grad_norm_ (clip_grad type "
            "'norm') (did you mean 'norm_type'? valid: max_norm, norm_type, error_if_nonfinite, foreach)",
        ),
    ],
)
def test_train_cli_bad_value_is_one_line_and_status_2(opt, message, tmp_path) -> None:
    """As a user runs it: no traceback, status 2; --debug raises the exception itself. The work dir
    it names is not made for a run refused before it starts."""
    work_dir = tmp_path / 'new'
    cmd = [sys.executable, 'tools/train.py', DEMO_CONFIG, '--work-dir', str(work_dir), '--cfg-options', opt]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
    assert ours == [f'train.py: error: {message}', 'train.py: (--debug prints the traceback)']
    with pytest.raises(ConfigError, match=re.escape(message)):  # the traceback
        _tool('train').main([*cmd[2:], '--debug'])
    assert not work_dir.exists()


def test_a_config_made_for_testing_cannot_train_and_says_so_in_one_line() -> None:
    """MMAction2's VideoMAE zoo config has no train_dataloader, train_cfg or optim_wrapper:
    mmengine's runner raises at ``train()``; here, one line before anything is built, and no
    library warning about resolving its ``mmaction::`` base."""
    config = 'configs/examples/videomae_vit-b_dna_k400.py'
    proc = subprocess.run(
        [sys.executable, 'tools/train.py', config], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        'train.py: error: train_dataloader, train_cfg, optim_wrapper: not in the config, so it cannot '
        'train (a config made for testing; add them to train with it)',
        'train.py: (--debug prints the traceback)',
    ]


def test_train_bad_label_and_missing_load_from(tiny_video_set, tmp_path, capsys) -> None:
    train = _tool('train')
    bad = tmp_path / 'train.txt'
    lines = (tiny_video_set / 'train.txt').read_text().splitlines()
    bad.write_text('\n'.join([*lines[:2], lines[2].split()[0] + ' 9', *lines[3:]]) + '\n')
    opts = [*tiny_run_options(tiny_video_set), f'train_dataloader.dataset.ann_file={bad}']
    with pytest.raises(SystemExit, match=rf'^{bad}:3: label 9 outside \[0, 4\) \(num_classes=4\)$') as done:
        train.main([DEMO_CONFIG, '--work-dir', str(tmp_path / 'w'), '--cfg-options', *opts])
    assert done.value.code == 2 and 'Traceback' not in capsys.readouterr().err
    empty = tmp_path / 'val.txt'  # a split the list builder found no video of
    empty.write_text('')
    empty_val = [*opts[:-1], f'val_dataloader.dataset.ann_file={empty}']
    with pytest.raises(
        SystemExit, match=rf'^{empty}: the list holds no videos: nothing to train or test on$'
    ):
        train.main([DEMO_CONFIG, '--work-dir', str(tmp_path / 'w'), '--cfg-options', *empty_val])
    assert 'Traceback' not in capsys.readouterr().err
    missing = tmp_path / 'nothing.pth'
    with pytest.raises(SystemExit, match=f'load_from {missing} does not exist'):
        train.main(
            [
                DEMO_CONFIG,
                '--work-dir',
                str(tmp_path / 'w'),
                '--cfg-options',
                *opts[:-1],
                f'load_from={missing}',
            ]
        )


@pytest.fixture(scope='module')
def tiny_checkpoint(tiny_video_set, tmp_path_factory):
    """The tiny demo model as initialised, saved as tools/test.py reads it."""
    from mmaction.registry import MODELS
    from mmengine.registry import init_default_scope

    init_default_scope('mmaction')
    model = MODELS.build(_demo_cfg(*tiny_run_options(tiny_video_set)).model)
    path = tmp_path_factory.mktemp('ckpt') / 'tiny.pth'
    torch.save(dict(state_dict=model.state_dict()), path)
    return path


@pytest.mark.integration
def test_test_names_every_unreadable_video_or_skips_them(
    tiny_video_set, tiny_checkpoint, tmp_path, capsys
) -> None:
    videos = tmp_path / 'videos'
    shutil.copytree(tiny_video_set / 'videos', videos)
    listed = (tiny_video_set / 'test.txt').read_text().splitlines()
    broken = [listed[0].split()[0], listed[2].split()[0]]
    (videos / broken[0]).write_bytes(b'\x00not a video' * 64)
    (videos / broken[1]).write_bytes(b'')
    opts = [
        *tiny_run_options(tiny_video_set),
        f'test_dataloader.dataset.data_prefix.video={videos}',
        'test_dataloader.batch_size=1',
    ]
    cmd = [
        sys.executable,
        'tools/test.py',
        DEMO_CONFIG,
        str(tiny_checkpoint),
        '--work-dir',
        str(tmp_path / 'w'),
    ]
    proc = subprocess.run(
        [*cmd, '--cfg-options', *opts], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert 'Test results' not in proc.stdout and 'Traceback' not in proc.stderr
    assert '2 of the 4 test videos cannot be read; no metric computed' in proc.stderr
    for name in broken:
        assert f'{videos / name}: ' in proc.stderr

    _tool('test').main([*cmd[2:], '--skip-unreadable', '--cfg-options', *opts])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith('Test results:'))
    assert line.endswith('(2 unreadable videos skipped: metrics over 2 of 4)'), line


def test_a_pipeline_that_reads_no_test_video_is_named_as_such(
    tiny_video_set, tiny_checkpoint, tmp_path, capsys
) -> None:
    """PyAV's opening step before decord's decoder fails on every video, for one reason: not
    a list of broken files but a pipeline that does not fit them, with --skip-unreadable too."""
    opts = [*tiny_run_options(tiny_video_set), 'test_dataloader.dataset.pipeline.0.type=PyAVInit']
    for skip in ([], ['--skip-unreadable']):
        args = [DEMO_CONFIG, str(tiny_checkpoint), '--work-dir', str(tmp_path), *skip, '--cfg-options', *opts]
        with pytest.raises(SystemExit) as done:
            _tool('test').main(args)
        err = capsys.readouterr().err
        assert done.value.code == 2 and 'Traceback' not in err
        assert (
            "test.py: error: none of the 4 test videos can be read, all for one reason: is the config's "
            'test pipeline one for these videos? (no metric computed):'
        ) in err


def test_test_on_a_file_that_is_not_a_checkpoint(tiny_video_set, tmp_path, capsys) -> None:
    text = tmp_path / 'notes.pth'
    text.write_text('this is a text file\n')
    with pytest.raises(SystemExit, match=f'checkpoint {text} is not a PyTorch file') as done:
        work = ['--work-dir', str(tmp_path / 'work')]
        _tool('test').main(
            [DEMO_CONFIG, str(text), *work, '--cfg-options', *tiny_run_options(tiny_video_set)]
        )
    assert done.value.code == 2


def test_infer_unsupported_model_and_a_missing_label_map(
    tiny_video_set, tiny_checkpoint, tmp_path, capsys
) -> None:
    infer = _tool('infer')
    video = str(next((tiny_video_set / 'videos').glob('*.mp4')))
    opts = tiny_run_options(tiny_video_set)
    # the demo config before `make demo` wrote its data: its label map does not exist yet
    assert (
        infer.main([DEMO_CONFIG, str(tiny_checkpoint), video, '--cfg-options', *opts, 'label_map=nope/x.txt'])
        == 0
    )
    out = capsys.readouterr().out
    assert 'note: no label map' in out and re.search(r'  1\. \d\.\d{4}  class \d', out), out
    config = tmp_path / 'resnet.py'
    config.write_text(
        f"_base_ = ['{DEMO_CONFIG}']\n"
        "model = dict(backbone=dict(_delete_=True, type='with_attention', "
        "model=dict(type='ResNet', depth=18, in_channels=3), attn_cfg='dna'))\n"
    )
    data = [o for o in opts if not o.startswith('model.')]  # the tiny TimeSformer's options
    with pytest.raises(SystemExit, match='with_attention: ResNet has no attention to swap') as done:
        infer.main([str(config), str(tiny_checkpoint), video, '--cfg-options', *data])
    assert done.value.code == 2
    # a detector's config (and any checkpoint: it is not read) is one line naming MMDetection's inferencer
    detector = str(REPO / 'configs' / 'vitdet_dna_demo.py')
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        infer.main([detector, str(tiny_checkpoint), video])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        "infer.py: error: this tool classifies videos with a recognizer's head (model.cls_head); the "
        "config's model is MaskRCNN, which has none; a detector runs on images with MMDetection's "
        'DetInferencer (from mmdet.apis import DetInferencer; DetInferencer(CONFIG, CHECKPOINT)(IMAGE, '
        'out_dir=...))'
    )


#: tools that take no user files (benchmarks on generated inputs, the writer of test videos beside
#: check_decoding.py); the demos and the attention and operator benchmarks take one, a member of
#: the user's own (--import)
NO_USER_INPUT = {
    'tools/benchmarks/benchmark_onnx.py',
    'tools/benchmarks/tune_short_kernel.py',
    'tools/benchmarks/benchmark_preparation.py',
    'dna_mm/preparation/video_kinds.py',
}


@pytest.mark.parametrize(
    'tool', sorted({str(p.relative_to(REPO)) for p in REPO.glob('tools/**/*.py')} - NO_USER_INPUT)
)
def test_every_tool_that_reads_user_files_offers_debug(tool) -> None:
    """Each such tool runs in ``run_tool`` (one ``prog: error:`` line, status 2) and so takes
    ``--debug``; a new tool that does not is caught here (or listed in NO_USER_INPUT)."""
    sub = ['softmax-to-dna'] if tool.endswith('convert_checkpoint.py') else []
    proc = run_main([tool, *sub, '--help'])
    assert DEBUG_HELP in ' '.join(proc.stdout.split()), proc.stdout


@pytest.mark.parametrize(
    'opt, line',
    [
        (
            'model.backbone.embed_dim=64',
            "model.backbone.embed_dim: the model part DnATimeSformer takes no argument 'embed_dim'; "
            "did you mean 'embed_dims'?",
        ),
        (  # these the config check names, before the model is built (their lines end in 'valid: ')
            'train_cfg.max_epoch=2',
            "train_cfg.max_epoch is not an argument of the loop ResumableEpochBasedTrainLoop (did you mean "
            "'max_epochs'? valid: ",
        ),
        (
            'default_hooks.logger.intervall=1',
            "default_hooks.logger(LoggerHook).intervall is not an argument of LoggerHook (did you mean "
            "'interval'? valid: ",
        ),
        (
            'train_dataloader.dataset.ann_fil=x.txt',
            "train_dataloader.dataset.ann_fil is not an argument of RobustVideoDataset (did you mean "
            "'ann_file'? valid: ",
        ),
        (
            'optim_wrapper.optimizer.lrr=0.1',  # a class of torch's own: its arguments are read (checked)
            "optim_wrapper.optimizer.lrr is not an argument of AdamW (did you mean 'lr'? valid: ",
        ),
    ],
)
def test_an_unknown_argument_is_one_line_naming_the_closest(opt, line, tiny_video_set, tmp_path) -> None:
    """A model part, a loop, a hook, a dataset: the key, the type and the closest valid names;
    status 2, no traceback; --debug raises the TypeError itself (the check's ConfigError where it
    names the key first)."""
    args = ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path), '--cfg-options']
    args += [*tiny_run_options(tiny_video_set), opt]
    proc = run_main(args, check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
    checked = line.endswith('valid: ')
    assert (ours[0].startswith if checked else ours[0].__eq__)(f'train.py: error: {line}'), ours
    assert ours[1:] == ['train.py: (--debug prints the traceback)']
    with pytest.raises(ConfigError if checked else TypeError, match='is not an argument|unexpected keyword'):
        _tool('train').main([*args[1:], '--debug'])


def test_a_dict_in_a_list_in_cfg_options_is_one_line_saying_where_to_write_it(tmp_path) -> None:
    """``--cfg-options "custom_hooks=[dict(type=...)]"``: mmengine's parser keeps the dict as text
    (which mmengine fails on later: a ``TypeError`` traceback as the runner is made, or as the
    visualizer is), or with a comma inside the dict cannot read the list at all; here one line,
    status 2, before anything is read. A stock tool's text hook (MMDetection's ``tools/train.py``
    with ``runner_type='DnARunner'``) is the runner's one line."""
    args = ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path), '--cfg-options']
    for opt in (
        "custom_hooks=[dict(type='SkippedSamplesHook')]",
        "custom_hooks=[dict(type='EMAHook', momentum=0.001)]",
        "visualizer.vis_backends=[dict(type='TensorboardVisBackend')]",
    ):
        proc = run_main([*args, opt], check=False)
        assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
        key = opt.split('=')[0]
        ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
        assert ours[0] == (
            f'train.py: error: --cfg-options {opt}: a dict inside a list cannot be an option; write it in '
            f'a config file (a child config: _base_ = [...], {key} = [*_base_.{key}, dict(...)], which '
            'keeps what the base config lists)'
        )
    from dna_mm.engine import DnARunner

    with pytest.raises(
        ConfigError, match=r'^custom_hooks: "dict\(type=\'SkippedSamplesHook\'\)" is text, not a hook'
    ):
        DnARunner.register_hook(object.__new__(DnARunner), "dict(type='SkippedSamplesHook')")


def test_a_step_that_needs_a_missing_package_is_one_line(tiny_video_set, tmp_path) -> None:
    """MMAction2's pytorchvideo RandAugment (not installed here): the step and the package."""
    assert importlib.util.find_spec('pytorchvideo') is None, 'this test needs pytorchvideo absent'
    cfg = tmp_path / 'randaugment.py'
    cfg.write_text(
        f"_base_ = ['{DEMO_CONFIG}']\n"
        "train_pipeline = [dict(type='DecordInit'), dict(type='SampleFrames', clip_len=4, num_clips=1),\n"
        "    dict(type='DecordDecode'), dict(type='PytorchVideoWrapper', op='RandAugment'),\n"
        "    dict(type='FormatShape', input_format='NCTHW'), dict(type='PackActionInputs')]\n"
        'train_dataloader = dict(dataset=dict(pipeline=train_pipeline))\n'
    )
    args = ['tools/train.py', str(cfg), '--work-dir', str(tmp_path), '--cfg-options']
    proc = run_main([*args, *tiny_run_options(tiny_video_set)], check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
    assert ours[0] == (
        'train.py: error: the pipeline step PytorchVideoWrapper needs pytorchvideo, which is not '
        'installed: install it, or take the step out'
    )


def test_no_shipped_config_has_a_checkpoint_key_the_check_refuses() -> None:
    """The check of default_hooks.checkpoint's keys passes every config dna_mm ships (zoo bases
    add mmengine's ``_scope_``)."""
    from dna_mm.config.check.hooks import checkpoint_keys

    configs = [p for p in (REPO / 'configs').rglob('*.py') if '_base_' not in p.parts]
    refused = {
        str(p.relative_to(REPO)): checkpoint_keys(
            (Config.fromfile(str(p)).get('default_hooks') or {}).get('checkpoint')
        )
        for p in configs
    }
    assert {k: v for k, v in refused.items() if v} == {} and len(configs) > 40


def test_a_model_preprocessor_that_drops_the_top_level_normalisation_is_one_line(tmp_path) -> None:
    """An ImageNet (MMPretrain) config keeps mean / std / to_rgb in the top-level
    ``data_preprocessor``; ``model.data_preprocessor.num_classes=4`` would make the runner use
    that one-key dict alone (unnormalised pixels): refused, naming the key to set instead; the
    top-level key and a model preprocessor with its own normalisation pass the check."""
    config = str(REPO / 'configs' / 'imagenet' / 'dna_vit-t16_in1k.py')
    args = ['tools/train.py', config, '--work-dir', str(tmp_path)]
    proc = run_main([*args, '--cfg-options', 'model.data_preprocessor.num_classes=4'], check=False)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
    assert ours == [
        'train.py: error: model.data_preprocessor is set, so the runner ignores the top-level '
        'data_preprocessor and its mean / std / to_rgb (the model would see unnormalised pixels): set '
        'data_preprocessor.<key> instead (e.g. data_preprocessor.num_classes), or give '
        'model.data_preprocessor the mean / std / to_rgb too',
        'train.py: (--debug prints the traceback)',
    ]
    cfg = Config.fromfile(config)
    check_config(cfg)  # as shipped
    cfg.data_preprocessor.num_classes = 4
    check_config(cfg)
    cfg.model.data_preprocessor = dict(cfg.data_preprocessor)
    check_config(cfg)
    cfg.data_preprocessor.to_rgb = False  # nothing to lose: only the mean / std must come along
    cfg.model.data_preprocessor = dict(mean=cfg.data_preprocessor.mean, std=cfg.data_preprocessor.std)
    check_config(cfg)
    cfg.model.data_preprocessor = dict(mean=cfg.data_preprocessor.mean)
    with pytest.raises(ConfigError, match=r'ignores the top-level data_preprocessor and its std \('):
        check_config(cfg)


def test_a_dataset_folder_not_prepared_is_one_line_naming_the_dataset(tmp_path) -> None:
    """The ImageNet config without its folders, or with some of its class folders only: the
    dataset, its data_root, what it looked for and what to do, as one line; a file error that
    names no file keeps its own message."""
    from dna_mm.engine.runner import missing_data

    config = str(REPO / 'configs' / 'imagenet' / 'dna_vit-t16_in1k.py')
    root = tmp_path / 'nowhere'
    args = ['tools/train.py', config, '--work-dir', str(tmp_path / 'run'), '--cfg-options']
    proc = run_main([*args, f'train_dataloader.dataset.data_root={root}'], check=False)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
    assert ours == [
        f"train.py: error: ImageNet (data_root '{root}'): {root}/train does not exist; prepare the data "
        "(docs/datasets/) or set the dataset's data_root / ann_file",
        'train.py: (--debug prints the traceback)',
    ]
    for wnid in ('n01440764', 'n01443537'):  # ImageNet extracted in part: 2 of its class folders
        (root / 'train' / wnid).mkdir(parents=True)
        Image.new('RGB', (8, 8)).save(root / 'train' / wnid / f'{wnid}_1.JPEG')
    proc = run_main([*args, f'train_dataloader.dataset.data_root={root}'], check=False)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
    assert ours[0] == (
        f"train.py: error: ImageNet (data_root '{root}'): The number of subfolders (2) doesn't match the "
        'number of specified classes (1000); prepare the data (docs/datasets/) or give its classes '
        '(metainfo) for a subset of them'
    )
    loader = dict(dataset=dict(type='RobustVideoDataset', ann_file='x.txt'))
    assert missing_data(loader, FileNotFoundError('annotation file x.txt does not exist')) is None
    assert 'RobustVideoDataset: x.txt does not exist' in str(
        missing_data(loader, FileNotFoundError(2, 'No such file or directory', 'x.txt'))
    )


# -- the attention members the tools take by name ------------------------------------------------
#: the tools that put the member they are given by name in a model's self-attention, and the option
MEMBER_TOOLS = {
    'tools/demos/demo.py': '--attn',
    'tools/demos/demo_det.py': '--attn',
    'tools/analysis/study.py': '--methods',
    'tools/benchmarks/benchmark_attention.py': '--methods',
    'tools/benchmarks/benchmark_operators.py': '--attn',
}


def _error_line(proc) -> str:
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    return next(ln for ln in proc.stderr.splitlines() if ': error: ' in ln)


@pytest.mark.parametrize('tool', sorted(MEMBER_TOOLS))
def test_a_cross_form_is_one_line_and_no_tool_lists_one(tool, tmp_path) -> None:
    """A cross form (query and context) where a self-attention is needed: refused by name before
    any work, its self-attention named (not a ``TypeError`` in the benchmark's step, a
    ``ValueError`` traceback in the demo's run, or left out of the operator count). The names an
    unknown value lists are self-attentions only."""
    out = ['--work-dir', str(tmp_path / 'out')] if 'demo' in tool else []
    out = ['--out', str(tmp_path / 'out')] if 'study' in tool else out
    flag = MEMBER_TOOLS[tool]
    line = _error_line(run_main([tool, flag, 'softmax', 'DnACrossAttention', *out], check=False))
    said = f'{flag} DnACrossAttention: DnACrossAttention is a cross form (query and context) of '
    assert f': error: {said}DnAAttention / dna; these tools take self-attention members: softmax, ' in line
    assert 'Cross' not in line.split('members: ', 1)[1] and not (tmp_path / 'out').exists()
    line = _error_line(run_main([tool, flag, 'GatedCrossAtention', *out], check=False))
    valid = line.rsplit('GatedCrossAtention', 1)[1]  # after the value: the names the tool takes
    assert 'GatedAttention' in valid and 'Cross' not in valid, line


@pytest.mark.parametrize(
    'method, said',
    [
        ('softmax:apm', "softmax has no variants; a variant is a DnA attention's (dna:apm, dna:A±, A±)"),
        ('dna+gatd', "'dna+gatd': unknown setting '+gatd' (NAME+gated: the member with the output gate)"),
    ],
)
@pytest.mark.parametrize('tool', sorted({**MEMBER_TOOLS, 'tools/benchmarks/benchmark_onnx.py': '--attn'}))
def test_a_setting_its_member_does_not_take_is_one_line_before_any_work(
    tool: str, method: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Every tool that reads a method by name (``dna:apm+gated``) refuses a setting its member does
    not take before any work: a line naming the flag and the value, no hint to import a member of
    your own, no folder written (not a build error in the run a demo starts)."""
    out = tmp_path / 'out'
    flag = MEMBER_TOOLS.get(tool, '--attn')
    where = ['--work-dir', str(out)] if 'demo' in tool else ['--out', str(out)]
    assert refused_line(tool, [flag, 'dna', method, *where], capsys) == f'{flag} {method}: {said}'
    assert not out.exists()


def test_a_host_given_a_cross_form_by_config_is_a_config_error() -> None:
    """``attn_cfg='DnACrossAttention'`` in a config (``tools/train.py``): one line, not a traceback."""
    from dna_mm.models.backbones.vitdet import ViTDet

    refused = r"^ViTDet: attention type 'DnACrossAttention' is not a self-attention"
    with pytest.raises(ConfigError, match=refused):
        ViTDet(
            img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=4, pretrain_img_size=32,
            attn_cfg='DnACrossAttention',
        )  # fmt: skip


NO_FORMULA = """
from mmengine.registry import MODELS
from dna_mm.models.attention import AttentionBase


@MODELS.register_module()
class {cls}(AttentionBase):
    {body}
"""
BAD_SHAPE = """
from mmengine.registry import MODELS
from dna_mm.models.attention import AttentionBase


@MODELS.register_module()
class BadShapeMemberAttention(AttentionBase):
    short_name = 'badshape_member'

    def attend(self, heads, attn_mask, attn_bias, eager):
        return heads['v'][:, :, :1], {}
"""


@pytest.fixture
def member_file(tmp_path, monkeypatch):
    """``make(module, source)``: a user's member file in ``tmp_path``; after the test its module,
    what it registered and the paths its import put first are gone."""
    from mmengine.registry import MODELS

    monkeypatch.setattr(sys, 'path', list(sys.path))
    monkeypatch.setenv('PYTHONPATH', '')
    shipped, made = dict(MODELS.module_dict), []

    def make(module: str, source: str) -> str:
        path = tmp_path / f'{module}.py'
        path.write_text(source)
        made.append(module)
        return str(path)

    yield make
    for module in made:
        sys.modules.pop(module, None)
    for name in list(MODELS.module_dict):
        if name not in shipped:
            del MODELS.module_dict[name]


@pytest.mark.parametrize('tool', ['tools/demos/demo.py', 'tools/benchmarks/benchmark_attention.py'])
def test_a_member_without_attend_is_one_line_before_any_work(tool, member_file, tmp_path) -> None:
    """Its class statement (a short name of its own) is refused as the tool imports it; one
    registered with no short name is refused when the tool looks its name up. Not a bare
    ``NotImplementedError`` at the first step."""
    flag, out = MEMBER_TOOLS[tool], ['--work-dir', str(tmp_path / 'out')] if 'demo' in tool else []
    body = "short_name = 'noattend_named'"
    named = member_file('no_attend_named', NO_FORMULA.format(cls='NoAttendNamed', body=body))
    line = _error_line(run_main([tool, flag, 'noattend_named', '--import', named, *out], check=False))
    assert line.endswith(
        'error: no_attend_named.NoAttendNamed defines no attend(heads, attn_mask, attn_bias, eager): an '
        'attention member must define attend, its formula (docs/attention.md, "Your own member")'
    ), line
    unnamed = member_file('no_attend_typed', NO_FORMULA.format(cls='NoAttendTyped', body='pass'))
    line = _error_line(run_main([tool, flag, 'NoAttendTyped', '--import', unnamed, *out], check=False))
    assert f'error: {flag} NoAttendTyped: no_attend_typed.NoAttendTyped defines no attend(' in line, line
    assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize(
    'tiny, shapes',
    [(True, '[16, 2, 1, 32]; expected [B, H, M, d_v] = [16, 2, 2, 32]'),
     (False, '[196, 12, 1, 64]; expected [B, H, M, d_v] = [196, 12, 8, 64]')],
    ids=['in_process', 'fresh_processes'],
)  # fmt: skip
def test_a_wrong_attend_shape_is_one_line_in_the_attention_benchmark(tiny, shapes, member_file) -> None:
    """The core scope (the default's first) checks the member's first output as every host form
    does (not autograd's shape mismatch), in this process (``--tiny``) and in the CPU's fresh
    processes (real shapes: temporal, 196 clips of 8 frames)."""
    path = member_file('bad_shape_member', BAD_SHAPE)
    args = ['tools/benchmarks/benchmark_attention.py', '--methods', 'badshape_member', '--import', path]
    args += ['--device', 'cpu', '--shapes', 'temporal', '--reps', '1', *(['--tiny'] if tiny else [])]
    line = _error_line(run_main(args, check=False))
    assert line.endswith(f'error: bad_shape_member.BadShapeMemberAttention.attend returned {shapes} '
                         '(batch, heads, queries, value head dim)'), line  # fmt: skip


@pytest.mark.parametrize(
    'tool, args',
    [
        ('tools/analysis/get_flops.py', []),
        ('tools/infer.py', ['ckpt', 'clip.mp4']),
        ('tools/deployment/export_onnx.py', ['ckpt', '--out', 'out.onnx']),
        ('tools/analysis/analyze_attention.py', ['ckpt', '--out', 'out']),
        ('tools/analysis/relevance_maps.py', ['ckpt', '--input', 'clip.mp4', '--out', 'out']),
    ],
)
def test_a_tool_that_builds_a_model_it_does_not_train_names_the_key(tool, args, tmp_path, capsys) -> None:
    """The tools that build a config's model without training it check the model's values first
    (``dna_mm.config.model.model_from_config``), so a wrong one is named by its key as
    ``tools/train.py`` names it, where the build alone names only the class."""
    for name in ('ckpt', 'clip.mp4'):
        (tmp_path / name).write_bytes(b'')  # files: the model is built before they are read
    options = ['model.backbone.attn_cfg.type=softmax', 'model.backbone.attn_cfg.variant=apm']
    argv = [DEMO_CONFIG, *(str(tmp_path / a) if a in ('ckpt', 'clip.mp4') else a for a in args)]
    line = refused_line(tool, [*argv, '--cfg-options', *options], capsys)
    assert line == "model.backbone.attn_cfg.variant: SoftmaxAttention takes no argument 'variant'", line


@pytest.mark.parametrize(
    'tool, args, line',
    [
        (
            'tools/analysis/get_flops.py',
            ['dna_vit_tinyy'],
            "dna_vit_tinyy is neither a config file nor a timm model; did you mean "
            "'dna_vit_tiny_patch16_224'",
        ),
        (
            'tools/analysis/get_flops.py',
            ['dna_vit_tiny_patch16_224', '--model-args', 'num_clases=3'],
            "the model DnAVisionTransformer takes no argument 'num_clases' (--model-args); did you mean "
            "'num_classes'",
        ),
        (
            'tools/analysis/analyze_attention.py',
            ['timm:dna_vit_tinyy', 'ckpt', '--out', 'out'],
            "timm:dna_vit_tinyy: timm has no model 'dna_vit_tinyy'; did you mean 'dna_vit_tiny_patch16_224'",
        ),
    ],
)
def test_a_misspelt_timm_model_or_argument_is_one_line_in_every_tool(tool, args, line, tmp_path) -> None:
    """The tools that take a timm model by name build it through one function
    (``dna_mm.config.timm_models.create_timm_model``): a name timm does not know, or an argument
    its class does not take, is one line with the closest names, status 2."""
    (tmp_path / 'ckpt').write_bytes(b'')  # a file: the model is built before it is read
    args = [str(tmp_path / a) if a in ('ckpt', 'out') else a for a in args]
    proc = run_main([tool, *args], check=False)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    assert line in proc.stderr.splitlines()[0], proc.stderr


def test_a_save_best_metric_the_validation_does_not_report_is_named_before_training() -> None:
    """The demo's 4 classes have no top-5 (every run drops it: :func:`limit_topk`); mmengine would
    stop on a ``KeyError`` after the first validation, at the end of the demo's training."""
    cfg = _demo_cfg('default_hooks.checkpoint.save_best=acc/top5')
    limit_topk(cfg)
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'train')
    assert str(err.value) == (
        "default_hooks.checkpoint.save_best='acc/top5': the validation reports acc/top1, acc/mean1 "
        "(or 'auto': the first of them)"
    )
    for fine in ('acc/top1', 'acc/mean1', 'auto'):
        check_config(_demo_cfg(f'default_hooks.checkpoint.save_best={fine}'), 'train')


def test_a_save_best_metric_of_another_evaluator_is_named_at_the_first_validation() -> None:
    """An evaluator whose keys the config does not tell: the hook names the reported ones."""
    from dna_mm.engine.checkpoint_hook import AtomicCheckpointHook

    hook = AtomicCheckpointHook(interval=1, save_best='coco/bbox_mAP')
    with pytest.raises(ConfigError) as err:
        hook.after_val_epoch(None, {'coco/segm_mAP': 0.5, 'coco/bbox_map': 0.4})
    assert str(err.value).startswith(
        "default_hooks.checkpoint.save_best='coco/bbox_mAP': the validation reports coco/bbox_map, "
        "coco/segm_mAP (or 'auto'"
    )


def test_a_variable_the_config_file_uses_inside_another_key_is_not_a_misspelt_key(tmp_path) -> None:
    """MMAction2's omnisource config keeps ``image_dataloader`` at the top level (close to
    ``val_dataloader``) and uses it inside ``train_cfg``: a variable, not a typo. One that only
    repeats a key's value at the top level is still named."""
    child = tmp_path / 'child.py'
    child.write_text(
        f"_base_ = ['{DEMO_CONFIG}']\n"
        "image_dataloader = dict(batch_size=2, dataset=dict(type='RepeatDataset', times=1))\n"
        'my_loaders = [image_dataloader]\n'
    )
    cfg = Config.fromfile(str(child))
    cfg.label_map = None
    check_config(cfg, 'train')
    child.write_text(f"_base_ = ['{DEMO_CONFIG}']\nrandomnes = dict(seed=0)\n")  # the demo's randomness
    with pytest.raises(ConfigError, match="^randomnes is not a key that mmengine's runner or dna_mm reads"):
        check_config(Config.fromfile(str(child)), 'train')
