"""The arguments of the data's parts and of a dict a child config merges into its base's, checked
before anything is built (:func:`dna_mm.config.check_config`): a dataset's and a sampler's keys
against their classes (a typo was a ``TypeError`` naming no loader once the model was built), an
argument a dataset needs and is not given (a misspelt ``ann_file`` that a ``**kwargs`` took: "missing
1 required positional argument"), and, in a child config, how to replace a base's dict whole when
its keys do not fit the child's ``type``. A model part that misses an argument it needs is named
as it is built (:func:`dna_mm.utils.build_errors.config_mistake`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DEMO_CONFIG, REPO
from mmaction.registry import DATASETS
from mmengine.config import Config

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.errors import ConfigError
from dna_mm.utils.build_errors import config_mistake, required_arguments

COCO = str(REPO / 'configs' / 'vitdet_dna_coco.py')


def _refused(cfg: Config, mode: str = 'train') -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg, mode)
    return str(err.value)


def _child(tmp_path: Path, text: str) -> Config:
    """A child config of the demo's, ``text`` its own lines."""
    path = tmp_path / 'child.py'
    path.write_text(f'_base_ = {DEMO_CONFIG!r}\nlabel_map = None\n{text}\n')
    return Config.fromfile(str(path))


@pytest.mark.parametrize(
    'loader, part, key, message',
    [
        (
            'val_dataloader',
            'dataset',
            'start_indx',
            "val_dataloader.dataset.start_indx is not an argument of RobustVideoDataset (did you mean "
            "'start_index'? valid: ",
        ),
        (
            'train_dataloader',
            'sampler',
            'shufle',
            "train_dataloader.sampler.shufle is not an argument of DefaultSampler (did you mean 'shuffle'? "
            'valid: dataset, shuffle, seed, round_up)',
        ),
    ],
)
def test_a_misspelt_key_of_a_dataset_or_sampler_names_its_loader(loader, part, key, message) -> None:
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.label_map = None
    cfg[loader][part][key] = 1
    assert _refused(cfg).startswith(message)
    assert message.split(' is not')[0] in _refused(cfg, 'test') if loader == 'test_dataloader' else True


def test_a_wrapped_dataset_and_a_batch_sampler_are_checked_with_what_mmengine_gives_them() -> None:
    """The dataset a ``RepeatDataset`` wraps; a batch sampler, which mmengine gives its ``sampler``
    and ``batch_size`` (not the config's to give), as it gives a sampler its ``dataset`` and ``seed``."""
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.label_map = None
    inner = dict(cfg.train_dataloader.dataset, ann_fle='x.txt')
    cfg.train_dataloader.dataset = dict(type='RepeatDataset', times=2, dataset=inner)
    cfg.train_dataloader.batch_sampler = dict(
        type='mmengine.dataset.sampler.DefaultSampler'
    )  # no batch sampler
    message = _refused(cfg)
    assert (
        'train_dataloader.dataset.dataset.ann_fle is not an argument of RobustVideoDataset '
        "(did you mean 'ann_file'?" in message
    )
    assert "train_dataloader.batch_sampler (DefaultSampler) needs 'dataset'" in message
    assert 'batch_sampler.' not in message  # sampler / batch_size are mmengine's to give
    cfg.train_dataloader.pop('batch_sampler')
    cfg.train_dataloader.dataset.dataset.pop('ann_fle')
    check_config(cfg)


@pytest.mark.parametrize('dataset', ['VideoDataset', 'RobustVideoDataset'])
def test_a_misspelt_required_argument_of_a_dataset_is_named_with_what_it_needs(tmp_path, dataset) -> None:
    """``ann_fil`` for ``ann_file`` in a dataset that replaces the base's whole: MMAction2's
    ``VideoDataset`` takes it into its ``**kwargs`` and its parent stops on "missing 1 required
    positional argument: 'ann_file'" after the model was built. dna_mm's ``RobustVideoDataset``
    passes its ``*args`` on to ``VideoDataset``'s: what that needs, it needs. One mistake, one
    message: the suggestion names what it needs; a required argument left out is said alone."""
    cfg = _child(
        tmp_path,
        'train_dataloader = dict(dataset=dict(\n'
        f"    _delete_=True, type='{dataset}', ann_fil='t.txt', pipeline=[]))",
    )
    message = _refused(cfg)
    assert (
        f"train_dataloader.dataset.ann_fil is not an argument of {dataset} (did you mean 'ann_file'?"
        in message
    )
    assert 'needs' not in message, message
    assert required_arguments(DATASETS.get(dataset)) == ['ann_file', 'pipeline']
    cfg = _child(
        tmp_path, f"train_dataloader = dict(dataset=dict(_delete_=True, type='{dataset}', pipeline=[]))\n"
    )
    assert f"train_dataloader.dataset ({dataset}) needs 'ann_file'" in _refused(cfg)


class _Part:
    def __init__(self, x: int, y: int, z: int = 1) -> None:
        self.xyz = (x, y, z)


class _GivesX(_Part):
    def __init__(self, *args, **kwargs) -> None:
        _Part.__init__(self, 5, *args, **kwargs)


class _GivesY(_Part):
    def __init__(self, w: int, *args, **kwargs) -> None:
        super().__init__(*args, y=w, **kwargs)


class _Own(_Part):
    def __init__(self, w: int, **kwargs) -> None:
        super().__init__(1, 2, **kwargs)


def test_required_arguments_follow_args_passed_on_less_what_the_call_fills() -> None:
    """An ``__init__`` taking ``*args`` needs what the next one up needs, less the arguments its call
    gives (positionally before ``*args``: mmengine's ``LRSchedulerMixin`` gives ``param_name``; by
    keyword); one without ``*args`` needs only its own."""
    assert required_arguments(_Part) == ['x', 'y']
    assert required_arguments(_GivesX) == ['y']
    assert required_arguments(_GivesY) == ['w', 'x']
    assert required_arguments(_Own) == ['w']
    from mmengine.optim.scheduler import StepLR, StepParamScheduler

    assert required_arguments(StepLR) == ['optimizer', 'step_size']
    assert required_arguments(StepParamScheduler) == ['optimizer', 'param_name', 'step_size']


def test_a_child_configs_metric_that_keeps_the_bases_keys_is_told_how_to_replace_it(tmp_path) -> None:
    """A child's ``val_evaluator = dict(type='DumpResults', ...)`` merges into the base's
    ``AccMetric``: its ``metric_list`` is kept, which ``DumpResults`` does not take. The line says
    so, and how to replace the dict whole; a key with a close name gets that name instead."""
    cfg = _child(tmp_path, "val_evaluator = dict(type='DumpResults', out_file_path='x.pkl')")
    assert _refused(cfg) == (
        'val_evaluator.metric_list is not an argument of DumpResults (valid: out_file_path, collect_device, '
        "collect_dir; kept from the base config's? give val_evaluator _delete_=True to replace it whole)"
    )
    cfg = _child(tmp_path, "val_evaluator = dict(_delete_=True, type='DumpResults', out_file_path='x.pkl')")
    check_config(cfg)
    metric = dict(type='DumpResults', out_file_path='x', metric_list=1)
    flat = Config(cfg.to_dict() | {'val_evaluator': metric})
    assert 'kept from the base' not in _refused(flat)  # no base config: no such hint


def test_a_default_hook_is_merged_and_a_custom_hook_list_is_not(tmp_path) -> None:
    """``default_hooks`` entries merge into the base's (the hint), ``custom_hooks`` replaces the
    base's list (no hint)."""
    hooks = _refused(_child(tmp_path, 'default_hooks = dict(logger=dict(flush_every=1))'))
    assert 'default_hooks.logger(LoggerHook).flush_every is not an argument of LoggerHook' in hooks
    assert "kept from the base config's? give default_hooks.logger _delete_=True" in hooks
    listed = _refused(_child(tmp_path, "custom_hooks = [dict(type='EMAHook', flush_every=1)]"))
    assert 'custom_hooks[0](EMAHook).flush_every is not an argument' in listed
    assert 'kept from the base' not in listed


def test_a_model_part_missing_an_argument_it_needs_is_one_line_naming_the_misspelt_key() -> None:
    """A model part's own ``__init__`` ``missing 1 required positional argument`` as mmengine
    builds it: the key, the argument and the given key close to it; an argument that was given
    (its own code called something wrongly) keeps its traceback."""
    from mmaction.registry import MODELS

    with pytest.raises(TypeError) as err:
        MODELS.build(dict(type='TimeSformerHead', num_classe=4, in_channels=8))
    assert config_mistake(err.value) == (
        "model: the model part TimeSformerHead needs 'num_classes' (written 'num_classe'?)"
    )
    with pytest.raises(TypeError) as err:
        MODELS.build(dict(type='TimeSformerHead', in_channels=8))
    assert config_mistake(err.value) == "model: the model part TimeSformerHead needs 'num_classes'"
    bug = TypeError("TimeSformerHead.__init__() missing 1 required positional argument: 'in_channels'")
    try:
        MODELS.build(dict(type='TimeSformerHead', num_classes=4, in_channels=8, init_std='x'))
    except TypeError as raised:  # a wrong value inside: not the config's missing key
        assert config_mistake(raised) is None
    assert config_mistake(bug) is None  # raised outside a build


@pytest.mark.parametrize(
    'name, own', [('MyLinearAttention', True), ('mylab.attention.Linear', True), ('sofmax', False)]
)
def test_an_unknown_attention_class_is_told_how_a_member_of_your_own_is_found(name, own) -> None:
    """A class's name or a dotted path that no member holds (defined, but not registered): the
    line says how a member of your own is found, as ``tools/demo.py`` does; a misspelt short
    name gets the closest name alone."""
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.label_map = None
    cfg.model.backbone.attn_cfg = dict(type=name)
    message = _refused(cfg)
    assert message.startswith(f'model.backbone.attn_cfg.type: unknown attention {name!r}; ')
    hint = '(your own member: subclass AttentionBase and register it in MODELS, docs/attention.md)'
    assert message.endswith(hint) is own


def test_a_filter_cfg_is_held_to_what_its_datasets_filter_data_reads() -> None:
    """MMDetection reads ``filter_cfg`` with ``.get``: ``filter_empty`` would keep the images
    without boxes it should drop. dna_mm's ``CheckedCocoDataset`` is held to MMDetection's keys."""
    cfg = Config.fromfile(COCO)
    check_config(cfg)
    cfg.train_dataloader.dataset.filter_cfg = dict(filter_empty=True, min_size=32)
    assert _refused(cfg) == (
        'train_dataloader.dataset.filter_cfg.filter_empty is not a key CheckedCocoDataset filters by '
        "(did you mean 'filter_empty_gt'? valid: filter_empty_gt, min_size)"
    )
    video = Config.fromfile(DEMO_CONFIG)  # mmengine's filter_data reads none: left alone (test_zoo_shapes)
    video.label_map = None
    video.test_dataloader.dataset.filter_cfg = dict(filter_empty=True)
    check_config(video, 'test')


def test_a_video_readers_file_client_keys_are_its_backends() -> None:
    """``DecordInit`` keeps the keys it does not name for the ``FileClient`` of its ``io_backend``:
    ``io_backen`` (a typo) would make every video unreadable; a backend's own keys pass."""
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.label_map = None
    step = cfg.train_dataloader.dataset.pipeline[0]
    assert step.type == 'DecordInit'
    step['io_backen'] = 'disk'
    assert _refused(cfg) == (
        "train_dataloader.dataset.pipeline[0].io_backen is not an argument of DecordInit (did you mean "
        "'io_backend'? valid: io_backend, num_threads, prefix)"
    )
    step.pop('io_backen')
    step.update(io_backend='petrel', enable_mc=True, path_mapping=None)
    check_config(cfg)


def test_every_init_cfg_is_held_to_its_initialisers_arguments() -> None:
    """A typo in an ``init_cfg`` was a ``TypeError`` traceback at ``init_weights``, after the
    build; an ``override`` takes ``name`` and, with other keys, a ``type`` of its own (mmengine's
    ``ValueError`` there otherwise); one with only a name is the parent's initialiser."""
    cfg = Config.fromfile(COCO)
    check_config(cfg)
    cfg.model.backbone.init_cfg['prefx'] = 'backbone.'
    assert _refused(cfg) == (
        "model.backbone.init_cfg.prefx is not an argument of PretrainedInit (did you mean 'prefix'? "
        'valid: checkpoint, prefix, map_location)'
    )
    cfg.model.backbone.init_cfg = [
        dict(type='Constant', val=1, layer='Linear', override=dict(name='fc')),  # the parent's: fine
        dict(type='Normal', std=0.01, override=[dict(name='fc', val=0), dict(type='Constant', val=0)]),
    ]
    assert _refused(cfg).split('; ') == [
        'model.backbone.init_cfg[1].override[0] needs type (an override with keys beside name is an '
        'initialiser of its own)',
        'model.backbone.init_cfg[1].override[1] needs name (the attribute of the module it initialises)',
    ]
    from dna_mm.config.check import model_problems

    cfg.model.backbone.init_cfg = dict(type='TruncNormal', layer='Linear', sdt=0.02)
    assert model_problems(cfg) == [
        "model.backbone.init_cfg.sdt is not an argument of TruncNormalInit (did you mean 'std'? valid: mean, "
        'std, a, b, bias, bias_prob, layer)'
    ]


def test_a_child_that_names_another_optimizer_is_told_the_bases_arguments_stay(tmp_path) -> None:
    """A base's ``SGD(momentum=0.9)`` under a child's ``optimizer=dict(type='AdamW', ...)``:
    mmengine merges ``momentum`` into it, which ``AdamW`` does not take."""
    base = tmp_path / 'base.py'
    base.write_text(
        f'_base_ = {DEMO_CONFIG!r}\n'
        'optim_wrapper = dict(\n'
        "    optimizer=dict(_delete_=True, type='SGD', lr=0.1, momentum=0.9, weight_decay=0.0))\n"
    )
    child = tmp_path / 'child.py'
    child.write_text(
        "_base_ = './base.py'\nlabel_map = None\noptim_wrapper = dict(optimizer=dict(type='AdamW'))\n"
    )
    assert _refused(Config.fromfile(str(child))).startswith(
        'optim_wrapper.optimizer.momentum is not an argument of AdamW (valid: lr, betas, eps, weight_decay, '
    )
    assert _refused(Config.fromfile(str(child))).endswith(
        "kept from the base config's? give optim_wrapper.optimizer _delete_=True to replace it whole)"
    )


def test_a_frame_sampler_takes_only_its_own_arguments() -> None:
    """MMAction2's ``SampleAVAFrames`` subclasses ``SampleFrames`` but takes only ``clip_len``,
    ``frame_interval`` and ``test_mode`` (no ``**kwargs``): a ``num_clips`` was let through as a
    ``SampleFrames`` argument, then a ``TypeError`` naming no key as the dataset was built."""
    from mmaction.registry import TRANSFORMS

    with pytest.raises(TypeError, match='num_clips'):
        TRANSFORMS.build(dict(type='SampleAVAFrames', clip_len=8, num_clips=2))
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.label_map = None
    cfg.test_dataloader.dataset.pipeline[1] = dict(type='SampleAVAFrames', clip_len=8, num_clips=2)
    assert _refused(cfg, 'test').startswith(
        'test_dataloader.dataset.pipeline[1].num_clips is not an argument of SampleAVAFrames'
    )
