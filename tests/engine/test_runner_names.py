"""Two runs started in one process within the same second (a notebook, the tests, the study's
seeds) each keep their own logger, log file and visualizer: mmengine names all three
``<config>_<timestamp>`` and would hand the second run the first one's."""

from __future__ import annotations

import logging
import time

import pytest
from conftest import DEMO_CONFIG, tiny_run_options
from mmengine.config import Config, DictAction

from dna_mm.engine import build_runner


def _runner(work_dir, root):
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *tiny_run_options(root)]).o)
    cfg.work_dir = str(work_dir)
    return build_runner(cfg)


class _OneSecond:
    """mmengine's runner module's clock stopped at one moment (``time()``; the rest is the ``time``
    module's): every runner built meanwhile has the same timestamp, however slow the machine."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str):
        return getattr(time, name)


@pytest.fixture
def one_second(monkeypatch) -> None:
    monkeypatch.setattr('mmengine.runner.runner.time', _OneSecond())


def _log_file(runner) -> str:
    (path,) = [h.baseFilename for h in runner.logger.handlers if isinstance(h, logging.FileHandler)]
    return path


def test_runs_in_the_same_second_keep_their_own_log(tiny_video_set, tmp_path, one_second) -> None:
    first = _runner(tmp_path / 'a', tiny_video_set)
    second = _runner(tmp_path / 'b', tiny_video_set)
    assert first.timestamp == second.timestamp
    # the second takes the next free name (an earlier runner of this process may hold one too)
    assert second.experiment_name != first.experiment_name
    assert second.experiment_name.startswith(f'timesformer_dna_demo_{first.timestamp}_')
    assert _log_file(first).startswith(str(tmp_path / 'a'))
    assert _log_file(second).startswith(str(tmp_path / 'b'))
    assert second.visualizer.instance_name == second.experiment_name
    assert second.message_hub.instance_name == second.experiment_name


def test_runs_in_the_same_second_keep_their_own_default_scope(tiny_video_set, tmp_path, one_second) -> None:
    """mmengine makes the default scope under the run's name too: the second run must build from
    its own scope (an MMDetection run after an MMAction2 one in one notebook)."""
    first = _runner(tmp_path / 'a', tiny_video_set)
    second = _runner(tmp_path / 'b', tiny_video_set)
    assert first.timestamp == second.timestamp
    assert second.default_scope is not first.default_scope
    assert second.default_scope.instance_name == second.experiment_name
    assert second.default_scope.scope_name == 'mmaction'
