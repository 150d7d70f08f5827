"""dna_mm.utils.tool_runs: a test run's metrics read back from the file mmengine writes."""

from __future__ import annotations

import json
import os

import pytest

from dna_mm.utils import tool_runs


def _run(work_dir, stamp: str, when: float, metrics: dict | None = None) -> None:
    """A run's folder as mmengine leaves it: a log, and for a test the metrics JSON."""
    folder = work_dir / stamp
    folder.mkdir(parents=True)
    (folder / f'{stamp}.log').write_text('')
    if metrics is not None:
        (folder / f'{stamp}.json').write_text(json.dumps(metrics))
        os.utime(folder / f'{stamp}.json', (when, when))


def test_test_runs_are_the_tests_json_in_time_order_without_timings(tmp_path) -> None:
    _run(tmp_path, '20260101_000000', 100.0)  # a training run: no metrics file
    first = {'acc/top1': 0.5, 'acc/mean1': 0.25, 'data_time': 0.1, 'time': 0.2}
    _run(tmp_path, '20260101_000100', 200.0, first)
    _run(tmp_path, '20260101_000200', 300.0, {'acc/top1': 0.75, 'confusion_matrix/result': [[1]], 'time': 1})
    (tmp_path / 'vis_data.json').write_text('{}')  # not a run's folder
    assert tool_runs.read_test_runs(tmp_path) == [{'acc/top1': 0.5, 'acc/mean1': 0.25}, {'acc/top1': 0.75}]
    assert tool_runs.read_test_runs(tmp_path, since=250.0) == [{'acc/top1': 0.75}]
    assert tool_runs.read_test_metrics(tmp_path) == {'acc/top1': 0.75}


def test_no_test_run_is_an_error_naming_the_folder(tmp_path) -> None:
    _run(tmp_path, '20260101_000000', 100.0)
    with pytest.raises(FileNotFoundError, match=f'{tmp_path}: no test results'):
        tool_runs.read_test_metrics(tmp_path)


def test_the_demo_options_point_every_split_at_the_data() -> None:
    opts = tool_runs.demo_options('diff', 'data/x', 3)
    assert opts[0] == 'model.backbone.attn_cfg=diff' and opts[-1] == 'train_cfg.max_epochs=3'
    assert 'test_dataloader.dataset.ann_file=data/x/test.txt' in opts and len(opts) == 8
