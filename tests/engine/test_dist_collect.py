"""A test or validation on several ranks leaves nothing in the folder it was started from.

mmengine's metrics collect the ranks' results through files (``collect_device='cpu'``): with no
``collect_dir``, ``collect_results`` makes ``.dist_test/`` in the current folder and a folder of
its own in it for each collection, and removes only the latter, so every 2-rank
``tools/dist_test.sh`` (and validation in ``dist_train.sh``) left an empty ``.dist_test/`` where
the user ran it. ``DnARunner`` gives each such metric the run's log folder's ``dist_collect/``
(the same on every rank), which mmengine removes after each collection; a metric's own
``collect_dir``, or another ``collect_device``, is left as set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DEMO_CONFIG, REPO, free_port, tiny_run_options
from toy_runner import toy_runner

from dna_mm.engine.runner import COLLECT_DIR


def _everything(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob('*'))


@pytest.mark.integration
def test_a_two_rank_test_leaves_nothing_in_the_current_folder(
    tiny_video_set, tiny_checkpoint, tmp_path
) -> None:
    """``tools/dist_test.sh`` on 2 gloo ranks, started in a folder of the user's: the metrics
    printed, the folder as it was (no ``.dist_test/``), no collection folder left in the log's."""
    here = tmp_path / 'here'
    here.mkdir()
    (here / 'notes.txt').write_text('notes\n')
    env = {**os.environ, 'PYTHON': sys.executable, 'PORT': str(free_port()), 'OMP_NUM_THREADS': '1'}
    args = [DEMO_CONFIG, str(tiny_checkpoint), '2', '--work-dir', str(tmp_path / 'w')]
    options = ['--cfg-options', *tiny_run_options(tiny_video_set)]
    done = subprocess.run(
        ['bash', str(REPO / 'tools' / 'dist_test.sh'), *args, *options],
        cwd=here,
        env={**env, 'GLOO_SOCKET_IFNAME': 'lo'},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert 'Test results:' in done.stdout, done.stdout[-3000:]
    assert _everything(here) == ['notes.txt']
    assert not list((tmp_path / 'w').glob(f'*/{COLLECT_DIR}'))


def test_each_metric_that_collects_by_files_collects_in_the_log_folder(tmp_path) -> None:
    """The evaluators of validation and testing (both built by ``build_evaluator``): a metric
    collecting through files gets ``<log folder>/dist_collect``; one with a ``collect_dir`` of its
    own, or collecting on the GPU, keeps its setting."""
    runner, own = toy_runner(tmp_path / 'w', [1.0, 2.0]), str(tmp_path / 'own')
    evaluator = runner.build_evaluator(
        [
            dict(type='DumpResults', out_file_path=str(tmp_path / 'a.pkl')),
            dict(type='DumpResults', out_file_path=str(tmp_path / 'b.pkl'), collect_dir=own),
            dict(type='DumpResults', out_file_path=str(tmp_path / 'c.pkl'), collect_device='gpu'),
        ]
    )
    assert [m.collect_dir for m in evaluator.metrics] == [
        os.path.join(runner.log_dir, COLLECT_DIR),
        own,
        None,
    ]
