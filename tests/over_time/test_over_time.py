"""Predictions over time (tools/infer.py --over-time): windows, segments, the streaming decode,
the timeline files; a real tiny TimeSformer-DnA (random weights saved as a checkpoint) on
videos written here with PyAV."""

from __future__ import annotations

import csv
import json
import math
import re

import numpy as np
import pytest
from conftest import DEMO_CONFIG, TINY_DEMO_CFG, load_tool, tiny_demo_recognizer

from dna_mm.datasets.video_reader import KeyframeReader, frames_in_sequence
from dna_mm.over_time.frame_stream import FrameStream
from dna_mm.over_time.segments import cell_bounds, find_segments, smooth_scores
from dna_mm.over_time.windows import SlidingWindows, WindowSampling, split_pipeline, window_sampling
from dna_mm.synthetic.videos import write_video

infer = load_tool('tools/infer.py')

CLASSES = ['still', 'horizontal', 'vertical', 'diagonal']
TINY_CFG = TINY_DEMO_CFG
TINY = [f'{k}={v}' for k, v in TINY_CFG.items()]


def moving_box(width: int, height: int, frames: int, seed: int = 0):
    """A bright box moving across a noisy dark frame (right, then down after half the frames)."""
    rng = np.random.default_rng(seed)
    for t in range(frames):
        img = rng.integers(0, 40, size=(height, width, 3), dtype=np.uint8)
        x, y = (t * 2) % (width - 8), (max(0, t - frames // 2) * 2) % (height - 8)
        img[y : y + 8, x : x + 8] = (230, 40, 40)
        yield img


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    """``(checkpoint, label map)``: the tiny demo recognizer with random weights, saved."""
    root = tmp_path_factory.mktemp('over_time')
    ckpt, _ = tiny_demo_recognizer(root)
    names = root / 'classes.txt'
    names.write_text('\n'.join(CLASSES) + '\n')
    return ckpt, names


@pytest.fixture(scope='module')
def ten_seconds(tmp_path_factory):
    """10 s at 25 fps, 64x48, H.264."""
    path = tmp_path_factory.mktemp('videos') / 'ten seconds.mp4'
    return write_video(path, moving_box(64, 48, 250), fps=25, codec='libx264')


def run(tiny, video, *extra: str, cfg: tuple[str, ...] = ()) -> int:
    """tools/infer.py on the tiny model; ``cfg``: more ``--cfg-options``."""
    ckpt, names = tiny
    args = [DEMO_CONFIG, str(ckpt), str(video), '--label-map', str(names), *extra]
    return infer.main([*args, '--cfg-options', *TINY, *cfg])


class FakeFrame:
    """A stream frame whose pixels say its index."""

    def __init__(self, index: int, time: float) -> None:
        self.index, self.time = index, time

    def rgb(self) -> np.ndarray:
        return np.full((2, 2, 3), self.index % 256, np.uint8)


# -- windows --------------------------------------------------------------------------------
def test_the_window_is_the_sampling_steps_clip() -> None:
    sampling = window_sampling(dict(type='SampleFrames', clip_len=8, frame_interval=2, num_clips=1))
    assert sampling.span == 16 and sampling.offsets == tuple(range(0, 16, 2))
    assert sampling.results == dict(clip_len=8, frame_interval=2, num_clips=1)
    opening, sample, after = split_pipeline(
        [dict(type='DecordInit'), dict(type='SampleFrames', clip_len=8, frame_interval=2),
         dict(type='DecordDecode'), dict(type='Resize', scale=(32, 32)), dict(type='PackActionInputs')]
    )  # fmt: skip
    assert (
        opening['type'] == 'DecordInit'
        and sample['clip_len'] == 8
        and [s['type'] for s in after] == ['Resize', 'PackActionInputs']
    )
    with pytest.raises(ValueError, match=r'test_dataloader.dataset.pipeline: predictions over time need'):
        split_pipeline([dict(type='DecordInit'), dict(type='DecordDecode')])


def test_windows_follow_the_frames_timestamps_and_hold_few_frames() -> None:
    """A variable frame rate (40 ms, then 20 ms a frame): windows open at the first frame at or
    after each multiple of the stride; only sampled frames are held, and not for long."""
    times = [0.04 * i for i in range(50)] + [2.0 + 0.02 * i for i in range(79)]  # 129 frames, 3.56 s
    sampling = WindowSampling(8, (0, 2, 4, 6), {})
    slider = SlidingWindows(sampling, stride=0.5, fps=30)
    windows = [w for i, t in enumerate(times) for w in slider.push(FakeFrame(i, t))]
    windows += list(slider.finish())
    starts = [w.start for w in windows]
    assert starts[:4] == pytest.approx([0.0, 0.52, 1.0, 1.52])  # the first frame at or after k * 0.5
    assert starts[4:8] == pytest.approx([2.0, 2.5, 3.0, 3.5])
    for w in windows[:-1]:
        assert [int(f[0, 0, 0]) for f in w.frames] == [w.first + o for o in (0, 2, 4, 6)]
    assert slider.peak_frames <= 4  # windows of 8 frames every 12-25 frames: one at a time
    last = windows[-1]  # the tail: frames 125-128 exist, the last one repeats past the end
    assert len(windows) == 8 and last.first == 125
    assert [int(f[0, 0, 0]) for f in last.frames] == [125, 127, 128, 128]
    assert last.end == pytest.approx(3.56 + 1 / 30)


def test_a_video_shorter_than_a_window_gives_one_window() -> None:
    slider = SlidingWindows(WindowSampling(16, tuple(range(0, 16, 2)), {}), stride=0.3, fps=25)
    got = [w for i in range(5) for w in slider.push(FakeFrame(i, i / 25))] + list(slider.finish())
    assert len(got) == 1 and [int(f[0, 0, 0]) for f in got[0].frames] == [0, 2, 4, 4, 4, 4, 4, 4]
    assert got[0].end == pytest.approx(5 / 25)


@pytest.mark.parametrize('frames, starts', [(50, [0.0]), (51, [0.0, 1.0])])
def test_a_tail_is_handed_on_only_with_frames_no_window_held(frames: int, starts: list[float]) -> None:
    """2 s windows every second: a 2 s video (50 frames at 25 fps) is one window, the one open at
    its end being that window's second half; a frame more, and that tail holds it."""
    slider = SlidingWindows(WindowSampling(50, tuple(range(0, 50, 5)), {}), stride=1.0, fps=25)
    got = [w for i in range(frames) for w in slider.push(FakeFrame(i, i / 25))] + list(slider.finish())
    assert [w.start for w in got] == pytest.approx(starts)
    assert [int(f[0, 0, 0]) for f in got[-1].frames][-1] == (45 if frames == 50 else 50)


# -- segments -------------------------------------------------------------------------------
def test_segments_tile_the_video_and_smoothing_removes_a_blip() -> None:
    starts = np.arange(20) * 0.5
    ends = starts + 1.0
    scores = np.zeros((20, 3))
    scores[:10, 0], scores[10:, 2] = 0.8, 0.7
    scores[5] = [0.1, 0.9, 0.0]  # one window of class 1 inside class 0
    raw = find_segments(starts, ends, scores, width=1, duration=10.5)
    assert [s.label for s in raw] == [0, 1, 0, 2]
    assert raw[0].start == 0 and raw[-1].end == 10.5
    assert all(a.end == b.start for a, b in zip(raw, raw[1:], strict=False))  # no gap, no overlap
    smooth = find_segments(starts, ends, scores, width=5, duration=10.5)
    assert [(s.label, s.first, s.last) for s in smooth] == [(0, 0, 9), (2, 10, 19)]
    assert smooth[0].end == pytest.approx((5.0 + 5.5) / 2)  # half-way between the centres
    merged = find_segments(starts, ends, scores, width=1, min_length=1.0, duration=10.5)
    assert [s.label for s in merged] == [0, 2]
    np.testing.assert_allclose(smooth_scores(np.eye(3), 3), [[0.5, 0.5, 0], [1 / 3] * 3, [0, 0.5, 0.5]])
    assert cell_bounds([0, 1], [2, 3], 3.5).tolist() == [0, 1.5, 3.5]


def test_a_threshold_leaves_out_where_the_best_class_is_unsure() -> None:
    """A single-label model's segments with a threshold: its best class's runs where that class
    reaches it; the stretch between two actions, where no class does, is in no segment."""
    starts = np.arange(12) * 1.0
    ends = starts + 1.0
    scores = np.zeros((12, 3))
    scores[0:4] = [0.9, 0.05, 0.05]  # class 0, sure
    scores[4:7] = [0.45, 0.4, 0.15]  # unsure: class 0 first, class 1 close
    scores[7:11] = [0.1, 0.1, 0.8]  # class 2, sure
    scores[11] = [0.7, 0.2, 0.1]  # class 0 again, one window
    sure = find_segments(starts, ends, scores, duration=12.0, threshold=0.6, top_only=True)
    assert [(s.label, s.start, s.end, s.first, s.last) for s in sure] == [
        (0, 0.0, 4.0, 0, 3),
        (2, 7.0, 11.0, 7, 10),
        (0, 11.0, 12.0, 11, 11),
    ]
    assert sure[1].score == pytest.approx(0.8)
    # a lower threshold takes the unsure stretch in, for its best class alone (each class's runs
    # would give class 1 a segment over it too)
    low = find_segments(starts, ends, scores, duration=12.0, threshold=0.3, top_only=True)
    assert [(s.label, s.first, s.last) for s in low] == [(0, 0, 6), (2, 7, 10), (0, 11, 11)]
    each = find_segments(starts, ends, scores, duration=12.0, threshold=0.3)
    assert (1, 4, 6) in [(s.label, s.first, s.last) for s in each]
    # a run shorter than min_length is dropped, not joined to a neighbour
    kept = find_segments(starts, ends, scores, min_length=2.0, duration=12.0, threshold=0.6, top_only=True)
    assert [(s.label, s.first, s.last) for s in kept] == [(0, 0, 3), (2, 7, 10)]


# -- the streaming reader -------------------------------------------------------------------
def test_the_stream_gives_the_readers_frames_upright(tmp_path) -> None:
    """Frame i of the stream is frame i of the keyframe reader (an H.264 file with B-frames,
    and a phone-style file with a 90-degree display rotation)."""
    import av

    plain = write_video(tmp_path / 'b.mp4', moving_box(64, 48, 40), fps=25, codec='libx264', keyint=10)
    rotated = tmp_path / 'rotated.mp4'
    with av.open(str(rotated), 'w') as container:
        stream = container.add_stream('mpeg4', rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, 'yuv420p'
        stream.set_display_rotation(90)
        for img in moving_box(64, 48, 12):
            container.mux(stream.encode(av.VideoFrame.from_ndarray(img, format='rgb24')))
        container.mux(stream.encode())
    for path in (plain, rotated):
        frames = list(FrameStream(str(path)))
        reader = KeyframeReader(str(path), name=str(path))
        expected = reader.get_batch(range(len(reader)))
        assert len(frames) == len(reader) == len(frames_in_sequence(str(path))[1])
        np.testing.assert_array_equal(np.stack([f.rgb() for f in frames]), expected)
        assert [round(f.time, 3) for f in frames[:3]] == [0.0, 0.04, 0.08]
    assert frames[0].rgb().shape == (64, 48, 3)  # the rotated clip, upright


# -- the tool -------------------------------------------------------------------------------
def test_over_time_prints_the_timeline_and_writes_json_and_csv(tiny, ten_seconds, tmp_path, capsys) -> None:
    out = tmp_path / 'timeline.json'
    assert run(tiny, ten_seconds, '--over-time', '--stride', '0.5', '--topk', '2', '--out', str(out)) == 0
    printed = capsys.readouterr().out
    assert 'windows of 16 frames (0.64 s) every 0.50 s' in printed
    assert 'x real time' in printed and 'segments (smoothed over 5 windows):' in printed
    data = json.loads(out.read_text())
    starts = [w['start'] for w in data['windows']]
    assert starts == pytest.approx(
        [math.ceil(12.5 * k) / 25 for k in range(len(starts))]
    )  # at or after k/2 s
    assert len(starts) == 20 and data['duration'] == pytest.approx(10.0) and data['ended'] is None
    assert data['window'] == dict(frames=16, seconds=0.64, sampled=list(range(0, 16, 2)))
    for w in data['windows'][:-1]:
        assert w['end'] == pytest.approx(w['start'] + 0.64)
        assert len(w['top']) == 2 and w['top'][0]['score'] >= w['top'][1]['score']
        assert w['top'][0]['name'] == CLASSES[w['top'][0]['class']]
    assert data['windows'][-1]['end'] == pytest.approx(10.0)  # the tail, to the video's end
    segments = data['segments']
    assert segments[0]['start'] == 0 and segments[-1]['end'] == pytest.approx(10.0)
    assert all(a['end'] == b['start'] for a, b in zip(segments, segments[1:], strict=False))
    lines = [ln for ln in printed.splitlines() if ' - ' in ln and ln.startswith('  ')]
    assert len(lines) == len(starts) + len(segments)
    table = tmp_path / 'timeline.csv'
    assert run(tiny, ten_seconds, '--over-time', '--stride', '0.5', '--topk', '2', '--out', str(table)) == 0
    rows = list(csv.DictReader(table.open()))
    assert len([r for r in rows if r['kind'] == 'window']) == 2 * 20
    assert [r['class_name'] for r in rows if r['kind'] == 'segment'] == [s['name'] for s in segments]


def test_a_threshold_leaves_a_single_label_models_unsure_out(tiny, ten_seconds, tmp_path, capsys) -> None:
    """``--threshold`` on a single-label model: segments only where its best class reaches the
    threshold (here the median of the windows' smoothed best scores, so that some are below)."""
    first, out = tmp_path / 'all.json', tmp_path / 'sure.json'
    common = ['--over-time', '--stride', '0.5', '--topk', '4']
    assert run(tiny, ten_seconds, *common, '--out', str(first)) == 0
    assert 'threshold' not in json.loads(first.read_text())['smoothing']  # none unless asked
    data = json.loads(first.read_text())
    scores = np.zeros((len(data['windows']), 4))
    for i, w in enumerate(data['windows']):
        for top in w['top']:
            scores[i, top['class']] = top['score']
    threshold = round(float(np.median(smooth_scores(scores, 5).max(axis=1))), 4)
    capsys.readouterr()
    assert run(tiny, ten_seconds, *common, '--threshold', str(threshold), '--out', str(out)) == 0
    assert f'segments (smoothed over 5 windows; the best class at or above {threshold:.2f}):' in (
        capsys.readouterr().out
    )
    sure = json.loads(out.read_text())
    assert sure['smoothing'] == dict(windows=5, min_segment=0.0, threshold=threshold)
    starts, ends = [w['start'] for w in data['windows']], [w['end'] for w in data['windows']]
    expected = find_segments(starts, ends, scores, 5, duration=10.0, threshold=threshold, top_only=True)
    assert [(s['class'], s['start'], s['end']) for s in sure['segments']] == [
        (e.label, round(e.start, 3), round(e.end, 3)) for e in expected
    ]
    covered = sum(s['end'] - s['start'] for s in sure['segments'])
    assert 0 < covered < 10.0 - 0.25  # some of the video left out, not all
    assert all(a['end'] <= b['start'] for a, b in zip(sure['segments'], sure['segments'][1:], strict=False))


def test_a_file_cut_off_is_scored_to_where_its_frames_end_and_said(tiny, tmp_path, capsys) -> None:
    """A Matroska file cut in half (its header, at the front, states 10 s): FFmpeg decodes to the
    cut without an error; the run says where the frames end, the timeline file records it, and
    the status is 1 (a video not read to its end, as one that cannot be read at all)."""
    whole = write_video(tmp_path / 'whole.mkv', moving_box(64, 48, 250), fps=25, codec='libx264')
    cut = tmp_path / 'cut.mkv'
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    out = tmp_path / 'cut.json'
    assert run(tiny, cut, '--over-time', '--out', str(out)) == 1
    ends = r'the frames end at (\d+\.\d) s of the 10\.0 s its header states \(the file is cut off'
    said = re.search(ends, capsys.readouterr().out)
    data = json.loads(out.read_text())
    assert said and 2.0 < float(said.group(1)) < 8.0 and data['ended'].startswith(said.group(0)[:30])
    assert data['duration'] == pytest.approx(float(said.group(1)), abs=0.05)
    assert data['frames'] == round(data['duration'] * 25)
    assert run(tiny, whole, '--over-time', '--out', str(out)) == 0  # the whole file: nothing said
    assert json.loads(out.read_text())['ended'] is None and 'cut off' not in capsys.readouterr().out


def test_audio_longer_than_the_video_is_no_cut(tiny, tmp_path, capsys) -> None:
    """A Matroska file whose audio runs 8 s and its video 4 s: the container states 8 s, the video
    stream 4 s; the frames end where the video stream says, and nothing is said."""
    import av
    from test_annotated_video import mux_tone

    path = tmp_path / 'long_audio.mkv'
    with av.open(str(path), 'w') as out:
        sound = out.add_stream('aac', rate=16000)
        sound.layout = 'mono'
        video = out.add_stream('libx264', rate=25)
        video.width, video.height, video.pix_fmt = 64, 48, 'yuv420p'
        for img in moving_box(64, 48, 100):
            out.mux(video.encode(av.VideoFrame.from_ndarray(img, format='rgb24')))
        out.mux(video.encode())
        mux_tone(out, sound, 0, 8 * 16000, amplitude=0.3)
        out.mux(sound.encode())
    assert FrameStream(str(path)).info.duration > 8.0  # the container's length, the audio's
    assert run(tiny, path, '--over-time') == 0 and 'cut off' not in capsys.readouterr().out


def test_a_stride_longer_than_the_video_is_said(tiny, ten_seconds, capsys) -> None:
    assert run(tiny, ten_seconds, '--over-time', '--stride', '30') == 0
    printed = capsys.readouterr().out
    assert 'note: the stride (30 s) is longer than the video (10.0 s): one window classifies it' in printed
    assert '(1 window;' in printed


def test_an_output_that_is_an_input_is_refused(tiny, ten_seconds, tmp_path) -> None:
    """``--out-video`` or ``--out`` naming the video, the checkpoint or the label map, by any
    spelling or a link: one line before any work, the file as it was."""
    video = tmp_path / 'mine.mp4'
    video.write_bytes(ten_seconds.read_bytes())
    (tmp_path / 'link.mp4').symlink_to(video)
    ckpt, names = tiny
    cases = [
        ('--out-video', f'{tmp_path}/sub/../mine.mp4', 'input'),
        ('--out-video', str(tmp_path / 'link.mp4'), 'input'),
    ]
    for flag, path, what in cases:
        with pytest.raises(
            SystemExit, match=rf'{flag} {re.escape(path)} is the {what} .*: it would be overwritten'
        ):
            run(tiny, video, flag, path)
    assert video.read_bytes() == ten_seconds.read_bytes()
    listed = tmp_path / 'list.csv'
    listed.write_text(f'{video},0\n')
    before = listed.read_text()
    with pytest.raises(SystemExit, match=rf'--out {re.escape(str(listed))} is the input'):
        run(tiny, listed, '--out', str(listed))
    assert listed.read_text() == before


def test_a_video_that_cannot_be_read_says_why_and_writes_no_empty_table(tiny, tmp_path, capsys) -> None:
    """Without --over-time: what is wrong with the file, in words (PyAV reads its header before
    decord opens it), exit status 1, and no table of no video."""
    empty, out = tmp_path / 'empty.mp4', tmp_path / 'preds.csv'
    empty.write_bytes(b'')
    assert run(tiny, empty, '--out', str(out)) == 1
    err = capsys.readouterr().err
    assert f'{empty}\n  cannot be read: empty file (0 bytes)' in err and 'RuntimeError' not in err
    assert f'{out} not written: no video could be read' in err and not out.exists()


def test_memory_does_not_grow_with_the_length(tiny, tmp_path) -> None:
    """The frames held at once are those of the overlapping windows, for 4 s as for 40 s."""
    from mmengine.config import Config

    from dna_mm.apis.inference import load_recognizer, test_pipeline_of
    from dna_mm.over_time.predictor import OverTimePredictor

    ckpt, _ = tiny
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(TINY_CFG)
    predictor = OverTimePredictor(load_recognizer(cfg, str(ckpt)), test_pipeline_of(cfg), batch_size=4)
    held = {}
    for seconds in (4, 40):
        video = write_video(
            tmp_path / f'{seconds}.mp4', moving_box(48, 48, 25 * seconds), fps=25, codec='mpeg4'
        )
        result = predictor.run(str(video), stride=0.32)
        held[seconds] = result.peak_frames
        assert len(result.windows) == pytest.approx(seconds / 0.32, abs=1.5)
    assert held[4] == held[40] <= 16


def test_the_loaders_pipeline_key_and_the_top_level_one_both_count(tiny, ten_seconds, capsys) -> None:
    """An override of either key reaches the run (tools/test.py reads the loader's)."""
    for key in ('test_dataloader.dataset.pipeline.1.frame_interval', 'test_pipeline.1.frame_interval'):
        assert run(tiny, ten_seconds, '--over-time', cfg=(f'{key}=3',)) == 0
        assert 'windows of 24 frames (0.96 s)' in capsys.readouterr().out
    ckpt, names = tiny
    args = [DEMO_CONFIG, str(ckpt), str(ten_seconds), '--label-map', str(names), '--cfg-options', *TINY]
    for key in ('test_dataloader.dataset.pipeline.0.type', 'test_pipeline.0.type'):
        assert infer.main(args) == 0
        with pytest.raises(SystemExit) as stop:  # the config's mistake, not the video's: one line
            infer.main([*args, f'{key}=NoSuchInit'])
        assert stop.value.code == 2 and 'NoSuchInit is not in the mmaction::transform registry' in str(
            stop.value
        )


@pytest.mark.parametrize(
    'extra, message',
    [
        (['--stride', '0'], '--stride must be a positive number of seconds, got 0.0'),
        (['--smooth', '4'], '--smooth must be an odd number of windows >= 1, got 4'),
        (['--out', 'x.txt'], '--out must end in .json or .csv, got x.txt'),
        (['--out-video', 'x.gif'], '--out-video must end in .mp4 .m4v .mov .mkv, got x.gif'),
    ],
)
def test_a_bad_flag_is_one_line(tiny, ten_seconds, extra, message, capsys) -> None:
    with pytest.raises(SystemExit):
        run(tiny, ten_seconds, '--over-time', *extra)
    assert message in capsys.readouterr().err


def test_a_folder_or_a_broken_video_is_one_line(tiny, ten_seconds, tmp_path, capsys) -> None:
    """A folder is a mistake in the command (status 2); a video that cannot be read is one line
    and status 1, as without --over-time (tools/infer.py's docstring)."""
    folder = re.escape(str(ten_seconds.parent))
    message = rf'--over-time takes one video file or stream, got {folder} \(a folder\)'
    with pytest.raises(SystemExit, match=message) as stop:
        run(tiny, ten_seconds.parent, '--over-time')
    assert stop.value.code == 2
    broken = tmp_path / 'broken.mp4'
    broken.write_bytes(b'\x00not a video' * 64)
    capsys.readouterr()
    assert run(tiny, broken, '--over-time') == 1
    why = 'not a video file FFmpeg can read (FFmpeg: Invalid data found when processing input)'
    assert capsys.readouterr().err == f'infer.py: {broken} cannot be read: {why}\n'  # one line


def test_the_pipeline_keys_of_extract_features_agree(tiny, ten_seconds, tmp_path) -> None:
    extract = load_tool('tools/extract_features.py')
    ckpt, _ = tiny
    base = [DEMO_CONFIG, str(ckpt), '--videos', str(ten_seconds.parent), '--workers', '0']
    for key in ('test_dataloader.dataset.pipeline.0.type', 'test_pipeline.0.type'):
        with pytest.raises(SystemExit, match='NoSuchInit is not in the'):
            extract.main([*base, '--out', str(tmp_path / key), '--cfg-options', *TINY, f'{key}=NoSuchInit'])


def test_the_tools_choices_are_the_packages() -> None:
    from dna_mm.over_time.annotated_video import CONTAINERS
    from dna_mm.over_time.relevance_overlay import BRANCHES

    assert infer.VIDEO_OUT == tuple(CONTAINERS) and infer.RELEVANCE == tuple(BRANCHES)


def test_one_clip_for_a_long_video_is_said(tiny, ten_seconds, capsys) -> None:
    """Without --over-time, 0.64 s of a 10 s video decide its class: the tool says so."""
    assert run(tiny, ten_seconds) == 0
    assert 'note: one clip of 0.64 s classifies these 10.0 s of video; --over-time follows it' in (
        capsys.readouterr().out
    )
