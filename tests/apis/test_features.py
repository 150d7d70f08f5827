"""tools/extract_features.py on the demo model: the features are the recognizer's own pre-head
activations; one file per video or one file with an index; resume; unreadable videos listed;
(slow) two gloo processes give the same files."""

from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import DEMO_CONFIG, REPO, free_port, load_tool
from mmaction.registry import MODELS
from mmaction.utils import register_all_modules
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from tolerance import REORDERED, assert_close_as

import dna_mm  # noqa: F401

extract = load_tool('tools/extract_features.py')
register_all_modules()


@pytest.fixture(scope='module')
def demo_model(tiny_video_set, tmp_path_factory):
    """The demo recognizer with random weights, saved as an mmengine checkpoint; a folder of 3
    clips (one in a sub-folder) and a broken file."""
    root = tmp_path_factory.mktemp('features')
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(DEMO_CONFIG).model)
    ckpt = root / 'demo.pth'
    torch.save({'state_dict': model.state_dict()}, ckpt)
    videos = root / 'videos'
    (videos / 'sub').mkdir(parents=True)
    clips = sorted((tiny_video_set / 'videos').glob('*.mp4'))[:3]
    for i, clip in enumerate(clips):
        shutil.copy(clip, (videos / 'sub' if i == 2 else videos) / clip.name)
    (videos / 'broken.mp4').write_bytes(b'not a video')
    return ckpt, videos


@functools.cache
def _recognizer(ckpt) -> tuple:
    cfg = Config.fromfile(DEMO_CONFIG)
    model = MODELS.build(cfg.model).eval()
    model.load_state_dict(torch.load(ckpt, weights_only=True)['state_dict'])
    return model, Compose(cfg.test_dataloader.dataset.pipeline)


def own_pre_head(ckpt, video) -> np.ndarray:
    """What the recognizer's ``test_step`` hands to its head for ``video``: ``[views, C]``."""
    model, pipeline = _recognizer(ckpt)
    seen = []
    hook = model.cls_head.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    sample = pipeline(dict(filename=str(video), label=-1, start_index=0, modality='RGB'))
    with torch.no_grad():
        model.test_step(pseudo_collate([sample]))
    hook.remove()
    return seen[0].numpy()


def test_features_are_the_recognizers_pre_head_activations(demo_model, tmp_path, capsys) -> None:
    ckpt, videos = demo_model
    out = tmp_path / 'clip'
    args = [
        DEMO_CONFIG,
        str(ckpt),
        '--videos',
        str(videos),
        '--out',
        str(out),
        '--workers',
        '0',
        '--per',
        'clip',
    ]
    assert extract.main(args) == 1  # the broken file: listed, the others written
    err = capsys.readouterr().err
    assert f'{videos / "broken.mp4"}: ' in err and (out / 'unreadable.txt').read_text().count('\n') == 1
    rows = list(csv.DictReader(open(out / 'index.csv', encoding='utf-8')))
    assert [r['file'] for r in rows] == sorted(r['file'] for r in rows) and len(rows) == 3
    assert any(r['file'].startswith('sub/') for r in rows)  # the folder's tree is kept
    for row in rows:
        feats = np.load(out / row['file'])
        own = own_pre_head(ckpt, row['video'])
        assert feats.shape == own.shape == (1, 96)  # 1 clip x 1 crop, 96 channels
        assert_close_as(feats, own, ulps=REORDERED, what=row['file'])
    # resumed: nothing is extracted again
    stamps = {r['file']: os.stat(out / r['file']).st_mtime_ns for r in rows}
    assert extract.main(args) == 1
    assert stamps == {r['file']: os.stat(out / r['file']).st_mtime_ns for r in rows}
    # other settings into the same folder are refused, naming them
    with pytest.raises(SystemExit, match="'per': \\('clip', 'video'\\)"):
        extract.main(args[:-2])


def test_the_settings_file_names_the_files_from_any_folder(demo_model, tmp_path, monkeypatch) -> None:
    """``features.json`` names the config and the checkpoint by absolute paths, given relative
    ones: its reader need not know the folder the extraction ran in."""
    ckpt, videos = demo_model
    monkeypatch.chdir(ckpt.parent)
    out = tmp_path / 'named'
    args = [DEMO_CONFIG, ckpt.name, '--videos', str(videos / 'sub'), '--out', str(out), '--workers', '0']
    assert extract.main(args) == 0
    record = json.loads((out / 'features.json').read_text())
    assert record['checkpoint'] == str(ckpt) and record['config'] == str(Path(DEMO_CONFIG).resolve())
    shipped = 'dna_mm::timesformer_dna_demo.py'  # a shipped config by its name: as given, no path
    args[0], args[5] = shipped, str(tmp_path / 'n')  # --out
    assert extract.main(args) == 0
    assert json.loads((tmp_path / 'n' / 'features.json').read_text())['config'] == shipped


def test_one_file_with_an_index_and_tokens(demo_model, tmp_path, capsys) -> None:
    ckpt, videos = demo_model
    (listing := tmp_path / 'list.txt').write_text(
        ''.join(
            f'{p.relative_to(videos)} 0\n' for p in sorted(videos.rglob('*.mp4')) if p.name != 'broken.mp4'
        )
    )
    out = tmp_path / 'one'
    args = [DEMO_CONFIG, str(ckpt), '--videos', str(listing), '--video-root', str(videos), '--workers', '0']
    args += ['--out', str(out)]
    assert extract.main([*args, '--single-file']) == 0
    feats = np.load(out / 'features.npy')
    rows = list(csv.DictReader(open(out / 'index.csv', encoding='utf-8')))
    assert feats.shape == (3, 96) and [int(r['row']) for r in rows] == [0, 1, 2]
    for row in rows:
        assert_close_as(
            feats[int(row['row'])], own_pre_head(ckpt, row['video'])[0], ulps=REORDERED, what=row['video']
        )
    one = str(next(videos.glob('*.mp4')))  # per-token features of one video
    assert (
        extract.main(
            [
                DEMO_CONFIG,
                str(ckpt),
                '--videos',
                one,
                '--out',
                str(tmp_path / 'tokens'),
                '--workers',
                '0',
                '--level',
                'tokens',
            ]
        )
        == 0
    )
    tokens = np.load(next((tmp_path / 'tokens').rglob('*.npy')))
    assert tokens.shape == (1 + 16 * 8, 96)  # CLS + 4x4 patches x 8 frames, averaged over 1 view


@pytest.mark.slow
@pytest.mark.integration
def test_two_processes_share_the_videos(demo_model, tmp_path) -> None:
    ckpt, videos = demo_model
    args = [DEMO_CONFIG, str(ckpt), '--videos', str(videos), '--per', 'clip']
    extract.main([*args, '--out', str(tmp_path / 'one')])
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    cmd = [
        sys.executable,
        '-m',
        'torch.distributed.run',
        '--nproc_per_node',
        '2',
        f'--master_port={free_port()}',
    ]
    done = subprocess.run(
        [*cmd, 'tools/extract_features.py', *args, '--out', str(tmp_path / 'two'), '--launcher', 'pytorch'],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr[-3000:]  # the broken file, listed once
    assert (tmp_path / 'two' / 'unreadable.txt').read_text().count('\n') == 1
    ones = sorted((tmp_path / 'one').rglob('*.npy'))
    assert len(ones) == 3
    for f in ones:
        assert_close_as(
            np.load(tmp_path / 'two' / f.relative_to(tmp_path / 'one')), np.load(f), ulps=REORDERED
        )
