"""``optim_wrapper.loss_scale`` is checked before anything is built, on any machine, as ``dtype``
is (:func:`dna_mm.config.check_config`): ``AutoAmpOptimWrapper`` drops it without a GPU, so a
value mmengine's ``AmpOptimWrapper`` refuses (an int, as ``--cfg-options
optim_wrapper.loss_scale=512`` gives it, or a typo) would pass a CPU run and stop the GPU one
with a ``TypeError``. What the check accepts, mmengine builds; what it refuses, mmengine
refuses (its constructor run here with the GPU assertion patched)."""

from __future__ import annotations

import argparse
import warnings
from unittest import mock

import pytest
import torch
from conftest import DEMO_CONFIG
from mmengine.config import Config, DictAction
from mmengine.optim.optimizer import amp_optimizer_wrapper

from dna_mm.config import check_config
from dna_mm.errors import ConfigError

KEY = 'optim_wrapper.loss_scale'
#: what the check says of each refused value (the end of its line)
REFUSED = {
    (f'{KEY}=512',): f"got 512: write it as a float, {KEY}=512.0",
    (f'{KEY}=abc',): "got 'abc'",
    (f'{KEY}=dynamik',): "got 'dynamik' (did you mean 'dynamic'?)",
    (f'{KEY}=0.0',): f'{KEY} must be > 0 (a static loss scale), got 0.0',
    (f'{KEY}=-8.0',): f'{KEY} must be > 0 (a static loss scale), got -8.0',
    (
        f'{KEY}.init_scael=1024.0',
    ): f"{KEY}.init_scael is not an argument of GradScaler (did you mean 'init_scale'?",
}
ACCEPTED = [
    (f'{KEY}=dynamic',),
    (f'{KEY}=512.0',),
    (f'{KEY}.init_scale=1024.0', f'{KEY}.growth_interval=100'),
    (f'{KEY}.enabled=False',),
]


def _cfg(*opts: str) -> Config:
    """The demo config with ``opts`` merged as ``--cfg-options`` merges them (``512``: an int)."""
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *opts]).o)
    return cfg


def _mmengine_builds(loss_scale) -> bool:
    """Whether mmengine's ``AmpOptimWrapper`` takes ``loss_scale`` (its ``TypeError`` otherwise)."""
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    with (
        mock.patch.object(amp_optimizer_wrapper, 'is_cuda_available', lambda: True),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter('ignore')  # torch's GradScaler without CUDA: disabled, with a warning
        try:
            amp_optimizer_wrapper.AmpOptimWrapper(optimizer=optimizer, loss_scale=loss_scale)
        except TypeError:
            return False
    return True


@pytest.mark.parametrize('opts', list(REFUSED), ids=[o[-1] for o in REFUSED])
def test_a_loss_scale_mmengine_refuses_is_one_line_before_the_build(opts: tuple[str, ...]) -> None:
    cfg = _cfg(*opts)
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'train')
    message = str(err.value)
    assert '\n' not in message and REFUSED[opts] in message, message
    if opts[0].startswith(f'{KEY}='):  # the whole value: the message names the key and what it takes
        assert message.startswith(f"{KEY} must be"), message
    if 'must be >' not in REFUSED[opts]:  # mmengine builds a scaler of any float (no check of its own)
        assert not _mmengine_builds(cfg.optim_wrapper.loss_scale)


@pytest.mark.parametrize('opts', ACCEPTED, ids=[o[0] for o in ACCEPTED])
def test_a_loss_scale_mmengine_takes_passes(opts: tuple[str, ...]) -> None:
    cfg = _cfg(*opts)
    check_config(cfg, 'train')
    assert _mmengine_builds(cfg.optim_wrapper.loss_scale)


def test_the_int_is_refused_with_its_float_which_mmengine_takes() -> None:
    """The fix the line names works: ``512.0`` passes the check and builds."""
    with pytest.raises(ConfigError, match=rf'write it as a float, {KEY}=512\.0'):
        check_config(_cfg(f'{KEY}=512'), 'train')
    check_config(_cfg(f'{KEY}=512.0'), 'train')
    assert not _mmengine_builds(512) and _mmengine_builds(512.0)
