"""Video data: protocol builders, the K400 checker, the demo set, robust loading, resume."""

from __future__ import annotations

import json
import re
from pathlib import Path

import decord
import numpy as np
import pytest
import torch
from conftest import DEMO_CONFIG, run_main, run_tool, tiny_run_options, tiny_runner
from mmaction.registry import DATASETS
from mmaction.utils import register_all_modules
from tolerance import ROUNDING, assert_close_as

from dna_mm.datasets import label_map, ntu60_splits, smarthome_splits
from dna_mm.synthetic import motion_clips
from dna_mm.synthetic.motion_clips import (
    CLASSES,
    MotionDatasetSpec,
    ensure_generated,
    ensure_motion_dataset,
    generator_key,
)

register_all_modules()

# An independent statement of the protocols (the published protocols) to check the builders against.
SUBJECTS = [2, 3, 4, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 25]
CS_TRAIN, CS_VAL = {3, 4, 6, 7, 9, 12, 13, 15, 17}, {19, 25}
CV_ACTS = ['Drink.Fromcan', 'Walk']  # in the 19 cross-view classes
CS_ONLY = 'Cook.Cut'  # one of the 31, not one of the 19
ACTS = CV_ACTS + [CS_ONLY, 'Pour.Fromcup']


def _touch(root: Path, names: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in names:
        (root / n).write_bytes(b'')
    return root


@pytest.fixture
def smarthome_dir(tmp_path) -> Path:
    names = [f'{a}_p{p:02d}_r00_v{c:02d}_c{c:02d}.mp4' for a in ACTS for p in SUBJECTS for c in range(1, 8)]
    return _touch(tmp_path / 'smarthome', names)


def _lines(path: Path) -> list[tuple[str, int]]:
    return [(ln.split()[0], int(ln.split()[1])) for ln in path.read_text().splitlines()]


@pytest.mark.integration
def test_smarthome_cs_via_the_cli(smarthome_dir, tmp_path) -> None:
    out = run_tool(
        [
            'tools/data/smarthome/build_annotations.py',
            '--video-dir',
            str(smarthome_dir),
            '--out-dir',
            str(tmp_path / 'cs'),
            '--protocol',
            'CS',
        ]
    ).stdout
    cs = label_map('smarthome_cs_classes')
    train, val, test = (_lines(tmp_path / 'cs' / f'{s}.txt') for s in ('train', 'val', 'test'))
    assert (len(train), len(val), len(test)) == (3 * 9 * 7, 3 * 2 * 7, 3 * 7 * 7)
    assert 'train:    189 videos, 3/31 classes' in out and 'left out: 126 videos (Pour.Fromcup' in out
    for path, label in train + val + test:
        assert cs[label] == path.split('_p')[0] and 'Pour.Fromcup' not in path
    assert {int(p.split('_p')[1][:2]) for p, _ in train} == CS_TRAIN
    assert {int(p.split('_p')[1][:2]) for p, _ in val} == CS_VAL
    assert cs == sorted(cs) and len(cs) == 31


@pytest.mark.parametrize('protocol,train_cams', [('CV1', {1}), ('CV2', {1, 3, 4, 6, 7})])
def test_smarthome_cross_view(smarthome_dir, protocol, train_cams) -> None:
    paths = [p.name for p in smarthome_dir.iterdir()]
    res = smarthome_splits(paths, protocol)
    cv = label_map('smarthome_cv_classes')
    assert len(cv) == 19
    n = 2 * len(SUBJECTS)  # two cross-view activities, one video per subject and camera
    assert [len(res.splits[s]) for s in ('train', 'val', 'test')] == [n * len(train_cams), n, n]
    assert {cv[label] for _, label in res.splits['train']} == set(CV_ACTS)
    assert {int(p[-6:-4]) for p, _ in res.splits['test']} == {2}
    assert {int(p[-6:-4]) for p, _ in res.splits['val']} == {5}
    assert {int(p[-6:-4]) for p, _ in res.splits['train']} == train_cams


def test_smarthome_refuses_a_malformed_name(tmp_path) -> None:
    root = _touch(tmp_path / 'bad', ['Walk_p02_r00_v02_c03.mp4', 'Walk_p2_r00_v02.mp4'])
    proc = run_main(
        [
            'tools/data/smarthome/build_annotations.py',
            '--video-dir',
            str(root),
            '--out-dir',
            str(tmp_path / 'o'),
            '--protocol',
            'CS',
        ],
        check=False,
    )
    assert proc.returncode == 2 and 'Walk_p2_r00_v02.mp4' in proc.stderr
    assert not (tmp_path / 'o').exists()
    with pytest.raises(ValueError, match='unknown Smarthome activity'):
        smarthome_splits(['Juggle_p02_r00_v02_c03.mp4'], 'CS')


@pytest.fixture
def ntu_dir(tmp_path) -> Path:
    names = [
        f'S001C{c:03d}P{p:03d}R001A{a:03d}' + ('_rgb.avi' if p % 2 else '.mp4')
        for p in range(1, 41)
        for c in (1, 2, 3)
        for a in (1, 60)
    ]
    names.append('S001C002P005R002A008_rgb.avi')  # listed: missing skeleton
    return _touch(tmp_path / 'ntu', names)


@pytest.mark.integration
def test_ntu60_xsub_and_xview(ntu_dir, tmp_path) -> None:
    out = run_tool(
        [
            'tools/data/ntu60/build_annotations.py',
            '--video-dir',
            str(ntu_dir),
            '--out-dir',
            str(tmp_path / 'xsub'),
            '--protocol',
            'xsub',
        ]
    ).stdout
    train, test = _lines(tmp_path / 'xsub' / 'train.txt'), _lines(tmp_path / 'xsub' / 'test.txt')
    assert (len(train), len(test)) == (20 * 3 * 2 + 1, 20 * 3 * 2)
    assert 'train:    121 videos' in out
    assert {label for _, label in train} == {0, 59, 7}
    assert all(
        int(p[9:12]) in {1, 2, 4, 5, 8, 9, 13, 14, 15, 16, 17, 18, 19, 25, 27, 28, 31, 34, 35, 38}
        for p, _ in train
    )
    paths = [p.name for p in ntu_dir.iterdir()]
    xview = ntu60_splits(paths, 'xview')
    assert (len(xview.splits['train']), len(xview.splits['test'])) == (40 * 2 * 2 + 1, 40 * 2)
    assert {p[4:8] for p, _ in xview.splits['test']} == {'C001'}


def test_ntu60_missing_skeleton_option(ntu_dir, tmp_path) -> None:
    out = run_main(
        [
            'tools/data/ntu60/build_annotations.py',
            '--video-dir',
            str(ntu_dir),
            '--out-dir',
            str(tmp_path / 'x'),
            '--protocol',
            'xsub',
            '--exclude-missing-skeletons',
        ]
    ).stdout
    assert 'left out: 1 videos (listed in ntu60_samples_with_missing_skeletons)' in out
    assert len(_lines(tmp_path / 'x' / 'train.txt')) == 120
    assert len(label_map('ntu60_samples_with_missing_skeletons')) == 302


def test_ntu60_refuses_bad_names(tmp_path) -> None:
    with pytest.raises(ValueError, match='S001C001P001R001A061_rgb.avi.*NTU-120'):
        ntu60_splits(['S001C001P001R001A061_rgb.avi'], 'xsub')
    with pytest.raises(ValueError, match='S01C001P001R001A001.avi: not an NTU'):
        ntu60_splits(['S01C001P001R001A001.avi'], 'xsub')


@pytest.mark.integration
def test_kinetics_checker(tmp_path) -> None:
    videos = _touch(tmp_path / 'k400' / 'abseiling', ['a_000000_000010.mp4'])
    ann = tmp_path / 'list.txt'
    ann.write_text('abseiling/a_000000_000010.mp4 0\n')
    cmd = [
        'tools/data/kinetics/check_annotations.py',
        '--ann-file',
        str(ann),
        '--video-dir',
        str(videos.parent),
    ]
    assert 'OK' in run_tool(cmd).stdout
    ann.write_text(
        'abseiling/a_000000_000010.mp4 0\nabseiling/gone_000000_000010.mp4 3\n'
        'abseiling/a_000000_000010.mp4 400\nbroken line with words\n'
    )
    proc = run_main(cmd, check=False)
    assert proc.returncode == 1
    assert 'missing on disk: 1' in proc.stdout and 'gone_000000_000010.mp4' in proc.stdout
    assert 'labels outside [0, 400): 1' in proc.stdout and 'malformed lines: 1' in proc.stdout
    proc = run_main([*cmd[:2], str(tmp_path / 'gone.txt'), *cmd[3:]], check=False)
    assert (
        proc.returncode == 2
        and f'check_annotations.py: error: --ann-file {tmp_path / "gone.txt"} does not exist' in proc.stderr
    )


def test_demo_generator_is_decodable_balanced_and_labelled(tmp_path) -> None:
    spec = MotionDatasetSpec(train_per_class=3, test_per_class=1, seed=3)
    root = ensure_motion_dataset(tmp_path / 'demo', spec)
    train = _lines(root / 'train.txt')
    assert sorted(np.bincount([label for _, label in train]).tolist()) == [3] * len(CLASSES)
    for path, label in train:
        frames = (
            decord.VideoReader(str(root / 'videos' / path))
            .get_batch(list(range(spec.num_frames)))
            .asnumpy()
            .astype(float)
        )  # [T, H, W, 3] RGB
        assert frames.shape == (spec.num_frames, spec.size, spec.size, 3)
        red = np.clip(frames[..., 0] - frames[..., 1] - 60, 0, None)  # the target only
        ys, xs = np.arange(spec.size)[:, None], np.arange(spec.size)[None, :]
        cy = (red * ys).sum((1, 2)) / red.sum((1, 2))
        cx = (red * xs).sum((1, 2)) / red.sum((1, 2))
        moved = (abs(cy[-1] - cy[0]) > 5, abs(cx[-1] - cx[0]) > 5)
        expected = {
            'still': (False, False),
            'horizontal': (False, True),
            'vertical': (True, False),
            'diagonal': (True, True),
        }[CLASSES[label]]
        assert moved == expected, (path, cy[[0, -1]], cx[[0, -1]])
    mtime = (root / 'meta.json').stat().st_mtime_ns
    ensure_motion_dataset(tmp_path / 'demo', spec)  # cached: not regenerated
    assert (root / 'meta.json').stat().st_mtime_ns == mtime
    # a set written by another version of the generator under the same spec is written again
    meta = json.loads((root / 'meta.json').read_text())
    assert meta['generator'] == generator_key(motion_clips.__file__)
    older = dict(meta['generator'], source_sha256='0' * 64)
    (root / 'meta.json').write_text(json.dumps(dict(meta, generator=older)))
    first = root / 'videos' / train[0][0]
    first.write_bytes(b'stale')
    ensure_motion_dataset(tmp_path / 'demo', spec)
    assert json.loads((root / 'meta.json').read_text()) == meta and first.read_bytes()[:5] != b'stale'


def test_a_set_written_again_replaces_the_old_one_whole(tmp_path) -> None:
    """Writing a set again (another OpenCV, another generator) puts the new set in place whole: a
    reader holding a file of the old set keeps reading it complete, the folder never shows a
    half-written file, an interrupted write leaves the old set, and a folder that is not a
    generated set is refused, not replaced."""
    from dna_mm.errors import ConfigError

    spec = MotionDatasetSpec(train_per_class=1, test_per_class=1, seed=1)
    seen = []

    def write(folder: Path, rng) -> None:
        seen.append(folder)
        (folder / 'clip.txt').write_text(f'set {len(seen)}\n')

    root = tmp_path / 'set'
    ensure_generated(root, spec, CLASSES, write, (motion_clips.__file__,))
    held = open(root / 'clip.txt')  # a run reading the old set
    meta = json.loads((root / 'meta.json').read_text())
    (root / 'meta.json').write_text(json.dumps(dict(meta, generator=dict(meta['generator'], opencv='0'))))
    ensure_generated(root, spec, CLASSES, write, (motion_clips.__file__,))
    assert seen[1] != root and (root / 'clip.txt').read_text() == 'set 2\n'  # written beside, then moved
    assert held.read() == 'set 1\n'
    held.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ['set']  # nothing left beside it

    def interrupted(folder: Path, rng) -> None:
        (folder / 'clip.txt').write_text('half')
        raise KeyboardInterrupt

    (root / 'meta.json').write_text('{}')
    with pytest.raises(KeyboardInterrupt):
        ensure_generated(root, spec, CLASSES, interrupted, (motion_clips.__file__,))
    assert (root / 'clip.txt').read_text() == 'set 2\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['set']

    mine = tmp_path / 'mine'
    mine.mkdir()
    (mine / 'notes.txt').write_text('mine')
    with pytest.raises(ConfigError, match='not a generated set'):
        ensure_generated(mine, spec, CLASSES, write, (motion_clips.__file__,))
    assert (mine / 'notes.txt').read_text() == 'mine'


def test_generator_key_follows_the_source(tmp_path) -> None:
    source = tmp_path / 'generator.py'
    source.write_text('x = 1\n')
    before = generator_key(source)
    source.write_text('x = 2\n')
    assert generator_key(source)['source_sha256'] != before['source_sha256']


def _dataset_cfg(ann: Path, videos: Path, **kw) -> dict:
    return dict(
        type='RobustVideoDataset', ann_file=str(ann), data_prefix=dict(video=str(videos)), pipeline=[], **kw
    )


def test_missing_files_and_bad_labels_fail_at_build(tiny_video_set, tmp_path) -> None:
    lines = (tiny_video_set / 'train.txt').read_text().splitlines()
    ann = tmp_path / 'missing.txt'
    ann.write_text('\n'.join(lines + [f'gone_{i}.mp4 0' for i in range(7)]) + '\n')
    with pytest.raises(
        FileNotFoundError,
        match=r'missing\.txt: 7 of 15 listed videos are missing'
        r'(.|\n)*line 9: \S*gone_0\.mp4(.|\n)*line 13: '
        r'\S*gone_4\.mp4\n  \.\.\.',
    ):
        DATASETS.build(_dataset_cfg(ann, tiny_video_set / 'videos', num_classes=4))
    ann.write_text('\n'.join(lines[:3] + [lines[3].split()[0] + ' 4']) + '\n')
    with pytest.raises(ValueError, match=r'missing\.txt:4: label 4 outside \[0, 4\)'):
        DATASETS.build(_dataset_cfg(ann, tiny_video_set / 'videos', num_classes=4))
    ann.write_text(lines[0] + ' extra\n')
    with pytest.raises(ValueError, match=r'missing\.txt:1: expected "path label"'):
        DATASETS.build(_dataset_cfg(ann, tiny_video_set / 'videos', num_classes=4))
    ann.write_bytes(lines[0].encode() + b'\n' + lines[1].encode() + b'\nv\xe9deo.mp4 1\n')
    with pytest.raises(ValueError, match=r"missing\.txt:3: not UTF-8 text \(byte 0xe9 at column 2\)"):
        DATASETS.build(_dataset_cfg(ann, tiny_video_set / 'videos', num_classes=4))
    ds = DATASETS.build(_dataset_cfg(tiny_video_set / 'train.txt', tiny_video_set / 'videos', num_classes=4))
    assert len(ds) == 8


def test_a_line_without_a_label_is_named_unless_the_list_has_none(tiny_video_set, tmp_path) -> None:
    """A label left out of one line would be trained on, or scored by a test, as label -1; an OOD
    list (videos outside the model's classes) is paths alone, with ``labels_optional``."""
    lines = (tiny_video_set / 'test.txt').read_text().splitlines()
    ann = tmp_path / 'test.txt'
    ann.write_text('\n'.join([lines[0], lines[1].split()[0], *lines[2:]]) + '\n')
    with pytest.raises(ValueError) as err:
        DATASETS.build(_dataset_cfg(ann, tiny_video_set / 'videos', num_classes=4, test_mode=True))
    assert str(err.value) == (
        f'{ann}:2: expected "path label", got {lines[1].split()[0]!r} (no label; a list of videos '
        'without labels, such as an OOD list, needs labels_optional=True)'
    )
    ood = DATASETS.build(
        _dataset_cfg(ann, tiny_video_set / 'videos', num_classes=4, test_mode=True, labels_optional=True)
    )
    assert [ood.get_data_info(i)['label'] for i in range(len(ood))] == [int(lines[0].split()[1]), -1] + [
        int(ln.split()[1]) for ln in lines[2:]
    ]


def _corrupt(path: Path) -> Path:
    path.write_bytes(b'\x00\x00\x00\x18ftypmp42' + bytes(range(256)) * 8)
    return path


def test_when_every_retry_fails_the_error_lists_the_videos(tmp_path) -> None:
    videos = tmp_path / 'videos'
    videos.mkdir()
    names = [_corrupt(videos / f'corrupt_{i}.mp4').name for i in range(3)]
    ann = tmp_path / 'train.txt'
    ann.write_text(''.join(f'{n} 0\n' for n in names))
    pipeline = [
        dict(type='DecordInit'),
        dict(type='SampleFrames', clip_len=2, num_clips=1),
        dict(type='DecordDecode'),
    ]
    ds = DATASETS.build(dict(_dataset_cfg(ann, videos, num_classes=4, max_refetch=2), pipeline=pipeline))
    with pytest.raises(RuntimeError) as err:
        ds[0]
    message = str(err.value)
    assert message.startswith(f'{ann}: 3 training videos in a row could not be used (max_refetch=2)')
    listed = re.findall(rf'\n  ({re.escape(str(videos))}/corrupt_\d\.mp4): (\w+Error): ', message)
    assert len(listed) == 3 and listed[0][0] == str(videos / 'corrupt_0.mp4'), message
    assert ds.skipped.value == 3


@pytest.mark.integration
def test_training_survives_corrupt_videos_and_counts_them_over_workers(tiny_video_set, tmp_path) -> None:
    videos = tmp_path / 'videos'
    videos.mkdir()
    for f in (tiny_video_set / 'videos').iterdir():
        (videos / f.name).symlink_to(f)
    for i in range(2):
        _corrupt(videos / f'corrupt_{i}.mp4')
    ann = tmp_path / 'train.txt'
    ann.write_text((tiny_video_set / 'train.txt').read_text() + 'corrupt_0.mp4 1\ncorrupt_1.mp4 2\n')
    opts = tiny_run_options(tiny_video_set) + [
        f'train_dataloader.dataset.ann_file={ann}',
        f'train_dataloader.dataset.data_prefix.video={videos}',
        'train_dataloader.num_workers=2',
        'train_dataloader.batch_size=5',
        'train_cfg.max_epochs=2',
        'train_cfg.val_interval=2',
    ]
    proc = run_tool(
        ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path / 'w'), '--cfg-options', *opts]
    )
    log = proc.stdout + proc.stderr
    assert f'skipped unreadable video {videos}/corrupt_0.mp4' in log
    assert f'skipped unreadable video {videos}/corrupt_1.mp4' in log
    # each epoch's total (summed over the two workers) equals the skips logged in that epoch
    totals = [
        int(n)
        for n in re.findall(
            r'epoch \d: (\d+) unreadable training video\(s\) skipped, summed over all dataloader '
            r'workers and ranks',
            log,
        )
    ]
    skips = len(re.findall(r'skipped unreadable video ', log))
    assert len(totals) == 2 and sum(totals) == skips and min(totals) >= 2, (totals, skips)
    assert f'({sum(totals)} so far in this run)' in log
    assert (tmp_path / 'w' / 'epoch_2.pth').exists()


def test_resume_gives_the_losses_of_an_uninterrupted_run(tiny_video_set, tmp_path) -> None:
    straight = tiny_runner(tmp_path / 'a', tiny_video_set, 3, deterministic=True)
    straight.train()
    ref = straight.message_hub.get_scalar('train/loss').data[0][-4:]  # epoch 3
    tiny_runner(tmp_path / 'b', tiny_video_set, 1, deterministic=True).train()  # "interrupted" after 1
    resumed = tiny_runner(tmp_path / 'b', tiny_video_set, 3, resume=True, deterministic=True)
    resumed.train()
    got = resumed.message_hub.get_scalar('train/loss').data[0][-4:]
    assert len(ref) == 4
    assert_close_as(got, ref, ulps=ROUNDING, dtype=torch.float32)  # the same operations again
    assert_close_as(resumed.model.state_dict(), straight.model.state_dict(), ulps=ROUNDING)
