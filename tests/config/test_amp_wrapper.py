"""mmengine's ``AmpOptimWrapper``, as MMAction2's ``-amp-`` zoo configs (the Swin example's base)
name it, asserts a GPU after the model is built: the config check names it in one line on a
machine without one, and accepts it on a GPU."""

from __future__ import annotations

import pytest
import torch
from conftest import REPO
from mmengine.config import Config

from dna_mm.config import check_config
from dna_mm.errors import ConfigError

SWIN_EXAMPLE = REPO / 'configs' / 'examples' / 'swin-t_dna_k400.py'


def _swin_example() -> Config:
    cfg = Config.fromfile(str(SWIN_EXAMPLE))
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    return cfg


@pytest.mark.skipif(torch.cuda.is_available(), reason='the machine has a GPU')
def test_without_a_gpu_the_amp_wrapper_is_one_line_naming_what_to_set() -> None:
    cfg = _swin_example()
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'train')
    assert str(err.value) == (
        "optim_wrapper.type='AmpOptimWrapper' needs a GPU, and there is none here: set "
        'optim_wrapper.type=AutoAmpOptimWrapper (mixed precision on a GPU, full precision without one) '
        'or OptimWrapper (full precision)'
    )
    cfg.optim_wrapper.type = 'AutoAmpOptimWrapper'
    check_config(cfg, 'train')


@pytest.mark.skipif(torch.cuda.is_available(), reason='the machine has a GPU')
def test_the_wrapper_given_as_its_class_is_checked_too() -> None:
    """A new-style config's ``type=AmpOptimWrapper`` (the class, not its name)."""
    from mmengine.optim import AmpOptimWrapper

    cfg = _swin_example()
    cfg.optim_wrapper.type = AmpOptimWrapper
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'train')
    assert str(err.value).startswith(
        "optim_wrapper.type='AmpOptimWrapper' needs a GPU, and there is none here"
    )


@pytest.mark.cuda
def test_on_a_gpu_the_amp_wrapper_is_accepted() -> None:
    check_config(_swin_example(), 'train')
