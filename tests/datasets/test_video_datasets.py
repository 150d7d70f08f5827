"""Video data: protocol builders, the K400 checker, the demo set, robust loading, resume."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
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
from dna_mm.errors import DataError
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


@pytest.mark.parametrize('protocol', ['CV1', 'CS'])
def test_a_folder_without_a_video_of_a_split_is_named(tmp_path, protocol) -> None:
    """A folder with no video of the protocol (a cross-subject-only activity for CV1; a subject
    of no split for CS) is one line and writes nothing; one without a video of some split writes
    the lists and warns of the empty ones."""
    name = f'{CS_ONLY}_p02_r00_v01_c01.mp4' if protocol == 'CV1' else 'Walk_p05_r00_v01_c01.mp4'
    root = _touch(tmp_path / 'one', [name])
    args = ['tools/data/smarthome/build_annotations.py', '--video-dir', str(root), '--protocol', protocol]
    proc = run_main([*args, '--out-dir', str(tmp_path / 'o')], check=False)
    why = 'activity outside the 19 CV1 classes' if protocol == 'CV1' else 'subject not in any CS split'
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[0] == (
        f'build_annotations.py: error: smarthome {protocol}: 1 video found in {root}, none of them in a '
        f'{protocol} split (1 video: {why}): nothing written'
    )
    assert not (tmp_path / 'o').exists()
    root = _touch(tmp_path / 'val_only', ['Walk_p19_r00_v05_c05.mp4'])  # CS val subject, CV1 val camera
    args[2] = str(root)
    proc = run_main([*args, '--out-dir', str(tmp_path / 'v')], check=False)
    assert proc.returncode == 0, proc.stderr
    assert 'warning: train and test are empty' in proc.stdout + proc.stderr
    assert (tmp_path / 'v' / 'val.txt').read_text().strip() and not (tmp_path / 'v' / 'train.txt').read_text()


@pytest.mark.parametrize(
    'dataset, name, given, written',
    [
        ('smarthome', 'Walk_p03_r00_v01_c01.mp4', 'cs', 'train.txt'),
        ('smarthome', 'Walk_p19_r00_v05_c05.mp4', 'Cv1', 'val.txt'),
        ('ntu60', 'S001C002P001R001A001_rgb.avi', 'XSub', 'train.txt'),
    ],
)
def test_a_protocol_name_is_taken_in_any_case(tmp_path, dataset, name, given, written) -> None:
    """``--protocol cs`` is CS (and ``XSub`` xsub): the names as the papers write them vary."""
    root = _touch(tmp_path / 'v', [name])
    proc = _build(dataset, root, tmp_path / 'o', given)
    assert proc.returncode == 0, proc.stderr
    assert name in (tmp_path / 'o' / written).read_text()


def _clips(tiny_video_set, root: Path, names: list[str]) -> Path:
    """Real clips (the tiny set's) under ``root`` by ``names`` (relative paths)."""
    clip = next((tiny_video_set / 'videos').iterdir()).read_bytes()
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(clip)
    return root


def _build(dataset: str, video_dir: Path, out_dir: Path, protocol: str):
    return run_main(
        [
            f'tools/data/{dataset}/build_annotations.py',
            '--video-dir',
            str(video_dir),
            '--out-dir',
            str(out_dir),
            '--protocol',
            protocol,
        ],
        check=False,
    )


SMARTHOME_CLIPS = ['Walk_p03_r00_v01_c01.mp4', 'Readbook_p04_r00_v03_c01.mp4', 'Walk_p02_r00_v02_c02.mp4']
WALK = SMARTHOME_CLIPS[0]


@pytest.mark.parametrize(
    'dataset, protocol, video_dir, earlier, later',
    [
        ('smarthome', 'CS', 'videos', WALK, f'short256/{WALK}'),
        ('smarthome', 'CS', '.', f'videos/{WALK}', f'videos_256/{WALK}'),
        (
            'ntu60',
            'xsub',
            '.',
            'person_crops/S001C001P001R001A001.mp4',
            'videos/S001C001P001R001A001_rgb.avi',
        ),
    ],
    ids=['smarthome-copy-inside', 'smarthome-side-by-side', 'ntu60-avi-and-crop'],
)
def test_a_clip_given_twice_is_refused_naming_both_copies(
    tiny_video_set, tmp_path, dataset, protocol, video_dir, earlier, later
) -> None:
    """Two copies of one clip under the video folder (a re-encoded copy in a sub-folder, or
    ``videos/`` and ``videos_256/`` side by side with the folder above as ``--video-dir``): the
    builders of both datasets refuse it in the same one line naming both, and write nothing;
    listed twice, the clip would be trained on, or scored, twice."""
    root = tmp_path / dataset / video_dir
    others = [str(Path(earlier).parent / n) for n in SMARTHOME_CLIPS[1:]] if dataset == 'smarthome' else []
    _clips(tiny_video_set, root, [earlier, later, *others])
    proc = _build(dataset, root, tmp_path / 'lists', protocol)
    sample = Path(earlier).name.split('.')[0]
    assert proc.returncode == 2 and proc.stderr.splitlines()[0] == (
        f'build_annotations.py: error: {later}: sample {sample} also given as {earlier} (two copies of one '
        'video: give a video folder that holds one copy of each)'
    ), proc.stderr
    assert not (tmp_path / 'lists').exists()
    (root / later).unlink()
    assert _build(dataset, root, tmp_path / 'lists', protocol).returncode == 0
    lists = [tmp_path / 'lists' / f'{split}.txt' for split in ('train', 'val', 'test')]
    listed = [ln.rsplit(' ', 1)[0] for f in lists if f.exists() for ln in f.read_text().splitlines()]
    assert sorted(listed) == sorted([earlier, *others])  # each clip once


def test_every_video_suffix_is_taken_in_any_case(tiny_video_set, tmp_path) -> None:
    """Clips re-encoded to another container, or named ``.MP4``: listed, and the found line
    counts each suffix (none is left out without a word)."""
    names = [
        'Walk_p03_r00_v01_c01.mp4',
        'Walk_p09_r00_v06_c01.MP4',
        'Walk_p04_r00_v03_c01.mkv',
        'Walk_p06_r00_v04_c01.avi',
        'Readbook_p07_r00_v05_c01.webm',
    ]
    root = _clips(tiny_video_set, tmp_path / 'videos', names)
    proc = _build('smarthome', root, tmp_path / 'cs', 'CS')
    assert proc.returncode == 0, proc.stderr
    found = f'smarthome CS: 5 videos found in {root} (.mp4: 2, .avi: 1, .mkv: 1, .webm: 1)'
    assert proc.stdout.splitlines()[0] == found, proc.stdout
    cs = label_map('smarthome_cs_classes')
    assert sorted((tmp_path / 'cs' / 'train.txt').read_text().splitlines()) == sorted(
        f'{n} {cs.index(n.split("_p")[0])}' for n in names
    )
    split = ntu60_splits(['S001C001P001R001A001_rgb.AVI', 'S001C002P003R001A002.MP4'], 'xsub')
    assert split.splits['train'] == [('S001C001P001R001A001_rgb.AVI', 0)]


@pytest.mark.parametrize('dataset, protocol', [('ntu60', 'xsub'), ('smarthome', 'CS')])
def test_an_out_dir_that_is_a_file_is_named(tiny_video_set, tmp_path, dataset, protocol) -> None:
    name = 'S001C001P001R001A001.mp4' if dataset == 'ntu60' else SMARTHOME_CLIPS[0]
    root = _clips(tiny_video_set, tmp_path / 'videos', [name])
    proc = _build(dataset, root, root / name, protocol)
    assert proc.returncode == 2 and proc.stderr.splitlines()[0] == (
        f'build_annotations.py: error: --out-dir {root / name} is a file, not a folder'
    ), proc.stderr


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


#: K400's class folders are the csv labels: blanks, quotes, parentheses (320 of the 400 hold a blank)
K400_LIST = [
    ('abseiling/a-1_xyz_000000_000010.mp4', 0),
    ('dribbling basketball/b-1_xyz_000000_000010.mp4', 99),
    ('passing American football (in game)/p-1_xyz_000020_000030.mp4', 208),
    ("massaging person's head/m-1_xyz_000000_000010.mp4", 196),
    ("massaging person's head/m-2_xyz_000000_000010.mp4", 196),  # no longer on YouTube
]


def _docs_block(page: str, holding: str) -> str:
    """The fenced block of ``docs/<page>`` that holds ``holding``, as a reader copies it."""
    from conftest import REPO

    text = (REPO / 'docs' / page).read_text(encoding='utf-8')
    (block,) = [b for b in re.findall(r'^```\w*\n(.*?)^```', text, re.M | re.S) if holding in b]
    return block


def test_paths_with_blanks_are_read_alike_by_the_checker_training_and_the_docs(
    tiny_video_set, tmp_path
) -> None:
    """A K400 list whose paths hold blanks: the checker (tools/data/kinetics/check_annotations.py)
    reads each line as training does (the label is the last field) and names the one video
    missing on disk; training names the same; the docs' "drop missing lines" command keeps the
    four present lines."""
    clip = next((tiny_video_set / 'videos').iterdir())
    videos = tmp_path / 'videos_train'
    for path, _ in K400_LIST[:-1]:
        (videos / path).parent.mkdir(parents=True, exist_ok=True)
        (videos / path).write_bytes(clip.read_bytes())
    ann = tmp_path / 'train_list.txt'
    ann.write_text(''.join(f'{p} {label}\n' for p, label in K400_LIST), encoding='utf-8')
    gone = K400_LIST[-1][0]
    proc = run_main(
        ['tools/data/kinetics/check_annotations.py', '--ann-file', str(ann), '--video-dir', str(videos)],
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        f'{ann}: 5 entries, 400 classes',
        'missing on disk: 1',
        f'  {gone}',
        'problems found',
    ], proc.stdout
    with pytest.raises(
        FileNotFoundError, match=r'1 of 5 listed videos are missing on disk, e\.g\.\n  line 5: '
    ):
        DATASETS.build(_dataset_cfg(ann, videos, num_classes=400))
    docs_paths = (
        'data/kinetics400/videos_train',
        'data/kinetics400/kinetics400_train_list_videos.txt',
        'data/kinetics400/kinetics400_train_list_videos.present.txt',
    )
    command = _docs_block('datasets/kinetics400.md', docs_paths[2])
    present = tmp_path / 'present.txt'
    for theirs, ours in zip(docs_paths, (videos, ann, present), strict=True):
        assert theirs in command, command
        command = command.replace(theirs, shlex.quote(str(ours)))
    env = dict(os.environ, PATH=f'{Path(sys.executable).parent}{os.pathsep}{os.environ["PATH"]}')
    subprocess.run(['bash', '-c', command], check=True, env=env)
    assert present.read_text(encoding='utf-8') == ''.join(f'{p} {label}\n' for p, label in K400_LIST[:-1])
    assert len(DATASETS.build(_dataset_cfg(present, videos, num_classes=400))) == 4


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
    ann.write_text('\n')  # an empty split
    with pytest.raises(DataError, match=r'missing\.txt: the list holds no videos'):
        DATASETS.build(_dataset_cfg(ann, tiny_video_set / 'videos', num_classes=4))
    ann.write_text('\n'.join(lines) + '\n')  # a list of another protocol: its classes.txt says so
    (tmp_path / 'classes.txt').write_text('\n'.join(label_map('smarthome_cv_classes')) + '\n')
    with pytest.raises(
        DataError, match=r'missing\.txt: its classes\.txt names 19 classes and num_classes is 4\b'
    ):
        DATASETS.build(_dataset_cfg(ann, tiny_video_set / 'videos', num_classes=4))
    ds = DATASETS.build(_dataset_cfg(tiny_video_set / 'train.txt', tiny_video_set / 'videos', num_classes=4))
    assert len(ds) == 8 and (tiny_video_set / 'classes.txt').is_file()  # the demo's: 4 classes


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


def test_when_every_retry_fails_one_line_names_the_videos(tmp_path) -> None:
    """``max_refetch + 1`` unreadable training videos in a row: one line (a ``DataError``, the
    tools' one line and exit status 2, not a traceback) naming each video once, with how often it
    was drawn, and why; raised in a loader worker (as training reads), it reaches the tool as
    that line too."""
    videos = tmp_path / 'videos'
    videos.mkdir()
    names = [_corrupt(videos / f'corrupt_{i}.mp4').name for i in range(3)]
    ann = tmp_path / 'train.txt'
    ann.write_text(''.join(f'{n} 0\n' for n in names))
    pipeline = [
        dict(type='ScaledPyAVInit', short_side=32),
        dict(type='SampleFrames', clip_len=2, num_clips=1),
        dict(type='SortedDecordDecode'),
    ]
    ds = DATASETS.build(dict(_dataset_cfg(ann, videos, num_classes=4, max_refetch=2), pipeline=pipeline))
    head = (
        f'{ann}: 3 training videos in a row could not be used (max_refetch=2); check the video files and '
        'the pipeline: '
    )
    one = rf'({re.escape(str(videos))}/corrupt_\d\.mp4)(?: \((\d+) times\))?: [^;]+ \((DataError)\)'
    with pytest.raises(DataError) as err:
        ds[0]
    assert ds.skipped.value == 3
    assert re.findall(one, str(err.value))[0][0] == str(videos / 'corrupt_0.mp4')
    for message in (str(err.value), _from_a_worker(ds)):
        assert message.startswith(head) and '\n' not in message, message
        listed = re.findall(one, message)
        assert re.fullmatch(re.escape(head) + '; '.join([one] * len(listed)), message), message
        assert len({path for path, _, _ in listed}) == len(listed), listed  # each video once
        assert sum(int(n or 1) for _, n, _ in listed) == 3, listed


def _from_a_worker(dataset) -> str:
    """The line a tool prints for the error of ``dataset[0]`` raised in a ``DataLoader`` worker."""
    from torch.utils.data import DataLoader

    from dna_mm.errors import error_line

    with pytest.raises(DataError) as err:
        next(iter(DataLoader(dataset, batch_size=1, num_workers=1, collate_fn=list)))
    assert 'Original Traceback' in str(err.value)  # torch's re-raise: the worker's traceback
    return error_line(err.value)


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
