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


def test_the_demo_options_point_every_split_and_the_class_names_at_the_data() -> None:
    """The demo's config with the options of a run on ``data/x``: its clips and its class names
    (the ``label_map`` tools/infer.py reads from the saved config) are those of ``data/x``."""
    from conftest import DEMO_CONFIG

    from dna_mm.config.build import read_config
    from dna_mm.tools.cli import cfg_options

    cfg = read_config(DEMO_CONFIG, cfg_options(tool_runs.demo_options('diff', 'data/x', 3)))
    assert cfg.model.backbone.attn_cfg == 'diff' and cfg.train_cfg.max_epochs == 3
    assert cfg.label_map == 'data/x/classes.txt'
    for split, ann in (('train', 'train'), ('val', 'test'), ('test', 'test')):
        dataset = cfg[f'{split}_dataloader'].dataset
        assert dataset.ann_file == f'data/x/{ann}.txt' and dataset.data_prefix.video == 'data/x/videos'


def test_a_tool_run_in_the_checkout_finds_a_folder_put_on_pythonpath_from_here(
    tmp_path, monkeypatch, capsys
) -> None:
    """``PYTHONPATH=. demo.py --import mylab.hooks`` from a lab folder: the runs the demo starts
    work in the checkout, where ``.`` is another folder; the entries are made absolute first (the
    run failed on ``No module named 'mylab'`` after the demo's own import of it had passed)."""
    from dna_mm.utils.tool_runs import run_script

    lab, repo = tmp_path / 'lab', tmp_path / 'checkout'
    (lab / 'mylab').mkdir(parents=True)
    (lab / 'mylab' / '__init__.py').write_text("TAG = 'found'\n")
    repo.mkdir()
    monkeypatch.chdir(lab)
    monkeypatch.setenv('PYTHONPATH', os.pathsep.join(['.', str(tmp_path / 'elsewhere')]))
    out = run_script(['-c', 'import mylab; print(mylab.TAG)'], repo=repo)
    assert out.splitlines()[-1] == 'found'
