"""The schedule's and the hooks' settings mmengine would take without a word, checked before anything
is built (:func:`dna_mm.config.check_config`): a ``param_scheduler`` entry by epoch under an
iteration-based train loop (mmengine's ``ParamSchedulerHook`` steps it only after the last
iteration: the lr never moves), ``auto_scale_lr``'s keys and values (``Runner.scale_lr`` drops a
misspelt key, divides by ``base_batch_size``), a ``_delete_`` in an item of a list (mmengine
passes it on to what the item builds: a ``TypeError`` traceback) and an ``EarlyStoppingHook``'s
``monitor`` (another key than the validation reports: a warning at each validation, no early
stop). Each is one line naming the key; every shipped config passes (configs/ and
configs/imagenet/ in both modes: tests/config/test_log_processor_check.py's
``test_every_shipped_config_passes``)."""

from __future__ import annotations

import inspect
import re
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from conftest import DEMO_CONFIG, REPO
from mmengine.config import Config
from mmengine.hooks import EarlyStoppingHook, ParamSchedulerHook
from mmengine.optim import OptimWrapper
from mmengine.registry import PARAM_SCHEDULERS
from mmengine.runner import Runner

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.config.check.schedule import AUTO_SCALE_LR_KEYS
from dna_mm.config.prepare import limit_topk
from dna_mm.engine.runner import DnARunner
from dna_mm.errors import ConfigError

DET = str(REPO / 'configs' / 'vitdet_dna_coco.py')  # ResumableIterBasedTrainLoop, by_epoch=False schedulers
#: the demo's validation keys once the tools limit its top-k to its 4 classes
DEMO_KEYS = 'acc/top1, acc/mean1'
#: the demo's own custom hooks: an appended one is custom_hooks[3]
HOOK = 'custom_hooks[3](EarlyStoppingHook)'
LIST_DELETE = "a list in a child config replaces the base's list whole: its items take no _delete_ (drop it)"


def _refused(cfg: Config, mode: str = 'train') -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg, mode)
    return str(err.value)


def _cfg(config: str = DEMO_CONFIG, options: dict | None = None, **top: Any) -> Config:
    """``config`` as the tools prepare it (top-k limited to its classes; the demo's label map,
    made by ``make demo``, left out), ``options`` merged as ``--cfg-options`` merges them and the
    top-level keys ``top`` set."""
    cfg = Config.fromfile(config)
    if str(cfg.get('label_map')).startswith(str(REPO / 'data')):
        cfg.label_map = None  # made by `make demo`: in a checkout that ran it, not in a clean one
    limit_topk(cfg)
    if options:
        cfg.merge_from_dict(options)
    for key, value in top.items():
        cfg[key] = value
    return cfg


def _hook(**hook: Any) -> Config:
    """The demo with an ``EarlyStoppingHook`` of ``hook``'s arguments after its own hooks."""
    cfg = _cfg()
    cfg.custom_hooks = [*cfg.custom_hooks, dict(type='EarlyStoppingHook', **hook)]
    return cfg


def _child(tmp_path: Path, text: str, base: str = DEMO_CONFIG) -> Config:
    """A child config of ``base`` (its text ``text``), read by mmengine's ``Config.fromfile``."""
    path = tmp_path / 'child.py'
    path.write_text(f'_base_ = [{base!r}]\n{text}\n')
    return _cfg(str(path))


COSINE = dict(type='CosineAnnealingLR', T_max=184375, begin=0, end=184375)
WARMUP = dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=250)


def _by_epoch(key: str, kind: str, loop: str) -> str:
    return (
        f"{key}({kind}) steps by epoch (by_epoch=True, mmengine's default) but the train loop is "
        f'iteration-based ({loop}): mmengine steps it only after the last iteration, so it would never '
        'change during the run; set by_epoch=False with its begin / end (and T_max, milestones, ...) in '
        'iterations, or convert_to_iter_based=True'
    )


RESUMABLE = "train_cfg.type='ResumableIterBasedTrainLoop'"
ASL = "is not a key mmengine's Runner.scale_lr reads"
#: ``(the config, made when the test runs; what the error says)``: each in ``mode='train'``
REFUSED = [
    # the audit's: a cosine by epoch (mmengine's default) in the COCO schedule stayed at its start lr
    (
        lambda: _cfg(DET, param_scheduler=[WARMUP, COSINE]),
        _by_epoch('param_scheduler[1]', 'CosineAnnealingLR', RESUMABLE),
    ),
    (
        lambda: _cfg(DET, {'param_scheduler.1.by_epoch': True}),
        _by_epoch('param_scheduler[1]', 'MultiStepLR', RESUMABLE),
    ),
    (  # mmengine's own loop; the demo's warmup converts, its cosine does not
        lambda: _cfg(train_cfg=dict(type='IterBasedTrainLoop', max_iters=1000, val_interval=500)),
        _by_epoch('param_scheduler[1]', 'CosineAnnealingLR', "train_cfg.type='IterBasedTrainLoop'"),
    ),
    (  # mmengine's loop without a type: by_epoch=False and max_iters
        lambda: _cfg(train_cfg=dict(by_epoch=False, max_iters=1000, val_interval=500)),
        _by_epoch('param_scheduler[1]', 'CosineAnnealingLR', 'train_cfg.max_iters without max_epochs'),
    ),
    (  # one scheduler, not in a list
        lambda: _cfg(DET, param_scheduler=COSINE),
        _by_epoch('param_scheduler', 'CosineAnnealingLR', RESUMABLE),
    ),
    # the audit's: base_batch=16 was ignored (the base's 64 scaled), enabled=True turned nothing on
    (
        lambda: _cfg(options={'auto_scale_lr.enable': True, 'auto_scale_lr.base_batch': 16}),
        f"auto_scale_lr.base_batch {ASL} (did you mean 'base_batch_size'? valid: enable, base_batch_size)",
    ),
    (
        lambda: _cfg(options={'auto_scale_lr.enabled': True}),
        f"auto_scale_lr.enabled {ASL} (did you mean 'enable'? valid: enable, base_batch_size)",
    ),
    (  # a ZeroDivisionError traceback after the model is built
        lambda: _cfg(options={'auto_scale_lr.enable': True, 'auto_scale_lr.base_batch_size': 0}),
        'auto_scale_lr.base_batch_size must be > 0, got 0',
    ),
    (  # trained with a negative lr
        lambda: _cfg(options={'auto_scale_lr.enable': True, 'auto_scale_lr.base_batch_size': -8}),
        'auto_scale_lr.base_batch_size must be > 0, got -8',
    ),
    (
        lambda: _cfg(options={'auto_scale_lr.enable': True, 'auto_scale_lr.base_batch_size': 'abc'}),
        "auto_scale_lr.base_batch_size must be an int > 0, got 'abc'",
    ),
    (
        lambda: _cfg(auto_scale_lr=dict(enable=True)),  # mmengine's assertion
        'auto_scale_lr needs base_batch_size with enable=True (the total batch size the lr is set for; '
        'mmengine asserts it)',
    ),
    (  # mmengine takes its truth: 'False' would scale
        lambda: _cfg(options={'auto_scale_lr.enable': 'False'}),
        "auto_scale_lr.enable must be True or False, got 'False'",
    ),
    (
        lambda: _cfg(auto_scale_lr=True),
        'auto_scale_lr must be a dict (enable=True / False, base_batch_size=...), got True',
    ),
    # the audit's: the hook warned at each validation and the run never stopped early
    (
        lambda: _hook(monitor='acc/top_1'),
        f"{HOOK}.monitor='acc/top_1': the validation reports {DEMO_KEYS} (mmengine would only warn at "
        'each validation and never stop early)',
    ),
    (
        lambda: _hook(patience=3),  # a TypeError as the runner is made
        f'{HOOK} needs monitor (the metric it watches, one the validation reports: {DEMO_KEYS})',
    ),
]


@pytest.mark.parametrize('make, message', REFUSED)
def test_a_schedule_or_hook_mistake_is_named(make, message) -> None:
    """Each alone, the whole error (one line) naming the key; a test run does not train: passes."""
    cfg = make()
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config(cfg, 'train')
    assert _refused(cfg) == message
    check_config(cfg, 'test')


def test_a_delete_in_an_item_of_a_list_is_named(tmp_path) -> None:
    """The audit's child config (``param_scheduler = [dict(_delete_=True, ...)]``), read by
    mmengine's ``Config.fromfile``: the item keeps ``_delete_`` and mmengine passes it on to the
    scheduler (a ``TypeError``); named in training, and in a test run only where the test reads it
    (its pipeline, the hooks), not in the training-only keys."""
    cfg = _child(
        tmp_path,
        "param_scheduler = [dict(_delete_=True, type='CosineAnnealingLR', T_max=20, by_epoch=True, "
        'begin=0, end=20)]',
    )
    assert cfg.param_scheduler == [
        dict(_delete_=True, type='CosineAnnealingLR', T_max=20, by_epoch=True, begin=0, end=20)
    ]
    message = f'param_scheduler[0]._delete_: {LIST_DELETE}'
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config(cfg, 'train')
    assert _refused(cfg) == message
    check_config(cfg, 'test')  # a test run builds no scheduler
    optimizer = OptimWrapper(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1))
    with pytest.raises(TypeError, match='_delete_'):  # what mmengine would do with it
        PARAM_SCHEDULERS.build(dict(cfg.param_scheduler[0]), default_args=dict(optimizer=optimizer))

    cfg = _cfg()
    cfg.test_dataloader.dataset.pipeline[1]['_delete_'] = True
    cfg.custom_hooks[0]['_delete_'] = True
    for mode in ('train', 'test'):
        assert _refused(cfg, mode) == (
            f'test_dataloader.dataset.pipeline[1]._delete_: {LIST_DELETE}; '
            f'custom_hooks[0]._delete_: {LIST_DELETE}'
        )
    cfg = _cfg()
    cfg.log_processor.custom_cfg = [dict(_delete_=True, data_src='loss', method_name='mean', window_size=5)]
    assert _refused(cfg, 'test') == f'log_processor.custom_cfg[0]._delete_: {LIST_DELETE}'  # named once


def test_a_child_that_names_another_loop_than_its_base_is_told_to_replace_it(tmp_path) -> None:
    """A child of the demo (an epoch loop) that names an iteration loop keeps the base's
    ``max_epochs`` (mmengine merges the child's ``train_cfg`` into the base's), which the loop
    takes as a ``TypeError`` once the model is built: named, with ``_delete_=True``, which passes.
    A misspelt argument of a loop gets the closest name; ``by_epoch`` beside the base's ``type``
    is named too (mmengine's runner takes one of them)."""
    from mmengine.runner import IterBasedTrainLoop

    text = (
        "train_cfg = dict(type='IterBasedTrainLoop', max_iters=40, val_interval=20)\n"
        "param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False, begin=0, end=40)]"
    )
    cfg = _child(tmp_path, text)
    assert 'max_epochs' in cfg.train_cfg  # the base's, merged in
    assert _refused(cfg) == (
        'train_cfg.max_epochs: the loop IterBasedTrainLoop counts its length in max_iters; a train_cfg '
        "that names another loop than its base config's keeps the base's keys: write train_cfg = "
        "dict(_delete_=True, type='IterBasedTrainLoop', ...) to replace it whole"
    )
    check_config(cfg, 'test')  # a test run builds no train loop
    arguments = {k: v for k, v in cfg.train_cfg.items() if k != 'type'}
    with pytest.raises(TypeError, match='max_epochs'):  # what mmengine would do with it
        IterBasedTrainLoop(runner=None, dataloader=None, **arguments)
    check_config(_child(tmp_path, text.replace('dict(type=', 'dict(_delete_=True, type=', 1)), 'train')

    typo = _refused(_child(tmp_path, 'train_cfg = dict(val_intervl=2)'))
    assert typo == (
        'train_cfg.val_intervl is not an argument of the loop ResumableEpochBasedTrainLoop (did you mean '
        "'val_interval'? valid: skip_log_interval, max_epochs, val_begin, val_interval, dynamic_intervals)"
    )
    assert _refused(_child(tmp_path, 'train_cfg = dict(by_epoch=True)')).startswith(
        "train_cfg has both type and by_epoch (mmengine's runner takes one of them); a train_cfg that "
        "names another loop than its base config's keeps the base's keys"
    )


def test_what_mmengine_takes_passes(tmp_path) -> None:
    """An iteration loop with ``by_epoch=False`` schedulers (the COCO configs as they ship) or
    with ``convert_to_iter_based=True``; schedulers by epoch in an epoch loop (the demo as it
    ships); ``auto_scale_lr`` off (its ``base_batch_size`` unread then) or on with a size; a list
    item without ``_delete_`` and a ``_delete_`` in a dict value (mmengine's, merged away); an
    ``EarlyStoppingHook`` watching a reported key, or any key where the keys are not known (the
    COCO metric's)."""
    converted = [dict(s, convert_to_iter_based=True) for s in _cfg().param_scheduler]
    iteration_loop = dict(type='IterBasedTrainLoop', max_iters=1000, val_interval=500)
    child = _child(
        tmp_path,
        "param_scheduler = [dict(type='CosineAnnealingLR', T_max=20, by_epoch=True, begin=0, end=20)]\n"
        "optim_wrapper = dict(optimizer=dict(_delete_=True, type='SGD', lr=0.01, momentum=0.9))",
    )
    assert '_delete_' not in child.optim_wrapper.optimizer  # mmengine merged it away
    passing = [
        _cfg(DET),
        _cfg(DET, param_scheduler=[WARMUP, dict(COSINE, by_epoch=False)]),
        _cfg(train_cfg=iteration_loop, param_scheduler=converted),
        _cfg(),
        _cfg(auto_scale_lr=dict(enable=False, base_batch_size=64)),
        _cfg(auto_scale_lr=dict(enable=True, base_batch_size=64)),
        _cfg(auto_scale_lr=dict(enable=False, base_batch_size=0)),
        _cfg(auto_scale_lr=None),
        child,
        _hook(monitor='acc/top1'),
        _hook(monitor='acc/mean1', patience=3, rule='greater'),
        _cfg(DET, custom_hooks=[dict(type='EarlyStoppingHook', monitor='coco/bbox_mAP')]),
    ]
    assert len(_cfg().custom_hooks) == 3  # HOOK's index
    for cfg in passing:
        for mode in ('train', 'test'):
            check_config(cfg, mode)


def test_the_iteration_configs_as_they_ship_pass() -> None:
    """The shipped configs that train by iterations (the COCO ones: their loop is recognised, and
    their schedulers are by iteration) pass; the whole of configs/ and configs/imagenet/ passes in
    tests/config/test_log_processor_check.py (both modes) and test_config_values.py."""
    from dna_mm.config.check.schedule import epoch_scheduler_problems, iteration_loop

    configs = sorted((REPO / 'configs').glob('vitdet_*.py'))
    assert len(configs) >= 6
    for path in configs:
        cfg = _cfg(str(path))
        assert iteration_loop(cfg) == RESUMABLE, path
        assert epoch_scheduler_problems(cfg) == [], path
        for mode in ('train', 'test'):
            check_config(cfg, mode)


@pytest.mark.filterwarnings('ignore:Detected call of `scheduler.step:UserWarning')
def test_mmengine_reads_what_the_checks_say() -> None:
    """The premises, on this mmengine: ``Runner.scale_lr`` reads :data:`AUTO_SCALE_LR_KEYS` and
    no other (dna_mm's runner none other either); ``ParamSchedulerHook`` steps a by-epoch
    scheduler after an epoch only, not after an iteration; ``EarlyStoppingHook`` only warns of a
    ``monitor`` the metrics lack and does not stop."""
    read = lambda fn: set(re.findall(r"auto_scale_lr(?:\.get\(|\[)'(\w+)'", inspect.getsource(fn)))  # noqa: E731
    assert read(Runner.scale_lr) == set(AUTO_SCALE_LR_KEYS)
    assert read(DnARunner.scale_lr) <= set(AUTO_SCALE_LR_KEYS)

    optimizer = OptimWrapper(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1))
    scheduler = PARAM_SCHEDULERS.build(
        dict(type='CosineAnnealingLR', T_max=10, begin=0, end=10), default_args=dict(optimizer=optimizer)
    )
    runner = SimpleNamespace(param_schedulers=[scheduler], train_loop=SimpleNamespace(stop_training=False))
    for _ in range(5):
        ParamSchedulerHook().after_train_iter(runner, 0)
    assert optimizer.param_groups[0]['lr'] == 0.1  # five iterations: the schedule has not moved
    ParamSchedulerHook().after_train_epoch(runner)
    assert optimizer.param_groups[0]['lr'] < 0.1

    hook = EarlyStoppingHook(monitor='acc/top_1', patience=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for _ in range(3):
            hook.after_val_epoch(runner, {'acc/top1': 0.5})
    assert [w for w in caught if 'do not include `monitor` (acc/top_1)' in str(w.message)]
    assert not runner.train_loop.stop_training
