"""The demo configs find the demo's data from any folder: a config of your own inheriting
``configs/timesformer_dna_demo.py`` (as ``dna_mm::`` or by a path into the checkout) reads the clips
of the checkout's ``data/demo``, wherever it runs (an installed dna_mm, which has no checkout,
reads ``data/demo`` of the folder it runs in: ``tests/packaging/test_wheel_install.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO, tiny_run_options


@pytest.mark.parametrize(
    'name, data, ann_file',
    [
        ('timesformer_dna_demo.py', 'demo', 'train_dataloader.dataset.ann_file'),
        ('vitdet_dna_demo.py', 'demo_coco', 'test_evaluator.ann_file'),
    ],
)
def test_a_config_inheriting_a_demo_reads_the_checkouts_data(name, data, ann_file, tmp_path) -> None:
    from dna_mm.config import read_config

    (tmp_path / 'mine.py').write_text(f"_base_ = ['dna_mm::{name}']\n")
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)  # another folder than the checkout
        cfg = read_config('mine.py')
    finally:
        os.chdir(cwd)
    root = REPO / 'data' / data
    assert cfg.data_root.rstrip('/') == str(root)
    node = cfg
    for key in ann_file.split('.'):
        node = node[key]
    assert node.startswith(str(root) + '/'), node


@pytest.mark.integration
def test_a_config_in_your_folder_trains_on_the_clips_of_the_checkout(tiny_video_set, tmp_path) -> None:
    """``tools/train.py`` run in a project folder on a config there that inherits the demo of a
    checkout by a relative path, with the tiny model of the demo tests and nothing said about the
    data: it trains on the checkout's ``data/demo``. The checkout: a copy of the configs, the
    package beside them, the tiny clips as its ``data/demo``."""
    import shutil

    clone = tmp_path / 'clone'
    shutil.copytree(REPO / 'configs', clone / 'configs')
    (clone / 'dna_mm').symlink_to(REPO / 'dna_mm')
    (clone / 'data').mkdir()
    (clone / 'data' / 'demo').symlink_to(tiny_video_set)
    project = tmp_path / 'project'
    project.mkdir()
    (project / 'mine.py').write_text("_base_ = ['../clone/configs/timesformer_dna_demo.py']\n")
    opts = [o for o in tiny_run_options(tmp_path / 'nowhere') if '.dataset.' not in o]  # no data paths
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / 'tools' / 'train.py'),
            'mine.py',
            '--work-dir',
            'w',
            '--cfg-options',
            *opts,
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (project / 'w' / 'epoch_1.pth').is_file()
    assert f'{clone}/data/demo/videos' in (project / 'w' / 'mine.py').read_text()  # the config as it ran
