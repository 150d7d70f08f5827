"""The codec / container matrix: for every kind of file real datasets hold
(``dna_mm/preparation/video_kinds.py``, written at test time by PyAV's bundled encoders), dna_mm's PyAV
reader returns exactly the frames FFmpeg decodes in sequence, in any access order, by the fast
(seeking) path wherever that is exact; broken files are a DataError naming the file and what
is wrong, fast; training skips and counts them, testing lists them."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import load_tool

from dna_mm.datasets.video_reader import KeyframeReader, frames_in_sequence, open_video
from dna_mm.errors import DataError
from dna_mm.preparation.video_kinds import BROKEN, KINDS, encode, encoder, write_broken, write_kind
from dna_mm.synthetic.videos import pack_bframes

#: kinds read by decoding in sequence (the exact path), and why; every other kind seeks
IN_SEQUENCE = {
    'mpeg4_packed_avi': 'DivX packed B-frames',
    'mpeg2_ps': 'decoding from the keyframe of pts',  # MPEG-PS seeks land past the keyframe
}
#: SampleFrames' wrapped clip on a 40-frame video (8 frames at interval 32 would reach 256)
WRAPPED = [0, 32, 24, 5, 37, 5, 13, 39, 0]


@pytest.fixture(scope='session')
def kind_files(tmp_path_factory) -> dict[str, Path]:
    """Every kind this PyAV can write, once per test session (a second or two)."""
    root = tmp_path_factory.mktemp('kinds')
    return {name: write_kind(name, root) for name, kind in KINDS.items() if encoder(kind) is not None}


@pytest.fixture(scope='session')
def broken_files(tmp_path_factory) -> dict[str, Path]:
    return write_broken(tmp_path_factory.mktemp('broken'))


def _file(kind_files: dict[str, Path], name: str) -> Path:
    if name not in kind_files:
        pytest.skip(f'{name}: this PyAV has no {KINDS[name].codec} encoder')
    return kind_files[name]


def _scaled_in_sequence(path: Path, size: tuple[int, int]) -> list[np.ndarray]:
    """Every frame decoded in sequence, scaled to ``size = (w, h)`` as the reader scales."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = 'NONE'
        return [
            f.reformat(width=size[0], height=size[1], format='rgb24', interpolation='BILINEAR').to_ndarray()
            for f in container.decode(stream)
        ]


@pytest.mark.parametrize('name', list(KINDS))
def test_every_frame_in_any_order_is_the_frame_decoded_in_sequence(kind_files, name) -> None:
    """The reader alone (increasing, random single frames, backward and repeated), then a wrapped
    clip through ScaledPyAVInit + SortedDecordDecode as the configs use them, at the stored size
    and scaled at decode time: the frames decoded in sequence, exactly."""
    from mmaction.registry import TRANSFORMS

    path = _file(kind_files, name)
    pts, reference = frames_in_sequence(str(path))
    reader = KeyframeReader(str(path), name=str(path))
    n = len(reference)
    assert len(reader) == n == KINDS[name].frames - (KINDS[name].cut or 0)
    order = np.random.default_rng(0).permutation(n).tolist()
    for call in ([*range(n)], *[[i] for i in order], [n - 1, 0, n // 2, n // 2, 1]):
        np.testing.assert_array_equal(
            reader.get_batch(call), np.stack([reference[i] for i in call]), str(call)
        )
    # the fast path wherever it is exact; the exact path, and why, elsewhere
    assert (reader.fallback or '').startswith(IN_SEQUENCE.get(name, '')), reader.fallback
    assert (reader.fallback is None) == (name not in IN_SEQUENCE), reader.fallback
    # the frames move (an indexing error could not pass) and the decoder's timestamps increase,
    # except where the container's are not the frames' (then ordering by pts would swap frames)
    assert np.abs(reference[0].astype(int) - reference[-1].astype(int)).mean() > 5
    assert (pts == sorted(pts)) == (name != 'mpeg4_packed_avi')

    inds = [i % n for i in WRAPPED]
    for short_side in (None, 24):
        init = dict(type='ScaledPyAVInit', short_side=short_side, min_downscale=1.0)
        results = dict(filename=str(path), start_index=0, modality='RGB', frame_inds=np.array(inds))
        results = TRANSFORMS.build(dict(type='SortedDecordDecode'))(TRANSFORMS.build(init)(results))
        assert results['total_frames'] == n and len(results['imgs']) == len(inds)
        if short_side is not None:
            h, w = results['img_shape']
            assert min(h, w) == short_side
            reference = _scaled_in_sequence(path, (w, h))
        np.testing.assert_array_equal(np.stack(results['imgs']), np.stack([reference[i] for i in inds]))


def test_packed_bframes_decode_as_the_unpacked_stream(tmp_path) -> None:
    """The DivX packed file of the matrix holds the same pictures as FFmpeg's own AVI it was
    packed from: FFmpeg decodes the two alike, frame for frame (the packing is real)."""
    kind = KINDS['mpeg4_packed_avi']
    plain = encode(kind, tmp_path / 'plain.avi')
    packed = pack_bframes(plain, tmp_path / 'packed.avi')
    container, stream = open_video(str(packed), 'packed.avi')
    with container:
        chunks = [p.size for p in container.demux(stream) if p.size]
    assert min(chunks) < 20 and len(chunks) == kind.frames  # N-VOP placeholders; a chunk a frame
    _, theirs = frames_in_sequence(str(plain))
    _, ours = frames_in_sequence(str(packed))
    np.testing.assert_array_equal(np.stack(ours), np.stack(theirs))


@pytest.mark.parametrize('name', list(BROKEN))
def test_a_broken_file_is_a_data_error_naming_it_and_what_is_wrong(broken_files, name) -> None:
    from mmaction.registry import TRANSFORMS

    path = str(broken_files[name])
    for opener in (
        lambda: KeyframeReader(path, name=path).get_batch([0]),
        lambda: TRANSFORMS.build(dict(type='ScaledPyAVInit', short_side=32, min_downscale=1.0))(
            dict(filename=path, start_index=0, modality='RGB')
        ),
    ):
        start = time.perf_counter()
        with pytest.raises(DataError, match=f'^{re.escape(path)}: {BROKEN[name]}'):
            opener()
        assert time.perf_counter() - start < 5


def _damage_keyframe(path: Path, out: Path, index: int) -> Path:
    """``path`` with the second half of the packet of the ``index``-th keyframe overwritten."""
    container, stream = open_video(str(path), path.name)
    with container:
        packet = [p for p in container.demux(stream) if p.size and p.is_keyframe][index]
        start, size = packet.pos + packet.size // 2, packet.size // 2
    data = bytearray(path.read_bytes())
    data[start : start + size] = np.random.default_rng(0).bytes(size)
    out.write_bytes(bytes(data))
    return out


def test_damaged_frame_data(kind_files, tmp_path) -> None:
    """A damaged H.264 keyframe is concealed from the frames decoded before it, which a seek
    does not decode: the reader notices the damaged frame and reads in sequence (exact); a
    damaged MJPEG frame does not decode at all: a DataError naming the file and the frame."""
    damaged = _damage_keyframe(kind_files['h264_bframes'], tmp_path / 'damaged.mp4', 2)
    _, reference = frames_in_sequence(str(damaged))
    reader = KeyframeReader(str(damaged), name=str(damaged))
    inds = [len(reference) - 1, 3, 20, 17, 0]
    np.testing.assert_array_equal(reader.get_batch(inds), np.stack([reference[i] for i in inds]))
    assert reader.fallback.startswith('damaged frame data at pts'), reader.fallback
    mjpeg = _damage_keyframe(kind_files['mjpeg_full_range'], tmp_path / 'damaged.avi', 5)
    with pytest.raises(DataError, match=f'{re.escape(str(mjpeg))}: frame 5 of 40: damaged frame data'):
        KeyframeReader(str(mjpeg), name=str(mjpeg)).get_batch([0, 5, 30])


def test_a_time_limit_per_file(kind_files) -> None:
    path = str(kind_files['h264_bframes'])
    with pytest.raises(DataError, match=f'{path}: opening .*took more than 1e-06 s \\(time_limit\\)'):
        KeyframeReader(path, name=path, time_limit=1e-6)
    reader = KeyframeReader(path, name=path, time_limit=None)  # no limit
    assert len(reader.get_batch([0, 39])) == 2
    from mmaction.registry import TRANSFORMS

    with pytest.raises(ValueError, match='time_limit must be > 0 or None, got 0'):
        TRANSFORMS.build(dict(type='ScaledPyAVInit', time_limit=0))


def test_training_skips_and_counts_broken_files_and_testing_lists_them(
    kind_files, broken_files, tmp_path
) -> None:
    from mmaction.registry import DATASETS

    listed = [kind_files['h264_bframes'], *broken_files.values()]
    ann = tmp_path / 'list.txt'
    ann.write_text(''.join(f'{p} 0\n' for p in listed))
    pipeline = [
        dict(type='ScaledPyAVInit', short_side=32, min_downscale=1.0),
        dict(type='SampleFrames', clip_len=4, frame_interval=2, num_clips=1),
        dict(type='SortedDecordDecode'),
    ]
    train = DATASETS.build(
        dict(type='RobustVideoDataset', ann_file=str(ann), pipeline=pipeline, num_classes=2)
    )
    assert train.prepare_data(0)['imgs'][0].shape[0] == 32
    assert all(train.prepare_data(i) is None for i in range(1, len(listed)))
    assert train.skipped.value == len(broken_files)

    test = DATASETS.build(
        dict(type='RobustVideoDataset', ann_file=str(ann), pipeline=pipeline, num_classes=2, test_mode=True)
    )
    test.report_unreadable = True  # as UnreadableVideosTestLoop (tools/test.py) sets it
    for i, (name, path) in enumerate(broken_files.items(), start=1):
        where, reason = test.prepare_data(i)['unreadable']
        assert where == str(path) and reason.startswith(f'DataError: {path}: '), reason
        assert re.search(BROKEN[name], reason), reason


def _source_tree(folder: Path, files: dict[str, Path], name_as) -> dict[str, Path]:
    """Links named ``name_as(name, path)`` under ``folder`` to ``files``; returns link -> source."""
    folder.mkdir(parents=True)
    links = {}
    for name, path in files.items():
        link = folder / name_as(name, path)
        link.symlink_to(path)
        links[link.name] = path
    return links


#: kinds the person-crop test of ``make test`` reads (``make test-slow``: all)
CROP_KINDS = [
    'mpeg4_packed_avi',
    'mpeg4_bframes_avi',
    'mjpeg_full_range',
    'h264_edit_list',
    'hevc',
    'av1_mp4',
]


def test_resize_videos_reads_every_kind_and_lists_the_broken(
    kind_files, broken_files, tmp_path, capsys
) -> None:
    """Every kind comes out with the frames of its sequential decode (counted by decord, the
    tool's own verification); each broken file is in failed.txt with what is wrong."""
    import decord

    resize = load_tool('tools/data/resize_videos.py')

    sources = {**kind_files, **{f'broken_{n}': p for n, p in broken_files.items()}}
    _source_tree(tmp_path / 'src', sources, lambda name, path: name + path.suffix)
    out = tmp_path / 'out'
    assert (
        resize.main(
            [str(tmp_path / 'src'), str(out), '--short-side', '40', '--workers', '1', '--keyint', '8']
        )
        == 1
    )
    assert f'{len(sources)} videos: {len(kind_files)} done, 0 skipped' in capsys.readouterr().out
    for name, path in kind_files.items():
        reader = decord.VideoReader(str(out / f'{name}.mp4'))
        assert len(reader) == len(frames_in_sequence(str(path))[1]), name
        assert min(reader[0].shape[:2]) == 40
    failed = dict(line.split('\t') for line in (out / 'failed.txt').read_text().splitlines())
    assert set(failed) == {f'broken_{n}{p.suffix}' for n, p in broken_files.items()}
    for name in broken_files:
        reason = failed[f'broken_{name}{Path(name).suffix}']
        assert reason.startswith('source unreadable: DataError: ') and re.search(BROKEN[name], reason), reason


def _person_crops(kinds: dict[str, Path], broken: dict[str, Path], root: Path) -> None:
    """The NTU person-crop tool on ``kinds`` and ``broken`` files named as NTU samples (no
    skeletons: whole frames): each kind is cropped with its frame count, the broken fail."""
    person_crops = load_tool('tools/data/ntu60/person_crops.py')

    files = {**kinds, **{f'broken_{n}': p for n, p in broken.items()}}
    names = {name: f'S001C001P001R001A{i + 1:03d}' for i, name in enumerate(files)}
    _source_tree(
        root / 'videos',
        files,
        lambda name, path: f'{names[name]}_rgb{".mp4" if path.suffix == ".mp4" else ".avi"}',
    )
    (root / 'skeletons').mkdir()
    out = root / 'crops'
    argv = [
        '--video-dir',
        str(root / 'videos'),
        '--skeleton-dir',
        str(root / 'skeletons'),
        '--out-dir',
        str(out),
    ]
    assert person_crops.main([*argv, '--size', '32', '--workers', '1', '--keyint', '8']) == (
        1 if broken else 0
    )
    import decord

    for name, path in kinds.items():
        assert len(decord.VideoReader(str(out / f'{names[name]}.mp4'))) == len(
            frames_in_sequence(str(path))[1]
        ), name
    failed = (
        dict(line.split('\t') for line in (out / 'failed.txt').read_text().splitlines()) if broken else {}
    )
    assert set(failed) == {names[f'broken_{n}'] for n in broken}
    for name in broken:
        assert re.search(BROKEN[name], failed[names[f'broken_{name}']]), failed


def test_person_crops_read_the_kinds_ntu_holds_and_list_the_broken(
    kind_files, broken_files, tmp_path
) -> None:
    kinds = {name: kind_files[name] for name in CROP_KINDS if name in kind_files}
    _person_crops(kinds, broken_files, tmp_path)


@pytest.mark.slow
def test_person_crops_read_every_kind(kind_files, tmp_path) -> None:
    _person_crops(kind_files, {}, tmp_path)


def test_check_decoding_lists_what_each_reader_gets_wrong(kind_files, broken_files, capsys) -> None:
    main = load_tool('tools/data/check_decoding.py').main

    files = [kind_files['h264_bframes'], kind_files['mpeg4_bframes_avi'], broken_files['empty.mp4']]
    assert main([str(f) for f in files]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert rows[0].endswith('| h264 yuv420p, mov | 40 | exact | exact |'), rows
    # decord on random access: frame 11 gives another frame (docs/datasets/decoding.md)
    assert re.search(r'\| 40 \| exact \| random: \d+ wrong \(11 gives \d+', rows[1]), rows
    assert 'unreadable' in rows[2] and 'empty file (0 bytes)' in rows[2], rows
    with pytest.raises(SystemExit) as done:
        main(['--kinds', 'nope'])
    assert done.value.code == 2 and 'unknown kind(s) nope' in capsys.readouterr().err


def test_decord_reader_errors_name_the_file(broken_files) -> None:
    from mmaction.registry import TRANSFORMS

    for name in ('garbage.mp4', 'empty.mp4'):
        path = str(broken_files[name])
        with pytest.raises(DataError, match=f'^{re.escape(path)}: decord cannot read it'):
            TRANSFORMS.build(dict(type='ScaledDecordInit'))(
                dict(filename=path, start_index=0, modality='RGB')
            )


@pytest.mark.slow
@pytest.mark.integration
def test_check_decoding_tool_as_a_user_runs_it(tmp_path) -> None:
    """The table of docs/datasets/decoding.md: dna_mm's reader exact on every kind (exit 0)."""
    from conftest import run_tool

    proc = run_tool(['tools/data/check_decoding.py', '--kinds', '--out-dir', str(tmp_path)])
    rows = [line for line in proc.stdout.splitlines() if line.startswith('| ') and '(' in line]
    written = [name for name, kind in KINDS.items() if encoder(kind) is not None]
    assert len(rows) == len(written)
    assert all(row.split(' | ')[3] == 'exact' for row in rows), proc.stdout


@pytest.mark.slow
def test_train_and_test_tools_with_broken_videos(tiny_video_set, broken_files, tmp_path) -> None:
    """tools/train.py and tools/test.py on the demo with the configs' reader and every broken
    file in its lists: training skips and counts them, testing names each with what is wrong."""
    import argparse
    import shutil

    import torch
    from conftest import DEMO_CONFIG, run_main, tiny_run_options
    from mmaction.registry import MODELS
    from mmengine.config import Config, DictAction
    from mmengine.registry import init_default_scope

    videos = tmp_path / 'videos'
    shutil.copytree(tiny_video_set / 'videos', videos)
    for name, path in broken_files.items():
        shutil.copy(path, videos / f'broken_{name}')
    broken = ''.join(f'broken_{name} 0\n' for name in broken_files)
    for split in ('train', 'test'):
        (tmp_path / f'{split}.txt').write_text((tiny_video_set / f'{split}.txt').read_text() + broken)
    opts = [*tiny_run_options(tmp_path), f'val_dataloader.dataset.ann_file={tiny_video_set}/test.txt']
    for split in ('train', 'val', 'test'):  # the configs' reader in place of the demo's decord
        opts += [
            f'{split}_dataloader.dataset.pipeline.0.type=ScaledPyAVInit',
            f'{split}_dataloader.dataset.pipeline.2.type=SortedDecordDecode',
        ]
    train = run_main(
        ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path / 'w'), '--cfg-options', *opts]
    )
    log = train.stdout + train.stderr
    for name in broken_files:
        assert re.search(
            f'skipped unreadable video {re.escape(str(videos))}/broken_{re.escape(name)} ', log
        ), name
    assert re.search(r'epoch 1: \d+ unreadable training video\(s\) skipped', log)

    init_default_scope('mmaction')
    cfg = Config.fromfile(DEMO_CONFIG)
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg.merge_from_dict(parser.parse_args(['--o', *opts]).o)
    checkpoint = tmp_path / 'tiny.pth'
    torch.save(dict(state_dict=MODELS.build(cfg.model).state_dict()), checkpoint)
    test = ['tools/test.py', DEMO_CONFIG, str(checkpoint), '--work-dir', str(tmp_path / 'test')]
    test = run_main([*test, '--cfg-options', *opts], check=False)
    assert test.returncode == 2, test.stderr[-3000:]
    total = len(broken_files) + len((tiny_video_set / 'test.txt').read_text().splitlines())
    assert f'{len(broken_files)} of the {total} test videos cannot be read' in test.stderr
    for name in broken_files:
        path = re.escape(str(videos / f'broken_{name}'))
        assert re.search(f'{path}: DataError: {path}: {BROKEN[name]}', test.stderr), (name, test.stderr)
