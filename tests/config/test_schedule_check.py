"""The schedule's and the hooks' settings mmengine would take without a word, checked before anything
is built (:func:`dna_mm.config.check_config`): a ``param_scheduler`` entry by epoch under an
iteration-based train loop (mmengine's ``ParamSchedulerHook`` steps it only after the last
iteration: the lr never moves), ``auto_scale_lr``'s keys and values (``Runner.scale_lr`` drops a
misspelt key, divides by ``base_batch_size``), a ``_delete_`` in an item of a list (mmengine
passes it on to what the item builds: a ``TypeError`` traceback) and an ``EarlyStoppingHook``'s
``monitor`` (another key than the validation reports: a warning at each validation, no early
stop), and a ``param_scheduler`` entry's values: what mmengine refuses once the model is built
(``end`` <= ``begin``, ``LinearLR`` ``start_factor=-1``), what divides by zero mid-run
(``ConstantLR`` ``factor=0``, ``PolyLR`` ``power`` < 0) and what it takes without a word (a
negative ``gamma`` or ``eta_min``: a negative lr; a cosine with neither ``T_max`` nor ``end``: an
lr that never moves). Each is one line naming the key; every shipped config passes (configs/ and
configs/imagenet/ in both modes: tests/config/test_log_processor_check.py's
``test_every_shipped_config_passes``; their schedulers' values and configs/examples/' here)."""

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


#: the demo's warm-up, ``param_scheduler[0]`` (``LinearLR`` by epoch, converted to iterations)
DEMO_WARMUP = dict(
    type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=1, convert_to_iter_based=True
)
LATER = "otherwise mmengine's {} raises a ValueError once the model is built"
NEGATIVE_LR = 'a negative one makes the learning rate negative'
COSINE_LATER = LATER.format('CosineAnnealingLR')


def _second(**scheduler: Any) -> Config:
    """The demo with ``scheduler`` as its ``param_scheduler[1]`` (its cosine's place: epochs 1 to 20)."""
    return _cfg(param_scheduler=[DEMO_WARMUP, dict(dict(begin=1, end=20), **scheduler)])


#: ``(the config, made when the test runs; what the error says)``: a scheduler's value that mmengine
#: refuses once the model is built, that divides by zero mid-run, or that it takes without a word
#: (a negative lr, a schedule that never moves)
VALUES = [
    # the audit's: a negative lr, silently
    *[
        (
            lambda kind=kind, more=more: _second(type=kind, gamma=-1, **more),
            'param_scheduler[1].gamma must be a number >= 0 (a negative gamma makes the learning rate '
            'negative), got -1',
        )
        for kind, more in (
            ('StepLR', dict(step_size=5)),
            ('MultiStepLR', dict(milestones=[10])),
            ('ExponentialLR', {}),
        )
    ],
    (
        lambda: _second(type='CosineAnnealingMomentum', T_max=19, eta_min=-0.5),
        'param_scheduler[1].eta_min must be a number >= 0 (a negative one makes the momentum negative), '
        'got -0.5',
    ),
    (
        lambda: _cfg(options={'param_scheduler.1.eta_min': -1e-5}),
        f'param_scheduler[1].eta_min must be a number >= 0 ({NEGATIVE_LR}), got -1e-05',
    ),
    (
        lambda: _second(type='CosineAnnealingLR', eta_min_ratio=-0.1),
        f'param_scheduler[1].eta_min_ratio must be a number >= 0 ({NEGATIVE_LR}), got -0.1',
    ),
    (
        lambda: _second(type='PolyLR', eta_min=-1e-5),
        f'param_scheduler[1].eta_min must be a number >= 0 ({NEGATIVE_LR}), got -1e-05',
    ),
    # the audit's: T_max=-1 swings the lr between its start and 0
    (
        lambda: _cfg(options={'param_scheduler.1.T_max': -1}),
        'param_scheduler[1].T_max must be a number >= 0 (the steps of a half cosine; 0 or None: end - '
        'begin), got -1',
    ),
    # the audit's: a ValueError after the model is built, or a schedule that never runs
    (
        lambda: _cfg(options={'param_scheduler.1.end': -1}),
        f'param_scheduler[1].end must be a number > its begin, 1 ({COSINE_LATER}), got -1',
    ),
    (
        lambda: _cfg(options={'param_scheduler.1.end': 1}),
        f'param_scheduler[1].end must be a number > its begin, 1 ({COSINE_LATER}), got 1',
    ),
    (
        lambda: _cfg(options={'param_scheduler.0.begin': -1}),
        'param_scheduler[0].begin must be a number >= 0 (mmengine counts the steps from 0: a negative '
        'begin cuts short the schedule, whose length is end - begin), got -1',
    ),
    # the audit's: mmengine's ValueError once the model is built; 0 divides by zero
    *[
        (
            lambda value=value: _cfg(options={'param_scheduler.0.start_factor': value}),
            "param_scheduler[0].start_factor must be a number in (0, 1] (outside [0, 1], mmengine's "
            f'LinearLR raises a ValueError once the model is built; 0 divides by zero at the first step), '
            f'got {value}',
        )
        for value in (-1, 0, 2)
    ],
    (
        lambda: _cfg(options={'param_scheduler.0.end_factor': 1.5}),
        f'param_scheduler[0].end_factor must be a number in [0, 1] ({LATER.format("LinearLR")}), got 1.5',
    ),
    (
        lambda: _second(type='ConstantLR', factor=0),
        "param_scheduler[1].factor must be a number in (0, 1] (outside [0, 1], mmengine's ConstantLR "
        'raises a ValueError once the model is built; 0 divides by zero where the schedule ends), got 0',
    ),
    (
        lambda: _second(type='PolyLR', power=-1.0),
        'param_scheduler[1].power must be a number >= 0 (a negative power divides by zero at the last '
        'step), got -1.0',
    ),
    (
        lambda: _second(type='StepLR', step_size=0),
        'param_scheduler[1].step_size must be a number > 0 (the steps from one decay to the next: 0 '
        'divides by zero at the first step), got 0',
    ),
    (
        lambda: _second(type='CosineAnnealingLR', eta_min=0.0, eta_min_ratio=0.01),
        'param_scheduler[1] (CosineAnnealingLR) takes eta_min or eta_min_ratio, not both (mmengine '
        'asserts one)',
    ),
    (
        lambda: _second(type='OneCycleLR', eta_max=1e-3, total_steps=0),
        'param_scheduler[1].total_steps must be an int > 0 (None: end - begin; '
        f'{LATER.format("OneCycleLR")}), got 0',
    ),
    (
        lambda: _second(type='OneCycleLR', eta_max=1e-3, pct_start=1),
        "param_scheduler[1].pct_start must be a float in [0, 1] (mmengine's OneCycleLR raises a "
        'ValueError on an int once the model is built), got 1: write it as a float, '
        'param_scheduler[1].pct_start=1.0',
    ),
    (
        lambda: _second(type='OneCycleLR', eta_max=1e-3, pct_start=1.5),
        f'param_scheduler[1].pct_start must be a number in [0, 1] ({LATER.format("OneCycleLR")}), got 1.5',
    ),
    *[
        (
            lambda value=value: _second(type='OneCycleLR', eta_max=value),
            'param_scheduler[1].eta_max is the peak lr: it must be a number > 0, or one per parameter '
            'group (0 keeps the learning rate at 0 the whole run, a negative one makes it negative), '
            f'got {value!r}',
        )
        for value in (-1e-3, 0, [0.0])
    ],
    # the lr stayed 0 the whole run: mmengine's default eta_max, 0, is the peak itself
    (
        lambda: _second(type='OneCycleLR', total_steps=100),
        "param_scheduler[1].eta_max is the peak lr: OneCycleLR's default 0 keeps the learning rate at 0 "
        "the whole run (it rises from eta_max / div_factor to eta_max and falls; the optimizer's lr is "
        'not read); set it',
    ),
    (
        lambda: _second(type='OneCycleLR', eta_max=1e-3, div_factor=0),
        'param_scheduler[1].div_factor must be a number > 0 (it divides the learning rate: 0 divides by '
        'zero once the model is built, a negative one makes it negative), got 0',
    ),
    (
        lambda: _second(type='OneCycleLR', eta_max=1e-3, anneal_strategy='cosine'),
        "param_scheduler[1].anneal_strategy must be 'cos' or 'linear' "
        f"({LATER.format('OneCycleLR')}), got 'cosine'",
    ),
    (
        lambda: _second(type='ReduceOnPlateauLR', factor=2.0),
        f'param_scheduler[1].factor must be a number < 1 ({LATER.format("ReduceOnPlateauLR")}), got 2.0',
    ),
    (
        lambda: _second(type='OneCycleLR', eta_max=1e-3, final_div_factor=-1e4),
        'param_scheduler[1].final_div_factor must be a number > 0 (it divides the learning rate: 0 divides '
        'by zero once the model is built, a negative one makes it negative), got -10000.0',
    ),
    (
        lambda: _second(type='CosineRestartLR', periods=[19], restart_weights=[1]),
        'param_scheduler[1] (CosineRestartLR) needs eta_min or eta_min_ratio (mmengine asserts one)',
    ),
    # a 0 period was skipped with its restart weight, a negative one moved the restarts after it
    *[
        (
            lambda periods=periods: _second(
                type='CosineRestartLR', periods=periods, restart_weights=[1, 1, 0.5], eta_min=0.0
            ),
            'param_scheduler[1].periods must be a non-empty list of numbers > 0 (the steps of each cosine '
            "cycle: mmengine's CosineRestartLR skips a 0 one and its restart weight, and a negative one "
            f'moves or drops the restarts after it, without a word), got {periods!r}',
        )
        for periods in ([9, 0, 10], [9, -5, 15])
    ],
    # an AssertionError once the model is built: the default restart_weights, [1], fits one period
    (
        lambda: _second(type='CosineRestartLR', periods=[10, 9], eta_min=0.0),
        'param_scheduler[1].restart_weights must give one weight per period, 2 (its default, [1], fits one '
        "period: mmengine's CosineRestartLR asserts it once the model is built); set it, e.g. "
        'restart_weights=[1, 1]',
    ),
    (
        lambda: _second(type='CosineRestartLR', periods=[10, 9], restart_weights=[1, 0.5, 0.25], eta_min=0.0),
        "param_scheduler[1].restart_weights must give one weight per period, 2 (mmengine's CosineRestartLR "
        'asserts it once the model is built), got [1, 0.5, 0.25]',
    ),
    # a negative restart weight: the lr of that cycle negative, the loss climbed without a word
    (
        lambda: _second(type='CosineRestartLR', periods=[10, 9], restart_weights=[1, -0.5], eta_min=0.0),
        'param_scheduler[1].restart_weights must be numbers >= 0 (each cycle starts at its weight times '
        'the base value: a negative one makes the learning rate negative, which climbs the loss, without '
        'a word), got [1, -0.5]',
    ),
    (
        lambda: _second(type='ReduceOnPlateauLR', threshold=-1e-4),
        f'param_scheduler[1].threshold must be a number >= 0 ({LATER.format("ReduceOnPlateauLR")}), '
        'got -0.0001',
    ),
    (
        lambda: _second(type='ReduceOnPlateauLR', threshold_rule='relative'),
        f"param_scheduler[1].threshold_rule must be 'rel' or 'abs' ({LATER.format('ReduceOnPlateauLR')}), "
        "got 'relative'",
    ),
    (
        lambda: _second(type='ReduceOnPlateauLR', rule='les'),
        f"param_scheduler[1].rule must be 'less' or 'greater' ({LATER.format('ReduceOnPlateauLR')}), "
        "got 'les'",
    ),
    # what a scheduler needs, not given: a TypeError naming no key once the model is built
    *[
        (
            lambda kind=kind, more=more: _second(type=kind, **more),
            f'param_scheduler[1] ({kind}) needs {needs}',
        )
        for kind, more, needs in (
            ('StepLR', {}, "'step_size'"),
            ('MultiStepMomentum', {}, "'milestones'"),
            ('CosineRestartLR', dict(eta_min=0.0), "'periods'"),
            ('ExponentialLR', {}, "'gamma'"),
            ('StepParamScheduler', dict(step_size=5), "'param_name'"),  # no mixin gives it
        )
    ],
]


@pytest.mark.parametrize('make, message', VALUES)
def test_a_schedulers_value_is_named(make, message) -> None:
    """Each alone, the whole error (one line) naming the key, its value and what it must be; a
    test run builds no scheduler: passes."""
    cfg = make()
    assert _refused(cfg) == message
    check_config(cfg, 'test')


def _build(scheduler: dict, steps: int = 12) -> list[float]:
    """The lr of an SGD at 0.1 after each of ``steps`` steps of mmengine's ``scheduler``."""
    optimizer = OptimWrapper(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1))
    built = PARAM_SCHEDULERS.build(scheduler, default_args=dict(optimizer=optimizer))
    lrs = []
    for _ in range(steps):
        optimizer.step()
        built.step()
        lrs.append(optimizer.param_groups[0]['lr'])
    return lrs


@pytest.mark.filterwarnings('ignore:Detected call of `scheduler.step:UserWarning')
@pytest.mark.parametrize(
    'scheduler, error',
    [
        (dict(type='LinearLR', start_factor=-1, end=5), ValueError),
        (dict(type='LinearLR', start_factor=0.0, end=5), ZeroDivisionError),
        (dict(type='LinearLR', begin=0, end=-1), ValueError),
        (dict(type='ConstantLR', factor=0.0, end=5), ZeroDivisionError),
        (dict(type='PolyLR', power=-1.0, end=5), ZeroDivisionError),
        (dict(type='StepLR', step_size=0, end=5), ZeroDivisionError),
        (dict(type='OneCycleLR', eta_max=1e-3, total_steps=10, pct_start=1), ValueError),
        (dict(type='OneCycleLR', eta_max=1e-3, total_steps=10, div_factor=0.0), ZeroDivisionError),
        (dict(type='ReduceOnPlateauLR', factor=2.0), ValueError),
        (dict(type='CosineAnnealingLR', T_max=5, eta_min=0.0, eta_min_ratio=0.01), AssertionError),
        (dict(type='CosineRestartLR', periods=[5], restart_weights=[1]), AssertionError),
        (dict(type='CosineRestartLR', periods=[5, 5], eta_min=0.0), AssertionError),
        (
            dict(type='CosineRestartLR', periods=[5, 5], restart_weights=[1, 1, 1], eta_min=0.0),
            AssertionError,
        ),
        (dict(type='ReduceOnPlateauLR', threshold=-1e-4), ValueError),
        (dict(type='ReduceOnPlateauLR', threshold_rule='relative'), ValueError),
        (dict(type='ReduceOnPlateauLR', rule='les'), ValueError),
        (dict(type='OneCycleLR', eta_max=1e-3, total_steps=0), ValueError),
        (dict(type='OneCycleLR', eta_max=1e-3, total_steps=10, anneal_strategy='cosine'), ValueError),
        (dict(type='StepLR', end=5), TypeError),
        (dict(type='MultiStepMomentum'), TypeError),
        (dict(type='CosineRestartLR', eta_min=0.0), TypeError),
        (dict(type='ExponentialLR'), TypeError),
        (dict(type='StepParamScheduler', step_size=5), TypeError),
    ],
)
def test_mmengine_fails_on_what_the_value_checks_refuse(scheduler, error) -> None:
    """The premises, on this mmengine: what the checks call an error is one, once the scheduler is
    built or at a step."""
    with pytest.raises(error):
        _build(scheduler)


@pytest.mark.filterwarnings('ignore:Detected call of `scheduler.step:UserWarning')
def test_mmengine_takes_a_negative_or_still_lr_without_a_word() -> None:
    """The premises of the silent ones: a negative ``gamma`` or ``eta_min`` makes the lr negative;
    ``T_max=0`` is mmengine's ``end - begin`` (the same schedule as ``T_max=end - begin``), which
    passes."""
    assert min(_build(dict(type='ExponentialLR', gamma=-1))) < 0
    assert min(_build(dict(type='CosineAnnealingLR', T_max=5, end=10, eta_min=-0.01))) < 0
    assert min(_build(dict(type='PolyLR', eta_min=-0.1, end=5))) < 0
    assert _build(dict(type='CosineAnnealingLR', T_max=0, end=10)) == _build(
        dict(type='CosineAnnealingLR', T_max=10, end=10)
    )


@pytest.mark.filterwarnings('ignore:Detected call of `scheduler.step:UserWarning')
def test_mmengine_skips_a_restart_or_keeps_the_lr_at_0_without_a_word() -> None:
    """The premises of the silent ones: ``OneCycleLR``'s ``eta_max`` is the peak itself (its default
    0 keeps the lr at 0, the optimizer's 0.1 not read); ``CosineRestartLR`` skips a 0 period with its
    restart weight (the schedule of the periods without it), and after a negative one it does not
    restart (the restart at step 4 of ``[4, 4]``, to 0.1 * 0.5, is missing)."""
    assert set(_build(dict(type='OneCycleLR', total_steps=20))) == {0.0}
    assert max(_build(dict(type='OneCycleLR', eta_max=1e-3, total_steps=20))) == pytest.approx(1e-3)
    restart = dict(type='CosineRestartLR', eta_min=0.0)
    skipped = _build(dict(restart, periods=[4, 0, 4], restart_weights=[1, 1, 0.5]))
    assert skipped == _build(dict(restart, periods=[4, 4], restart_weights=[1, 0.5]))
    assert _build(dict(restart, periods=[4, 4], restart_weights=[1, 0.5]))[3] == pytest.approx(0.05)
    moved = _build(dict(restart, periods=[4, -2, 4], restart_weights=[1, 1, 0.5]))
    assert moved[3] < 0.01  # still falling from the first period's end
    assert _build(dict(restart, periods=[4, 4], restart_weights=[1, -0.5]))[3] == pytest.approx(-0.05)


def test_a_schedulers_value_mmengine_takes_passes() -> None:
    """A ``gamma`` > 1 (a warm-up by growth) or 0, ``T_max=0`` with an ``end``, a cosine with neither
    (the runner ends it at the train loop's end, as MMPretrain's configs have it), the factors at the
    ends of their ranges mmengine runs, a float ``pct_start``, ``eta_min`` 0, a ``power`` of 0, and
    every shipped config's schedulers (configs/, configs/imagenet/, configs/examples/: their
    values, in whatever else a config made for testing lacks)."""
    from dna_mm.config.check.schedule import scheduler_problems

    passing = [
        _second(type='ExponentialLR', gamma=1.5),
        _second(type='MultiStepLR', milestones=[10], gamma=0.0),
        _cfg(options={'param_scheduler.1.T_max': 0}),
        _cfg(options={'param_scheduler.0.start_factor': 1.0, 'param_scheduler.0.end_factor': 0.0}),
        _second(type='ConstantLR', factor=1.0),
        _second(type='PolyLR', eta_min=0.0, power=0.0),
        _second(type='CosineAnnealingLR', eta_min_ratio=0.01),
        # no end: mmengine's runner sets its train loop's max_epochs (Runner._build_param_scheduler)
        _cfg(param_scheduler=[DEMO_WARMUP, dict(type='CosineAnnealingLR', begin=1)]),
        _second(type='OneCycleLR', eta_max=[1e-3], total_steps=100, pct_start=0.0, anneal_strategy='linear'),
        _second(type='CosineRestartLR', periods=[10, 9], restart_weights=[1, 0.5], eta_min_ratio=0.01),
        _second(type='CosineRestartLR', periods=[19], eta_min=0.0),  # one period: the default weight, [1]
        _second(type='ReduceOnPlateauLR', factor=0.5, threshold=0.0, rule='greater', threshold_rule='abs'),
    ]
    for cfg in passing:
        check_config(cfg, 'train')
    configs = sorted(
        [
            *(REPO / 'configs').glob('*.py'),
            *(REPO / 'configs' / 'imagenet').glob('*.py'),
            *(REPO / 'configs' / 'examples').glob('*.py'),
        ]
    )
    assert len(configs) > 40
    for path in configs:
        assert scheduler_problems(Config.fromfile(str(path))) == [], path


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
        'optim_wrapper = dict(\n'
        "    optimizer=dict(_delete_=True, type='SGD', lr=0.01, momentum=0.9, weight_decay=1e-4))",
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
