"""tools/test.py --confusion-matrix: a path it cannot write (an unknown format, under a file, a
folder) is one line before the test runs; a missing folder is made; the files reported are the
ones written (no suffix: a PNG)."""

from __future__ import annotations

import csv

import pytest
import torch
from conftest import DEMO_CONFIG, MULTI_LABEL_OPTIONS, run_main, tiny_run_options
from mmengine.config import Config, DictAction


@pytest.fixture(scope='module')
def tiny_ckpt(tiny_video_set, tmp_path_factory):
    """The tiny demo model as initialised, saved as tools/test.py reads it."""
    from mmaction.registry import MODELS
    from mmengine.registry import init_default_scope

    init_default_scope('mmaction')
    parser = __import__('argparse').ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *tiny_run_options(tiny_video_set)]).o)
    path = tmp_path_factory.mktemp('cm_ckpt') / 'tiny.pth'
    torch.save(dict(state_dict=MODELS.build(cfg.model).state_dict()), path)
    return path


def _test(ckpt, root, work, *extra: str):
    args = ['tools/test.py', DEMO_CONFIG, str(ckpt), '--work-dir', str(work), *extra]
    return run_main([*args, '--cfg-options', *tiny_run_options(root)], check=False)


def test_an_unwritable_confusion_matrix_is_refused_before_the_test(
    tiny_ckpt, tiny_video_set, tmp_path
) -> None:
    (a_file := tmp_path / 'a_file').write_text('')
    (a_folder := tmp_path / 'a_folder').mkdir()
    for path, message in (
        (tmp_path / 'cm.jpgx', '.jpgx is not a figure format matplotlib writes (avif, eps, '),
        (a_file / 'cm.png', f'{a_file} is a file, not a folder'),
        (a_folder, 'is a folder: give the path of the file to write'),
    ):
        work = tmp_path / f'work_{path.name}'
        done = _test(tiny_ckpt, tiny_video_set, work, '--confusion-matrix', str(path))
        assert done.returncode == 2, done.stderr[-3000:]
        (line,) = [ln for ln in done.stderr.splitlines() if 'error:' in ln]
        assert f'--confusion-matrix {path}' in line and message in line, line
        assert 'Traceback' not in done.stderr and 'Test results' not in done.stdout
        assert not work.exists()  # refused before the run started


def test_the_files_reported_are_the_files_written(tiny_ckpt, tiny_video_set, tmp_path) -> None:
    figure = tmp_path / 'new' / 'folder' / 'cmnoext'  # no suffix, its folder not there yet
    done = _test(tiny_ckpt, tiny_video_set, tmp_path / 'work', '--confusion-matrix', str(figure))
    assert done.returncode == 0, done.stderr[-3000:]
    png, table = figure.with_name('cmnoext.png'), figure.with_name('cmnoext.csv')
    assert f'confusion matrix: {png} and {table}' in done.stdout.splitlines()
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and not figure.exists()
    rows = list(csv.reader(open(table, encoding='utf-8')))
    assert len(rows) == 1 + 4 and sum(int(n) for row in rows[1:] for n in row[1:]) == 4  # 4 test videos


def test_a_multi_label_test_is_refused_before_it_runs(tiny_ckpt, tiny_video_set, tmp_path) -> None:
    """MMAction2's ConfusionMatrix takes one class per video: on a multi-label test it failed after
    the whole test (``The size of pred (16) doesn't match the target (64)``), its metrics lost."""
    work = tmp_path / 'work'
    multi = MULTI_LABEL_OPTIONS  # a multi-label head, its lists, the mAP
    done = _test(tiny_ckpt, tiny_video_set, work, '--confusion-matrix', str(tmp_path / 'cm.png'))
    assert done.returncode == 0, done.stderr[-3000:]  # the same test, one class per video
    args = ['tools/test.py', DEMO_CONFIG, str(tiny_ckpt), '--work-dir', str(work)]
    done = run_main(
        [
            *args,
            '--confusion-matrix',
            str(tmp_path / 'cm2.png'),
            '--cfg-options',
            *tiny_run_options(tiny_video_set),
            *multi,
        ],
        check=False,
    )
    assert done.returncode == 2 and 'Traceback' not in done.stderr, done.stderr[-3000:]
    (line,) = [ln for ln in done.stderr.splitlines() if 'error:' in ln]
    assert line == (
        'test.py: error: --confusion-matrix is for a test of one class per video: '
        'test_dataloader.dataset has multi_class=True (its mean average precision is the metric)'
    )
