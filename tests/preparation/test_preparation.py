"""Dataset preparation tools: resize_videos.py and ntu60/person_crops.py on small generated videos.

Real PyAV encoding and decord decoding throughout; skeleton files are written in the
documented NTU RGB+D text format.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import decord
import numpy as np
import pytest
from conftest import load_tool, run_main, run_tool

from dna_mm.preparation import resize
from dna_mm.preparation.encoding import probe, short_side_size
from dna_mm.preparation.geometry import square_window
from dna_mm.preparation.runner import produce, run_jobs
from dna_mm.preparation.skeleton import SkeletonError, joint_box
from dna_mm.preparation.verification import frames_match, verify_video
from dna_mm.synthetic.videos import box_clip, camera_clip, write_video
from dna_mm.utils.files import part_path

resize_tool = load_tool('tools/data/resize_videos.py')
person_crops = load_tool('tools/data/ntu60/person_crops.py')
build_ntu60_lists = load_tool('tools/data/ntu60/build_annotations.py').main

BODY = '72057594037931101 0 1 1 1 1 0 -0.437266 -0.1939345 2'


def skeleton_text(frames: list[list[list[tuple[float, float]]]]) -> str:
    """The NTU ``.skeleton`` text of ``frames`` → bodies → joints ``(colorX, colorY)``."""
    lines = [str(len(frames))]
    for bodies in frames:
        lines.append(str(len(bodies)))
        for joints in bodies:
            lines += [BODY, str(len(joints))]
            lines += [
                f'0.2189346 0.1726517 3.785868 277.9 191.2 {x} {y} -0.2289 0.0218 0.9712 -0.0609 2'
                for x, y in joints
            ]
    return '\n'.join(lines) + '\n'


def frames_of(path: Path) -> np.ndarray:
    reader = decord.VideoReader(str(path))
    return reader.get_batch(list(range(len(reader)))).asnumpy()  # [T, H, W, 3]


# ---- skeleton files ------------------------------------------------------------------------
def test_joint_box_spans_all_bodies_and_frames_skipping_invalid_joints(tmp_path) -> None:
    path = tmp_path / 'S001C001P001R001A001.skeleton'
    path.write_text(
        skeleton_text(
            [
                [
                    [(500.5, 300.0), (0.0, 0.0), (float('nan'), 400.0)],
                    [(900.0, 200.25), (700.0, float('inf'))],
                ],
                [],  # a frame without a body
                [[]],  # a body without joints
                [[(650.0, 800.0), (0.0, 950.0)]],  # colorX 0: not mapped
            ]
        )
    )
    assert joint_box(path) == (500.5, 200.25, 900.0, 800.0)


def test_joint_box_is_none_without_a_usable_skeleton(tmp_path) -> None:
    assert joint_box(tmp_path / 'missing.skeleton') is None
    (tmp_path / 'empty.skeleton').write_text('\n')
    assert joint_box(tmp_path / 'empty.skeleton') is None
    (tmp_path / 'zeros.skeleton').write_text(skeleton_text([[[(0.0, 0.0)] * 25], []]))
    assert joint_box(tmp_path / 'zeros.skeleton') is None
    (tmp_path / 'noframes.skeleton').write_text('0\n')
    assert joint_box(tmp_path / 'noframes.skeleton') is None


def test_truncated_and_malformed_skeletons_name_file_and_line(tmp_path) -> None:
    text = skeleton_text([[[(1.0, 2.0)] * 25], [[(3.0, 4.0)] * 25]])
    lines = text.splitlines()
    truncated = tmp_path / 'truncated.skeleton'
    truncated.write_text('\n'.join(lines[:40]) + '\n')  # stops inside frame 2's joints
    with pytest.raises(
        SkeletonError, match=r'truncated\.skeleton, line 41: file ends where joint record of frame 2'
    ):
        joint_box(truncated)
    bad = tmp_path / 'bad.skeleton'
    lines[10] = lines[10].replace('277.9', 'x7.9')
    bad.write_text('\n'.join(lines) + '\n')
    with pytest.raises(
        SkeletonError, match=r'bad\.skeleton, line 11: joint record of frame 1: expected 12 numbers'
    ):
        joint_box(bad)
    short = tmp_path / 'short.skeleton'
    short.write_text('1\n1\n1 2 3\n')
    with pytest.raises(SkeletonError, match=r'line 3: body record of frame 1: expected 10 values, found 3'):
        joint_box(short)


# ---- geometry ------------------------------------------------------------------------------
def test_square_window_margin_shift_and_clip() -> None:
    # inside: box 100x200 at (500, 400) + 10 % margin -> side 240 around the centre (550, 500)
    assert square_window((500, 400, 600, 600), (1920, 1080), 0.1) == (430, 380, 670, 620)
    # at the left/bottom edge: shifted into the frame, still square
    assert square_window((0, 900, 100, 1080), (1920, 1080), 0.1) == (0, 864, 216, 1080)
    # taller than the frame: clipped vertically, the square's width kept
    assert square_window((900, 0, 1000, 1080), (1920, 1080), 0.1) == (302, 0, 1598, 1080)
    # a single joint still gives a 1-pixel window
    assert square_window((10.2, 10.2, 10.2, 10.2), (64, 64), 0.1) == (10, 10, 11, 11)


def test_short_side_size_keeps_aspect_with_even_sides() -> None:
    assert short_side_size(1920, 1080, 256) == (456, 256)
    assert short_side_size(640, 480, 256) == (342, 256)
    assert short_side_size(360, 640, 256) == (256, 456)
    assert short_side_size(340, 256, 256) == (340, 256)


def test_frame_count_tolerance() -> None:
    assert frames_match(98, 100) and not frames_match(97, 100)
    assert frames_match(990, 1000) and not frames_match(989, 1000)


# ---- the shared runner: atomic writes --------------------------------------------------------
def _video(path: Path, size=(64, 48), frames=10, codec='mpeg4') -> Path:
    # (decord misreads a few tiny widths, 2-16, 24, 48 and 72 px, so tests avoid them)
    write_video(path, camera_clip(*size, frames), codec=codec)
    return path


def test_a_killed_write_leaves_no_output_under_the_final_name(tmp_path) -> None:
    src = _video(tmp_path / 'src.avi')
    dst = tmp_path / 'out' / 'src.mp4'

    def write_and_die(tmp: Path) -> None:  # killed (SIGKILL) half way through its temporary file
        tmp.write_bytes(src.read_bytes()[:500])
        os.kill(os.getpid(), signal.SIGKILL)

    pid = os.fork()
    if pid == 0:  # child
        produce('src', dst, write_and_die, lambda p: None)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert not dst.exists() and part_path(dst).exists()
    # the next run does not take the stale .part file for the output, and writes a good one
    outcomes = run_jobs(resize.resize_one, resize.plan(tmp_path, tmp_path / 'out', '.mp4', 32, 4, 0), 1)
    assert [(o.name, o.status, o.reason) for o in outcomes] == [('src.avi', 'done', '')]
    assert not part_path(dst).exists()
    assert verify_video(dst, (42, 32), 10) is None


def test_produce_keeps_nothing_that_fails_verification(tmp_path) -> None:
    dst = tmp_path / 'x.mp4'
    outcome = produce('x', dst, lambda tmp: tmp.write_bytes(b'not a video'), lambda p: 'bad')
    assert outcome.status == 'failed' and 'verification: bad' in outcome.reason
    assert not dst.exists() and not part_path(dst).exists()


# ---- resize_videos ---------------------------------------------------------------------------
def test_resize_tree_resume_redo_and_failures(tmp_path, capsys) -> None:
    src = tmp_path / 'raw videos'
    (src / 'abseiling').mkdir(parents=True)
    (src / 'café ü').mkdir()
    _video(src / 'abseiling' / 'a b.avi', size=(64, 48), frames=12)
    _video(
        src / 'café ü' / 'été 1.mkv', size=(36, 64), frames=9
    )  # portrait; mkv: no frame count in the header
    _video(src / 'abseiling' / 'c.mp4', size=(64, 36), frames=8, codec='libx264')
    (src / 'broken.mp4').write_bytes(b'\x00' * 1000)
    good = _video(tmp_path / 'truncated.avi', size=(64, 48), frames=30)
    (src / 'truncated.avi').write_bytes(good.read_bytes()[: good.stat().st_size * 2 // 3])
    out = tmp_path / 'out'
    args = [str(src), str(out), '--short-side', '32', '--workers', '2', '--keyint', '4']

    assert resize_tool.main(args) == 1
    text = capsys.readouterr().out
    assert '5 videos: 3 done, 0 skipped (already there and verified), 2 failed' in text
    assert 'broken.mp4: source unreadable' in text
    failed = dict(line.split('\t') for line in (out / 'failed.txt').read_text(encoding='utf-8').splitlines())
    assert set(failed) == {'broken.mp4', 'truncated.avi'}
    assert 'truncated (or damaged): its header lists 30 frames, the file holds' in failed['truncated.avi']
    expected = {
        'abseiling/a b.mp4': ((42, 32), 12),
        'café ü/été 1.mp4': ((32, 56), 9),
        'abseiling/c.mp4': ((56, 32), 8),
    }
    for rel, (size, frames) in expected.items():
        assert verify_video(out / rel, size, frames) is None, rel
        assert probe(out / rel).frames == frames
    assert not list(out.rglob('*.part')) and not (out / 'truncated.mp4').exists()

    # second run: the good outputs are skipped; a wrong-size output is redone
    write_video(out / 'abseiling' / 'c.mp4', camera_clip(16, 16, 8), codec='libx264')
    assert resize_tool.main(args) == 1
    assert '5 videos: 1 done, 2 skipped' in capsys.readouterr().out
    assert verify_video(out / 'abseiling' / 'c.mp4', (56, 32), 8) is None

    # once the bad sources are gone, nothing fails and failed.txt goes away
    (src / 'broken.mp4').unlink()
    (src / 'truncated.avi').unlink()
    assert resize_tool.main(args) == 0
    assert '3 videos: 0 done, 3 skipped' in capsys.readouterr().out
    assert not (out / 'failed.txt').exists()


def test_resize_refuses_bad_input_with_one_line(tmp_path, capsys) -> None:
    def refused(argv: list[str]) -> str:
        with pytest.raises(SystemExit) as done:
            resize_tool.main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert done.value.code == 2 and err[1:] == ['resize_videos.py: (--debug prints the traceback)'], err
        return err[0]

    nope = tmp_path / 'nope'
    assert (
        refused([str(nope), str(tmp_path / 'out')])
        == f'resize_videos.py: error: SRC_DIR {nope} is not a folder'
    )
    _video(tmp_path / 'a.avi')
    _video(tmp_path / 'a.mkv')
    assert 'a.avi and a.mkv would both be written to' in refused([str(tmp_path), str(tmp_path / 'out')])
    assert 'OUT_DIR must differ from SRC_DIR' in refused([str(tmp_path), str(tmp_path)])


@pytest.mark.integration
def test_resize_tool_as_a_user_runs_it(tmp_path) -> None:
    src = tmp_path / 'vidéos 1'
    src.mkdir()
    _video(src / 'x y.avi', size=(80, 60), frames=6)
    out = tmp_path / 'sortie ä'
    proc = run_tool(
        ['tools/data/resize_videos.py', str(src), str(out), '--short-side', '32', '--workers', '1']
    )
    assert '1 videos: 1 done, 0 skipped (already there and verified), 0 failed' in proc.stdout
    assert verify_video(out / 'x y.mp4', (42, 32), 6) is None


@pytest.mark.integration
def test_benchmark_preparation_measures_keyint_and_tool() -> None:
    """tools/benchmarks/benchmark_preparation.py (the figures of docs/datasets/*.md) on tiny videos: a
    row per keyframe interval, ratios to the first; the resize tool timed per 1,000 videos."""
    proc = run_main(
        ['tools/benchmarks/benchmark_preparation.py', 'keyint', '--size', '64x48', '--frames', '40']
        + ['--keyints', '8', '4', '--videos', '1', '--clips', '2']
    )
    rows = [ln.split(' | ') for ln in proc.stdout.splitlines() if ln[:2] in ('8 ', '4 ')]
    assert [r[0] for r in rows] == ['8', '4'] and rows[0][4] == '1.00x' and rows[0][5] == '1.00x'
    proc = run_main(
        ['tools/benchmarks/benchmark_preparation.py', 'tool', 'resize', '--size', '64x48', '--frames', '8']
        + ['--videos', '1', '--workers', '1']
    )
    assert 'resize: 1 videos 64x48 x 8 frames, 1 workers' in proc.stdout
    assert 'min per 1,000 videos on 1 workers' in proc.stdout
    bad = run_main(['tools/benchmarks/benchmark_preparation.py', 'keyint', '--size', '64'], check=False)
    assert bad.returncode == 2 and "size '64': expected WIDTHxHEIGHT" in bad.stderr


# ---- person_crops ------------------------------------------------------------------------------
#: the video is 1920x1080 scaled by 1/5; the person's box in video pixels
SCALE, BOX = 5, (100, 50, 160, 150)


@pytest.fixture
def ntu(tmp_path) -> Path:
    """Four NTU samples: a known box; no skeleton; a malformed skeleton; only zero-joint frames."""
    videos, skeletons = tmp_path / 'nturgb+d_rgb', tmp_path / 'nturgb+d_skeletons'
    videos.mkdir()
    skeletons.mkdir()
    x0, y0, x1, y1 = BOX
    for name in (
        'S001C001P001R001A001',
        'S001C002P002R001A002',
        'S001C003P003R001A003',
        'S002C001P001R001A004',
    ):
        write_video(videos / f'{name}_rgb.avi', box_clip(384, 216, 8, BOX))
    # joints at the box's corners (in 1920x1080 pixels) over two bodies and several frames
    corners = [(x0 * SCALE, y0 * SCALE), (x1 * SCALE, y1 * SCALE)]
    frames = [[[corners[0], (0.0, 0.0)], [corners[1]]], [], [[(x0 * SCALE + 50, y0 * SCALE + 50)]]]
    (skeletons / 'S001C001P001R001A001.skeleton').write_text(skeleton_text(frames))
    bad = skeleton_text(frames).splitlines()
    bad[4] = '1 2 3'
    (skeletons / 'S001C003P003R001A003.skeleton').write_text('\n'.join(bad) + '\n')
    (skeletons / 'S002C001P001R001A004.skeleton').write_text(skeleton_text([[[]], []]))
    return tmp_path


def test_person_crop_contains_the_person_where_expected(ntu, capsys) -> None:
    out = ntu / 'person_crops'
    argv = [
        '--video-dir',
        str(ntu / 'nturgb+d_rgb'),
        '--skeleton-dir',
        str(ntu / 'nturgb+d_skeletons'),
        '--out-dir',
        str(out),
        '--size',
        '64',
        '--margin',
        '0',
        '--workers',
        '1',
    ]
    assert person_crops.main(argv) == 1  # the malformed skeleton fails its sample
    text = capsys.readouterr().out
    assert '4 videos: 3 done, 0 skipped (already there and verified), 1 failed' in text
    assert (
        'S001C003P003R001A003: malformed skeleton:' in text
        and 'S001C003P003R001A003.skeleton, line 5' in text
    )
    assert 'full frame (no usable skeleton): 2' in text
    full = (out / 'full_frame.txt').read_text().splitlines()
    assert full == [
        'S001C002P002R001A002\tno skeleton file S001C002P002R001A002.skeleton',
        'S002C001P001R001A004\tno valid joint in S002C001P001R001A004.skeleton',
    ]

    # box 60x100 at (100, 50): square window x 80..180, y 50..150, scaled 64/100 onto the output
    crop = frames_of(out / 'S001C001P001R001A001.mp4').mean(axis=(0, 3))  # [64, 64]
    assert crop.shape == (64, 64)
    assert crop[4:60, 16:48].min() > 200  # the person: x (100-80)*0.64 = 12.8 .. (160-80)*0.64 = 51.2
    assert crop[:, :9].max() < 60 and crop[:, 56:].max() < 60  # background left and right of it
    # the full-frame sample is the whole 384x216 frame squeezed into 64x64: the box's relative place
    whole = frames_of(out / 'S001C002P002R001A002.mp4').mean(axis=(0, 3))
    assert whole[int(100 / 216 * 64), int(130 / 384 * 64)] > 200 and whole[5, 60] < 60

    # --missing skip leaves the skeleton-less samples out and lists them; the rest is skipped
    assert person_crops.main(argv + ['--missing', 'skip']) == 1
    text = capsys.readouterr().out
    assert '4 videos: 0 done, 1 skipped (already there and verified), 1 failed, 2 left out' in text
    assert (out / 'left_out.txt').read_text().splitlines()[0].startswith('S001C002P002R001A002\t')

    # the output names are what the list builder reads
    assert (
        build_ntu60_lists(['--video-dir', str(out), '--out-dir', str(ntu / 'xsub'), '--protocol', 'xsub'])
        == 0
    )
    lists = (ntu / 'xsub' / 'train.txt').read_text().split()
    assert 'S001C001P001R001A001.mp4' in lists and 'S002C001P001R001A004.mp4' in lists


@pytest.mark.integration
def test_person_crops_tool_as_a_user_runs_it(ntu) -> None:
    (ntu / 'nturgb+d_skeletons' / 'S001C003P003R001A003.skeleton').unlink()  # no malformed file
    out = ntu / 'crops ü'
    cmd = [
        'tools/data/ntu60/person_crops.py',
        '--video-dir',
        str(ntu / 'nturgb+d_rgb'),
        '--skeleton-dir',
        str(ntu / 'nturgb+d_skeletons'),
        '--out-dir',
        str(out),
        '--size',
        '32',
        '--workers',
        '2',
    ]
    proc = run_tool(cmd)
    assert '4 videos: 4 done, 0 skipped (already there and verified), 0 failed' in proc.stdout
    assert sorted(p.name for p in out.glob('*.mp4')) == [
        'S001C001P001R001A001.mp4',
        'S001C002P002R001A002.mp4',
        'S001C003P003R001A003.mp4',
        'S002C001P001R001A004.mp4',
    ]
    assert all(verify_video(p, (32, 32), 8) is None for p in out.glob('*.mp4'))
    assert not (out / 'failed.txt').exists()
