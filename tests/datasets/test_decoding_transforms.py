"""The data path: dna_mm's decord transforms (same frames / same geometry as MMAction2's), the
dataset configs' inputs (NTU person crops by default, full frames one --cfg-options away; K400
short side 256) and tools/benchmarks/benchmark_data.py run as a user runs it."""

from __future__ import annotations

import argparse
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from mmaction.registry import TRANSFORMS
from mmengine.config import Config, DictAction

from dna_mm.benchmarks.data import stock_pipeline
from dna_mm.datasets.transforms import decord_can_scale_to, scaled_size, video_size
from dna_mm.synthetic.videos import panning_clip, write_video

DATASETS = REPO / 'configs' / '_base_' / 'datasets'


def _run(pipeline: list[dict], path: Path, seed: int = 0, frame_inds=None) -> dict:
    """``pipeline`` (config dicts) on one video, with the NumPy random state ``seed``."""
    np.random.seed(seed)
    results = dict(filename=str(path), label=0, start_index=0, modality='RGB')
    for step in pipeline:
        if frame_inds is not None and step['type'].endswith('Decode'):  # in place of SampleFrames
            results['frame_inds'] = np.asarray(frame_inds)
        results = TRANSFORMS.build(step)(results)
    return results


@pytest.fixture(scope='module')
def videos(tmp_path_factory) -> dict[str, Path]:
    """Real generated clips: H.264 with one keyframe (every backward seek decodes from frame 0)
    and MPEG-4 Part 2 with a keyframe every 12 frames; a landscape and a portrait size."""
    root = tmp_path_factory.mktemp('throughput')
    return {
        'h264': write_video(root / 'h264.mp4', panning_clip(320, 192, 40), codec='libx264'),
        'mpeg4': write_video(root / 'mpeg4.mp4', panning_clip(96, 64, 40), keyint=12),
        'mpeg4_avi': write_video(root / 'mpeg4.avi', panning_clip(96, 64, 40), keyint=12),  # as NTU ships
        'portrait': write_video(root / 'portrait.mp4', panning_clip(192, 336, 12)),
    }


#: dna_mm's two decode-time-scaling openers: decord's reader, dna_mm's PyAV reader (the configs')
INITS = ['ScaledDecordInit', 'ScaledPyAVInit']


@pytest.mark.parametrize('init', INITS)
@pytest.mark.parametrize('codec', ['h264', 'mpeg4', 'mpeg4_avi'])
def test_sorted_decode_gives_decord_decodes_frames(videos, codec, init) -> None:
    """Wrapped, unordered and repeated indices (as SampleFrames makes for a short video): the
    same frames, in the same order, as MMAction2's DecordInit + DecordDecode."""
    inds = [0, 32, 24, 5, 37, 5, 13, 39, 0]
    stock = _run([dict(type='DecordInit'), dict(type='DecordDecode')], videos[codec], frame_inds=inds)
    ours = _run([dict(type=init), dict(type='SortedDecordDecode')], videos[codec], frame_inds=inds)
    assert len(ours['imgs']) == len(inds) and ours['img_shape'] == stock['img_shape']
    for a, b in zip(ours['imgs'], stock['imgs'], strict=True):
        np.testing.assert_array_equal(a, b)
    # the content moves: a reordering bug could not pass
    assert np.abs(ours['imgs'][0].astype(int) - ours['imgs'][1].astype(int)).mean() > 5
    assert np.array_equal(ours['imgs'][3], ours['imgs'][5]) and np.array_equal(
        ours['imgs'][0], ours['imgs'][8]
    )


def _sample(pipeline_types: tuple[str, str], path: Path, short_side) -> list[dict]:
    init = dict(type=pipeline_types[0])
    if short_side is not None:
        init.update(short_side=short_side, min_downscale=1.0)
    return [
        init,
        dict(type='SampleFrames', clip_len=4, frame_interval=3, num_clips=1),
        dict(type=pipeline_types[1]),
    ]


@pytest.mark.parametrize('init', INITS)
@pytest.mark.parametrize(
    'name,short_side,expected',
    [('h264', 96, (96, 160)), ('portrait', 112, (196, 112)), ('mpeg4', 48, (48, 72))],
)
def test_scaled_decode_is_the_downscaled_picture(videos, name, short_side, expected, init) -> None:
    """A video above ``short_side`` comes out at short side ``short_side`` (aspect kept) and shows
    the same picture as the full-size frame resized; one at or below it is read as it is, and so,
    with decord, is one whose scaled width decord 0.6 would return wrongly (72 px: a size error
    otherwise; the PyAV reader scales it)."""
    if init == 'ScaledDecordInit' and not decord_can_scale_to(expected[1]):
        expected = (64, 96)  # read at its own size
    ours = _run(_sample((init, 'SortedDecordDecode'), videos[name], short_side), videos[name])
    full = _run(_sample(('DecordInit', 'DecordDecode'), videos[name], None), videos[name])
    assert ours['img_shape'] == expected and ours['imgs'][0].shape == (*expected, 3)
    assert ours['video_shape'] == full['img_shape']
    import cv2

    for a, b in zip(ours['imgs'], full['imgs'], strict=True):
        ref = cv2.resize(b, expected[::-1], interpolation=cv2.INTER_AREA).astype(int)
        assert np.abs(a.astype(int) - ref).mean() < 6  # same picture, another interpolation
    native = _run(_sample((init, 'SortedDecordDecode'), videos[name], 200), videos[name])
    assert native['img_shape'] == full['img_shape']
    assert 'video_shape' in native


@pytest.mark.parametrize('init', INITS)
def test_a_rotated_video_is_scaled_in_display_orientation(tmp_path, init) -> None:
    """A phone video stored 160x96 with a 90-degree display rotation: decord returns it upright
    (96 wide), so the decode-time size must be taken in that orientation (aspect kept)."""
    import av

    path = tmp_path / 'rotated.mp4'
    with av.open(str(path), 'w') as container:
        stream = container.add_stream('mpeg4', rate=30)
        stream.width, stream.height, stream.pix_fmt = 160, 96, 'yuv420p'
        stream.set_display_rotation(90)
        for i in range(4):
            image = np.full((96, 160, 3), 40 * i, np.uint8)
            image[:16, :32] = 255  # a corner that shows which way the picture is turned
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format='rgb24')))
        container.mux(stream.encode())
    steps = [dict(type=init, short_side=64, min_downscale=1.0), dict(type='SortedDecordDecode')]
    ours = _run(steps, path, frame_inds=[0, 3])
    full = _run([dict(type='DecordInit'), dict(type='DecordDecode')], path, frame_inds=[0, 3])
    assert full['img_shape'] == (160, 96) and ours['video_shape'] == (160, 96)
    assert ours['img_shape'] == (107, 64)
    native = _run([dict(type=init), dict(type='SortedDecordDecode')], path, frame_inds=[0, 3])
    np.testing.assert_array_equal(native['imgs'], full['imgs'])  # turned the same way


def test_scaled_size_and_probe(videos) -> None:
    assert scaled_size(1920, 1080, 320) == (569, 320)
    assert scaled_size(1080, 1920, 224) == (224, 398)
    assert scaled_size(224, 224, 320) is None and scaled_size(340, 256, 256) is None
    # below min_downscale the plain conversion + OpenCV rescale is faster: native size
    assert scaled_size(1920, 1080, 320, min_downscale=3) == (569, 320)
    assert scaled_size(1280, 720, 320, min_downscale=3) is None
    assert scaled_size(1280, 720, 224, min_downscale=3) == (398, 224)
    assert video_size(str(videos['portrait'])) == (192, 336, 0)
    assert not decord_can_scale_to(72) and decord_can_scale_to(569) and decord_can_scale_to(398)
    with pytest.raises(ValueError, match='short_side must be a positive int'):
        TRANSFORMS.build(dict(type='ScaledDecordInit', short_side=0))
    with pytest.raises(ValueError, match='ScaledPyAVInit: short_side must be a positive int'):
        TRANSFORMS.build(dict(type='ScaledPyAVInit', short_side=-1))
    with pytest.raises(ValueError, match='min_downscale must be >= 1'):
        TRANSFORMS.build(dict(type='ScaledDecordInit', short_side=320, min_downscale=0.5))


def test_train_pipeline_keeps_the_geometry(tmp_path) -> None:
    """The configs' train pipeline on a 1920x1080 video (decoded at short side 320): the same
    RandomRescale size (to a pixel) and frames as MMAction2's stock pipeline, for the same
    random state, and the model's input shape; a 960x540 video is decoded at its own size."""
    video = write_video(tmp_path / 'full_hd.mp4', panning_clip(1920, 1080, 8))
    pipeline = Config.fromfile(str(DATASETS / 'video_8x32.py')).train_pipeline
    for seed in range(2):
        cut = [
            s for s in pipeline if s['type'] not in ('RandomCrop', 'Flip', 'FormatShape', 'PackActionInputs')
        ]
        ours = _run(cut, video, seed)
        stock = _run(stock_pipeline(cut), video, seed)
        assert ours['video_shape'] == (1080, 1920) and ours['original_shape'] == (320, 569)
        assert abs(ours['img_shape'][0] - stock['img_shape'][0]) <= 1
        assert abs(ours['img_shape'][1] - stock['img_shape'][1]) <= 1
        np.testing.assert_array_equal(ours['frame_inds'], stock['frame_inds'])
    packed = _run(pipeline, video)
    assert tuple(packed['inputs'].shape) == (1, 3, 8, 224, 224)
    mid = write_video(tmp_path / 'qhd.mp4', panning_clip(960, 540, 4))
    assert _run(pipeline[:3], mid)['original_shape'] == (540, 960)


# the NTU RGB+D 60 recipes (DnA, softmax, Diff; X-Sub and X-View)
NTU_CONFIGS = sorted((REPO / 'configs').glob('timesformer_*_ntu60*.py'))


def _loaders(cfg: Config) -> dict[str, tuple[str, str]]:
    return {
        split: (
            cfg[f'{split}_dataloader'].dataset.ann_file,
            cfg[f'{split}_dataloader'].dataset.data_prefix.video,
        )
        for split in ('train', 'val', 'test')
    }


def _expected(protocol: str, full: bool) -> dict[str, tuple[str, str]]:
    root = 'data/ntu60/videos' if full else 'data/ntu60/person_crops'
    lists = f'data/ntu60/{protocol}' if full else f'data/ntu60/person_crops/{protocol}'
    return {
        'train': (f'{lists}/train.txt', root),
        'val': (f'{lists}/test.txt', root),
        'test': (f'{lists}/test.txt', root),
    }


def _documented_cfg_options(base: Path) -> list[str]:
    """The ``--cfg-options ...`` line written in the comment at the top of ``base``."""
    text = base.read_text()
    block = re.search(r'^#\s+(--cfg-options .*?)(?=\n(?!#\s{5,}))', text, re.S | re.M)
    assert block, f'{base} documents no --cfg-options line'
    lines = [ln.lstrip('#').strip().rstrip('\\').strip() for ln in block.group(1).splitlines()]
    return shlex.split(' '.join(lines))


@pytest.mark.parametrize('path', NTU_CONFIGS, ids=[p.stem for p in NTU_CONFIGS])
def test_ntu60_configs_read_person_crops_and_switch_to_full_frames(path: Path) -> None:
    assert len(NTU_CONFIGS) == 6
    protocol = 'xview' if 'xview' in path.stem else 'xsub'
    cfg = Config.fromfile(str(path))
    assert _loaders(cfg) == _expected(protocol, full=False)
    # the documented switch, parsed as tools/train.py parses it
    argv = _documented_cfg_options(DATASETS / f'ntu60_{protocol}.py')
    parser = argparse.ArgumentParser()
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    cfg.merge_from_dict(parser.parse_args(argv).cfg_options)
    assert _loaders(cfg) == _expected(protocol, full=True)
    # one pipeline serves both inputs: large frames are decoded at the size they are used at
    for split in ('train', 'val', 'test'):
        assert cfg[f'{split}_dataloader'].dataset.pipeline[0]['type'] == 'ScaledPyAVInit'


CONFIGS = sorted((REPO / 'configs').glob('timesformer_*.py'))


@pytest.mark.parametrize('path', CONFIGS, ids=[p.stem for p in CONFIGS])
def test_decode_size_never_below_what_the_pipeline_rescales_to(path: Path) -> None:
    """``ScaledPyAVInit.short_side`` >= the short side any later transform rescales to, so the
    decode-time resize never changes what the model sees beyond interpolation."""
    cfg = Config.fromfile(str(path))
    for split in ('train', 'val', 'test'):
        pipeline = cfg[f'{split}_dataloader'].dataset.pipeline
        init = pipeline[0]
        if init['type'] not in INITS:
            continue
        assert any(s['type'] == 'SortedDecordDecode' for s in pipeline)
        for step in pipeline:
            if step['type'] == 'RandomRescale':
                assert init['short_side'] >= max(step['scale_range']), (path.name, split)
            if step['type'] == 'Resize':
                assert init['short_side'] >= min(step['scale']), (path.name, split)


def test_k400_and_smarthome_say_how_their_videos_are_read() -> None:
    k400 = (DATASETS / 'k400.py').read_text()
    for split in ('train', 'val'):
        cmd = (
            rf'python tools/data/resize_videos.py data/kinetics400/raw/videos_{split} \\\n#\s+'
            rf'data/kinetics400/videos_{split} --short-side 256'
        )
        assert re.search(cmd, k400), split
    cfg = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_k400.py'))
    assert cfg.train_dataloader.dataset.data_prefix.video == 'data/kinetics400/videos_train'
    assert cfg.test_dataloader.dataset.pipeline[0] == dict(
        type='ScaledPyAVInit', short_side=224, io_backend='disk'
    )
    for name in ('cs', 'cv1', 'cv2'):
        assert '640x480' in (DATASETS / f'smarthome_{name}.py').read_text()


@pytest.mark.integration
def test_benchmark_tool_runs_as_a_user_runs_it(capsys) -> None:
    """tools/benchmarks/benchmark_data.py on tiny synthetic videos (DivX packed AVIs): the stock,
    the config's and a --compare pipeline timed, the DataLoader timed, the workers-per-GPU
    column; bad input is one clear line."""
    cmd = [
        sys.executable,
        'tools/benchmarks/benchmark_data.py',
        'configs/timesformer_dna_ntu60.py',
        '--synthetic',
        '400x240',
        '64x48',
        '--num-clips',
        '2',
        '--frames',
        '40',
        '--videos',
        '1',
        '--workers',
        '0',
        '--clips-per-s-per-gpu',
        '100',
        '--container',
        'avi',
        '--bframes',
        '1',
        '--packed',
        '--compare',
        'ScaledDecordInit',
        '--cfg-options',
        'train_dataloader.batch_size=2',
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert 'workers per GPU at 100 clips/s' in out
    rows = {
        tuple(c.strip() for c in ln.split('|')[1:3]): ln for ln in out.splitlines() if ln.startswith('| ')
    }
    for size in ('400x240', '64x48'):
        assert (size, 'stock') in rows and (size, 'config') in rows and (size, 'ScaledDecordInit') in rows
        assert re.search(r'\| [\d.]+x \|', rows[(size, 'config')])  # speed-up over the stock pipeline
    assert re.search(r'^\| 64x48 \| [\d.]+ \|$', out, re.M)  # the DataLoader with 0 workers
    assert 'inputs (1, 3, 8, 224, 224)' in out  # the packed clip of the config's pipeline

    # a missing list: one line naming it, exit status 2 (in-process: one subprocess is enough)
    tool = runpy.run_path(str(REPO / 'tools' / 'benchmarks' / 'benchmark_data.py'), run_name='benchmark_data')
    with pytest.raises(SystemExit) as exc:
        tool['main'](['configs/timesformer_dna_ntu60.py', '--num-clips', '1'])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert 'benchmark_data.py: error: ' in err and 'data/ntu60/person_crops/xsub/train.txt' in err
    assert 'Traceback' not in err
