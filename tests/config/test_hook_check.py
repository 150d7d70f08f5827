"""The hooks' arguments, checked before anything is built (:func:`dna_mm.config.check_config`, both
modes: a test run builds the hooks too): mmengine builds a hook with its config's keys (a typo is a
``TypeError`` as the runner is made), and its ``EMAHook`` passes the keys it does not name on to
the averaged model it builds at the start of the run (``momentm``: a ``TypeError`` traceback once
the model is built, in any run). Each is one line naming the key and the closest valid one."""

from __future__ import annotations

import pytest
import torch
from conftest import DEMO_CONFIG, REPO
from mmengine.config import Config
from mmengine.model import ExponentialMovingAverage

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.errors import ConfigError

DET = str(REPO / 'configs' / 'vitdet_dna_coco.py')
EMA_VALID = 'ema_type, strict_load, begin_iter, begin_epoch, momentum, interval, device, update_buffers'


def _cfg(config: str = DEMO_CONFIG, **hook) -> Config:
    """``config`` with an ``EMAHook`` of ``hook``'s arguments after its own custom hooks."""
    cfg = Config.fromfile(config)
    cfg.label_map = None
    if hook:
        cfg.custom_hooks = [*cfg.custom_hooks, dict(type='EMAHook', **hook)]
    return cfg


@pytest.mark.parametrize('mode', ['train', 'test'])
def test_a_misspelt_argument_of_the_ema_hooks_model_is_named(mode: str) -> None:
    cfg = _cfg(momentm=0.001)
    with pytest.raises(ConfigError) as err:
        check_config(cfg, mode)
    assert str(err.value) == (
        'custom_hooks[3](EMAHook).momentm is not an argument of EMAHook or of its ExponentialMovingAverage '
        f"(did you mean 'momentum'? valid: {EMA_VALID})"
    )
    with pytest.raises(TypeError, match='momentm'):  # what the hook would do at the start of the run
        ExponentialMovingAverage(torch.nn.Linear(2, 2), momentm=0.001)


@pytest.mark.parametrize('config', [DEMO_CONFIG, DET], ids=['demo', 'vitdet'])
def test_a_misspelt_argument_of_a_default_hook_is_named(config: str) -> None:
    """In the recognizers' scope and in MMDetection's."""
    cfg = _cfg(config)
    cfg.default_hooks.logger['intervl'] = 5
    with pytest.raises(
        ConfigError,
        match=r"default_hooks\.logger\(LoggerHook\)\.intervl is not an argument of "
        r"LoggerHook \(did you mean 'interval'\?",
    ):
        check_config(cfg, 'test')


def test_the_hooks_as_mmengine_takes_them_pass() -> None:
    """The shipped hooks, an ``EMAHook`` with its model's arguments, one of another averaged model
    (``ema_type``) with that one's, and a hook turned off (``None``)."""
    passing = [
        _cfg(),
        _cfg(DET),
        _cfg(momentum=0.001, update_buffers=True, begin_iter=2),
        _cfg(ema_type='StochasticWeightAverage', interval=2),
    ]
    off = _cfg()
    off.default_hooks.timer = None
    for cfg in [*passing, off]:
        for mode in ('train', 'test'):
            check_config(cfg, mode)
    with pytest.raises(
        ConfigError, match=r"\.momentum is not an argument of EMAHook or of its StochasticWeightAverage"
    ):
        check_config(_cfg(ema_type='StochasticWeightAverage', momentum=0.1), 'test')
