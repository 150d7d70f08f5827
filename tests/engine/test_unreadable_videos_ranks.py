"""Unreadable videos on 2 ranks give what 1 rank gives: each readable video counted once, the
``--dump`` CSV in list order, each unreadable video named once, the same metrics and messages
(``tools/dist_test.sh`` and ``dist_train.sh``'s validation, gloo on the CPU); and in process, the
loops' placeholders through mmengine's own collection, 2 ranks faked.

mmengine collects the metrics' results by interleaving the ranks' parts (``DefaultSampler``
deals the list out ``rank::world``, padded to a multiple of the ranks) and cutting the padding
off at the list's length: a rank that drops an unreadable video shifts every result after it.
The lists below put an unreadable video where that shows: at index 0 (the padding repeats it on
rank 1) and at an odd index (rank 1), the list's length odd."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mmengine.dist.dist as mmengine_dist
import pytest
from conftest import DEMO_CONFIG, REPO, free_port, run_main, tiny_run_options

from dna_mm.engine import test_loop as loops
from dna_mm.engine.test_loop import SkipsUnreadable, collate_readable, none_read_error

#: bytes that open as an mp4 and decode as nothing
TRUNCATED = b'\x00\x00\x00\x18ftypmp42' + bytes(range(256)) * 8


def video_list(root: Path, tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A list of 7 videos, 2 unreadable: ``bad0.mp4`` at index 0 (rank 0, and rank 1's padding)
    and ``bad3.mp4`` at index 3 (rank 1); its folder (the tiny set's videos linked), and the
    unreadable ones' paths."""
    videos = tmp_path / 'videos'
    videos.mkdir()
    for f in (root / 'videos').iterdir():
        (videos / f.name).symlink_to(f)
    (videos / 'bad0.mp4').write_bytes(TRUNCATED)
    (videos / 'bad3.mp4').write_bytes(b'')
    good = (root / 'test.txt').read_text().splitlines() + (root / 'train.txt').read_text().splitlines()[:1]
    lines = ['bad0.mp4 0', *good[:2], 'bad3.mp4 1', *good[2:5]]
    listed = tmp_path / 'list.txt'
    listed.write_text('\n'.join(lines) + '\n')
    return listed, videos, [str(videos / 'bad0.mp4'), str(videos / 'bad3.mp4')]


def listed_options(root: Path, listed: Path, videos: Path) -> list[str]:
    """``--cfg-options`` of the tiny demo testing ``listed``, 2 videos a batch, no workers."""
    return [
        *tiny_run_options(root),
        f'test_dataloader.dataset.ann_file={listed}',
        f'test_dataloader.dataset.data_prefix.video={videos}',
        'test_cfg.progress_every_s=0',
    ]


def on_two_ranks(tool: str, args: list[str]) -> subprocess.CompletedProcess:
    """``tools/dist_<tool>.sh`` on 2 ranks (``args``: the tool's, the config first, the checkpoint
    second for ``test``)."""
    env = {
        **os.environ,
        'PYTHON': sys.executable,
        'PORT': str(free_port()),
        'OMP_NUM_THREADS': '1',
        'GLOO_SOCKET_IFNAME': 'lo',
    }
    first = 2 if tool == 'test' else 1
    return subprocess.run(
        ['bash', f'tools/dist_{tool}.sh', *args[:first], '2', *args[first:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def results_line(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith('Test results:')]


def rows(path: Path) -> list[dict]:
    """The CSV's rows, the score rounded to 4 places (a batch of other videos may move the 6th)."""
    with open(path) as f:
        return [dict(row, score=f'{float(row["score"]):.4f}') for row in csv.DictReader(f)]


@pytest.fixture(scope='module')
def one_rank(tiny_video_set, tiny_checkpoint, tmp_path_factory) -> dict:
    """``tools/test.py --skip-unreadable --dump`` of :func:`video_list` on 1 rank (in process):
    the list, its folder and unreadable videos, the options, the results line, the CSV's rows."""
    tmp = tmp_path_factory.mktemp('one_rank')
    listed, videos, bad = video_list(tiny_video_set, tmp)
    opts = listed_options(tiny_video_set, listed, videos)
    args = [DEMO_CONFIG, str(tiny_checkpoint), '--work-dir', str(tmp / 'w'), '--skip-unreadable']
    one = run_main(['tools/test.py', *args, '--dump', str(tmp / 'one.csv'), '--cfg-options', *opts])
    line = results_line(one.stdout)
    assert len(line) == 1 and line[0].endswith('(2 unreadable videos skipped: metrics over 5 of 7)'), line
    expected = rows(tmp / 'one.csv')
    assert [Path(r['video']).name for r in expected] == [
        ln.split()[0] for ln in listed.read_text().splitlines() if not ln.startswith('bad')
    ]
    return dict(listed=listed, videos=videos, bad=bad, opts=opts, line=line, rows=expected)


@pytest.mark.integration
def test_two_ranks_skip_and_name_unreadable_videos_as_one_rank_does(
    one_rank, tiny_checkpoint, tmp_path
) -> None:
    opts, bad = one_rank['opts'], one_rank['bad']
    common = [DEMO_CONFIG, str(tiny_checkpoint)]
    two = on_two_ranks(
        'test',
        [*common, '--work-dir', str(tmp_path / 'w2'), '--skip-unreadable']
        + ['--dump', str(tmp_path / 'two.csv'), '--cfg-options', *opts],
    )
    assert two.returncode == 0, two.stderr[-5000:]
    assert results_line(two.stdout) == one_rank['line'], two.stdout[-3000:]
    for name in bad:  # named once, by rank 0
        assert two.stderr.count(f'skipped unreadable test video {name}:') == 1, two.stderr[-3000:]
    assert rows(tmp_path / 'two.csv') == one_rank['rows']


@pytest.mark.integration
def test_two_rank_validation_skips_and_names_unreadable_videos_as_a_one_rank_test_does(
    one_rank, tiny_video_set, tiny_checkpoint, tmp_path
) -> None:
    """``tools/dist_train.sh`` from the checkpoint at a learning rate too small to move it,
    validating on the list: the metrics of the 1-rank test, each unreadable video named once
    (rank 1's too)."""
    opts = [
        *tiny_run_options(tiny_video_set),
        f'val_dataloader.dataset.ann_file={one_rank["listed"]}',
        f'val_dataloader.dataset.data_prefix.video={one_rank["videos"]}',
        f'load_from={tiny_checkpoint}',
        'optim_wrapper.optimizer.lr=1e-12',
    ]
    two = on_two_ranks('train', [DEMO_CONFIG, '--work-dir', str(tmp_path / 'w'), '--cfg-options', *opts])
    assert two.returncode == 0, two.stderr[-5000:]
    log = two.stdout + two.stderr
    for name in one_rank['bad']:
        assert log.count(f'validation: skipped unreadable video {name} (') == 1, log[-3000:]
    assert 'metrics over 5 of 7 videos; 2 unreadable video(s) skipped' in log, log[-3000:]
    top1, mca = re.search(r'top-1: ([\d.]+)  mCA: ([\d.]+)', one_rank['line'][0]).groups()
    logged = re.findall(r'Epoch\(val\) \[1\]\[\d+/\d+\].*acc/top1: ([\d.]+)\s+acc/mean1: ([\d.]+)', log)
    assert logged == [(f'{float(top1) / 100:.4f}', f'{float(mca) / 100:.4f}')], log[-3000:]


class Rank(SkipsUnreadable):
    """A loop's share on one rank: a metric that collects each sample's index."""

    def __init__(self, size: int) -> None:
        self.evaluator = SimpleNamespace(metrics=[SimpleNamespace(results=[])])
        self.dataloader = SimpleNamespace(dataset=range(size))
        self.found, self.seen = [], 0

    def run_iter(self, idx: int, data_batch: Any) -> None:
        self.evaluator.metrics[0].results.extend(data_batch['index'])


@pytest.mark.parametrize('bad', [{0, 3}, {1}, {4}, {0, 1, 2, 3, 4}])
def test_the_collected_results_keep_the_list_order_and_each_unreadable_video_once(bad, monkeypatch) -> None:
    """5 videos on 2 ranks, batches of 2 (``DefaultSampler``: rank 0 tests 0, 2, 4; rank 1 tests
    1, 3 and 0 again, the padding): mmengine's collection of the results gives the readable ones
    in list order, and the unreadable ones are listed once each, in list order."""
    size, world = 5, 2
    padded = -(-size // world) * world
    ranks = [Rank(size) for _ in range(world)]
    monkeypatch.setattr(loops, 'get_world_size', lambda: world)
    monkeypatch.setattr(loops, 'all_gather_object', lambda found: [r.found for r in ranks])
    for rank, loop in enumerate(ranks):
        share = [*range(size), *range(size)][rank:padded:world]
        samples = [dict(unreadable=(f'v{i}.mp4', 'cut short')) if i in bad else dict(index=i) for i in share]
        for idx, start in enumerate(range(0, len(samples), 2)):
            loop.run_readable(idx, collate_readable(samples[start : start + 2]))
    unreadable = ranks[0].all_unreadable()
    assert unreadable == [(f'v{i}.mp4', 'cut short') for i in sorted(bad)]
    if len(unreadable) == size:  # on any number of ranks, the message of 1 rank
        assert 'none of the 5 test videos can be read, all for one reason' in str(
            none_read_error(unreadable, size, 'test')
        )
        return
    parts = [r.evaluator.metrics[0].results for r in ranks]
    monkeypatch.setattr(mmengine_dist, 'get_dist_info', lambda: (0, world))
    monkeypatch.setattr(mmengine_dist, 'all_gather_object', lambda part: parts)
    collected = mmengine_dist.collect_results(parts[0], size - len(unreadable), device='gpu')
    assert collected == [i for i in range(size) if i not in bad]
