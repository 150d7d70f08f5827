"""tools/extract_features.py on a long video and on a folder it already holds: ``--over-time``
gives the windows ``tools/infer.py --over-time`` scores, a long video without it is said, and a
resumed run trusts only features that the same model, settings and videos made."""

from __future__ import annotations

import csv
import json
import os
import shutil

import numpy as np
import pytest
import torch
from conftest import DEMO_CONFIG, TINY_DEMO_CFG, load_tool, tiny_demo_recognizer
from mmengine.config import Config
from tolerance import REORDERED, assert_close_as

from dna_mm.synthetic.videos import write_video

extract = load_tool('tools/extract_features.py')
TINY = [f'{k}={v}' for k, v in TINY_DEMO_CFG.items()]


def noise(frames: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(frames):
        yield rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    """``(checkpoint, model, folder)``: the tiny demo recognizer with random weights, and a folder
    of one 4 s video (25 fps, 64x48)."""
    root = tmp_path_factory.mktemp('features_over_time')
    ckpt, model = tiny_demo_recognizer(root)
    write_video(root / 'videos' / 'four.mp4', noise(100, 0), fps=25, codec='libx264')
    return ckpt, model, root / 'videos'


def run(ckpt, videos, out, *extra: str, cfg: tuple[str, ...] = ()) -> int:
    """The tool on the tiny model; ``cfg``: more ``--cfg-options``."""
    args = [DEMO_CONFIG, str(ckpt), '--videos', str(videos), '--out', str(out), '--workers', '0']
    return extract.main([*args, *extra, '--cfg-options', *TINY, *cfg])


def refused(ckpt, videos, out, *extra: str, cfg: tuple[str, ...] = ()) -> str:
    with pytest.raises(SystemExit) as stop:
        run(ckpt, videos, out, *extra, cfg=cfg)
    assert stop.value.code == 2
    return str(stop.value)


def test_over_time_gives_the_windows_infer_scores(tiny, tmp_path, capsys) -> None:
    """One row per window, its times beside it: the windows and, through the head's classifier,
    the scores of ``OverTimePredictor`` (what ``tools/infer.py --over-time`` prints)."""
    from dna_mm.apis.inference import test_pipeline_of
    from dna_mm.over_time.predictor import OverTimePredictor

    ckpt, model, videos = tiny
    assert run(ckpt, videos, tmp_path / 'w', '--over-time', '--stride', '0.4') == 0
    feats = np.load(tmp_path / 'w' / 'four.npy')
    with open(tmp_path / 'w' / 'four.windows.csv', encoding='utf-8') as f:
        times = [(float(r['start']), float(r['end'])) for r in csv.DictReader(f)]
    (row,) = csv.DictReader(open(tmp_path / 'w' / 'index.csv', encoding='utf-8'))
    assert row['windows'] == 'four.windows.csv' and row['shape'] == f'{len(times)}x32'
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(TINY_DEMO_CFG)
    result = OverTimePredictor(model.eval(), test_pipeline_of(cfg)).run(str(videos / 'four.mp4'), 0.4)
    assert times == [(pytest.approx(w.start), pytest.approx(w.end)) for w in result.windows]
    assert [start for start, _ in times] == pytest.approx([0.4 * i for i in range(10)])  # 4 s every 0.4 s
    with torch.no_grad():
        scores = model.cls_head.fc_cls(torch.from_numpy(feats)).softmax(-1).numpy()
    assert_close_as(scores, result.scores, ulps=REORDERED, what='window scores')
    out = capsys.readouterr()
    assert 'pooled features per window of 1 of 1 videos' in out.out and 'note:' not in out.err


def test_a_long_video_without_over_time_is_said(tiny, tmp_path, capsys) -> None:
    ckpt, _, videos = tiny
    assert run(ckpt, videos, tmp_path / 'one') == 0
    assert np.load(tmp_path / 'one' / 'four.npy').shape == (32,)
    note = (
        'note: a video lasts more than 4 clips of the test views, and one row of features stands for '
        f'each (the longest, {videos / "four.mp4"}: 4.0 s, a clip 0.64 s); --over-time gives a row per '
        'window along each video'
    )
    assert note in capsys.readouterr().err


def test_features_other_settings_made_are_refused_or_replaced(tiny, tmp_path, capsys) -> None:
    ckpt, _, videos = tiny
    out = tmp_path / 'out'
    assert run(ckpt, videos, out) == 0
    line = refused(ckpt, videos, out, '--level', 'tokens')
    assert "'level': ('pooled', 'tokens')" in line and line.endswith('or --overwrite to replace them')
    assert run(ckpt, videos, out, '--level', 'tokens', '--overwrite') == 0
    assert np.load(out / 'four.npy').shape == (1 + 16 * 8, 32)  # CLS + 4x4 patches x 8 frames
    assert json.loads((out / 'features.json').read_text())['level'] == 'tokens'
    # an edited model config, other weights at the same path, another folder of the same names
    deeper = ('model.backbone.num_transformer_layers=2',)
    assert "'model': ('sha256:" in refused(ckpt, videos, out, '--level', 'tokens', cfg=deeper)
    other = tmp_path / 'other.pth'
    shutil.copy(ckpt, other)
    state = torch.load(other, weights_only=True)
    state['state_dict']['cls_head.fc_cls.bias'] += 1
    torch.save(state, other)
    assert run(other, videos, tmp_path / 'o', '--level', 'tokens') == 0
    shutil.copy(other, tmp_path / 'o' / 'weights.pth')
    assert "'weights': ('sha256:" in refused(ckpt, videos, tmp_path / 'o', '--level', 'tokens')
    (moved := tmp_path / 'moved').mkdir()
    shutil.copy(videos / 'four.mp4', moved)
    assert "'videos': (" in refused(ckpt, moved, out, '--level', 'tokens')
    # features without their settings file: of unknown origin
    (out / 'features.json').unlink()
    line = refused(ckpt, videos, out, '--level', 'tokens')
    assert line.endswith(
        'but no features.json, the settings that made them: use another --out, or --overwrite to replace them'
    )
    capsys.readouterr()


def test_a_video_replaced_since_its_features_is_extracted_again(tiny, tmp_path) -> None:
    ckpt, _, videos = tiny
    (mine := tmp_path / 'videos').mkdir()
    shutil.copy(videos / 'four.mp4', mine / 'clip.mp4')
    assert run(ckpt, mine, tmp_path / 'out') == 0
    before = np.load(tmp_path / 'out' / 'clip.npy')
    stamp = os.stat(tmp_path / 'out' / 'clip.npy').st_mtime_ns
    assert run(ckpt, mine, tmp_path / 'out') == 0  # resumed: nothing to do
    assert os.stat(tmp_path / 'out' / 'clip.npy').st_mtime_ns == stamp
    write_video(mine / 'clip.mp4', noise(40, 1), fps=25, codec='libx264')  # another video, same name
    os.utime(mine / 'clip.mp4', ns=(stamp + 10**9, stamp + 10**9))
    assert run(ckpt, mine, tmp_path / 'out') == 0
    assert np.abs(np.load(tmp_path / 'out' / 'clip.npy') - before).max() > 1e-3


def test_each_video_its_own_file(tiny, tmp_path, capsys) -> None:
    """Two videos of one stem keep their suffix; a link keeps its own name; and the views of a
    video one forward pass at a time (``max_testing_views``) need no other batch size."""
    ckpt, _, videos = tiny
    (mixed := tmp_path / 'mixed').mkdir()
    for name in ('a.mp4', 'a.mkv', 'b.mp4'):
        shutil.copy(videos / 'four.mp4', mixed / name)
    os.symlink(mixed / 'b.mp4', mixed / 'c.mp4')
    views = ('test_dataloader.dataset.pipeline.1.num_clips=3',)
    assert run(ckpt, mixed, tmp_path / 'out', '--per', 'clip', cfg=views) == 0
    rows = list(csv.DictReader(open(tmp_path / 'out' / 'index.csv', encoding='utf-8')))
    assert [(os.path.basename(r['video']), r['file'], r['shape']) for r in rows] == [
        ('a.mkv', 'a.mkv.npy', '3x32'),
        ('a.mp4', 'a.mp4.npy', '3x32'),
        ('b.mp4', 'b.npy', '3x32'),
        ('c.mp4', 'c.npy', '3x32'),
    ]
    one_at_a_time = tmp_path / 'views'
    assert (
        run(ckpt, mixed, one_at_a_time, '--per', 'clip', cfg=(*views, 'model.test_cfg.max_testing_views=1'))
        == 0
    )
    for row in rows:
        got, whole = np.load(one_at_a_time / row['file']), np.load(tmp_path / 'out' / row['file'])
        assert_close_as(got, whole, ulps=REORDERED, what=row['file'])
    capsys.readouterr()
