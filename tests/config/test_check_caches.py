"""What the config check reads once (:mod:`dna_mm.config.check`): whether a config file inherits a
base (``_base_``, which mmengine's ``Config._get_base_files`` parses), asked by each loader, the
evaluators, the hooks and the optimizer, is parsed once per file content, and read anew where the
file was rewritten; the options of torch's optimizers, asked once per option of a custom key,
are found once."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

from conftest import DEMO_CONFIG
from mmengine.config import Config

import dna_mm  # noqa: F401
from dna_mm.config.check import config_problems, optim
from dna_mm.config.check.values import has_base


def _parses(check) -> int:
    """How many times ``check()`` has mmengine parse a config file for its ``_base_``."""
    parse = Config._get_base_files
    with mock.patch.object(Config, '_get_base_files', side_effect=parse) as spy:
        check()
    return spy.call_count


def test_a_check_reads_the_base_once(tmp_path: Path) -> None:
    """A child config's whole check, twice: one parse; the file rewritten without its ``_base_``
    (the same path, as a test rewrites it): read anew."""
    path = tmp_path / 'child.py'
    path.write_text(f'_base_ = [{DEMO_CONFIG!r}]\nlabel_map = None\n')
    cfg = Config.fromfile(str(path))
    assert _parses(lambda: (config_problems(cfg, 'train'), config_problems(cfg, 'train'))) <= 1
    assert has_base(cfg)
    path.write_text('label_map = None  # the base written in\n')
    assert _parses(lambda: has_base(cfg)) == 1
    assert not has_base(cfg)
    path.unlink()
    assert not has_base(cfg)  # a file no longer there
    assert not has_base(Config(dict(a=1)))  # not read from a file


def test_torchs_optimizer_options_are_found_once() -> None:
    """The set is the same object on each call (and a frozenset: no caller can change it)."""
    first = optim._torch_options()
    assert isinstance(first, frozenset) and {'momentum', 'betas'} <= first
    assert optim._torch_options() is first
