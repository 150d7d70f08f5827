"""Damaged and unreadable videos in tools/infer.py: damaged data in the middle of a file is passed
over (``--over-time``: a gap in the timeline, scored on after it, status 1), damage no key frame
follows ends the timeline where it starts, a file that cannot be read at all is one line and
status 1 with or without ``--over-time``, and a cut-off MP4 is described in words without it;
the tiny recognizer of test_over_time.py on videos written here."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import av
import numpy as np
import pytest
from test_over_time import moving_box, run, tiny  # noqa: F401  (the module's checkpoint fixture)

from dna_mm.over_time.frame_stream import FrameStream, StreamInfo
from dna_mm.over_time.overlay import clock
from dna_mm.over_time.predictor import OverTime, WindowScores
from dna_mm.over_time.windows import SlidingWindows, WindowSampling
from dna_mm.preparation.video_kinds import BROKEN, write_broken
from dna_mm.synthetic.videos import write_video

FPS = 25
#: the damage of ``videos`` as FFmpeg's H.264 decoder meets it: a frame it conceals and marks
#: corrupt (the same file on every CPU: dna_mm.synthetic.videos.X264_CPU_INDEPENDENT)
CONCEALED = "damaged frame data (a frame FFmpeg's decoder marks corrupt)"
#: the broken files of dna_mm.preparation.video_kinds that FFmpeg cannot open (nor decord read)
UNOPENABLE = ['moov_lost.mp4', 'cut_in_header.avi', 'empty.mp4', 'audio_only.mp4', 'garbage.mp4', 'text.avi']


def damaged_copy(whole: Path, out: Path, at: float = 0.4, share: float = 0.1) -> Path:
    """``whole`` with random bytes over ``share`` of it from ``at`` of its length: inside an MP4's
    media data (PyAV writes the index, moov, last: it is kept)."""
    data = bytearray(whole.read_bytes())
    start, size = int(len(data) * at), int(len(data) * share)
    data[start : start + size] = np.random.default_rng(0).bytes(size)
    out.write_bytes(bytes(data))
    return out


@pytest.fixture(scope='module')
def videos(tmp_path_factory) -> tuple[Path, Path]:
    """``(whole, damaged)``: 10 s at 25 fps, 64x48, H.264 with a key frame a second; the damaged
    copy has a tenth of its bytes random from 40 % of the file on (about 4 s to 6 s)."""
    root = tmp_path_factory.mktemp('damaged')
    whole = write_video(
        root / 'whole.mp4', moving_box(64, 48, 10 * FPS), fps=FPS, codec='libx264', keyint=FPS
    )
    return whole, damaged_copy(whole, root / 'damaged.mp4')


@pytest.fixture(scope='module')
def broken(tmp_path_factory) -> dict[str, Path]:
    """The broken files of :data:`dna_mm.preparation.video_kinds.BROKEN` (name -> path)."""
    return write_broken(tmp_path_factory.mktemp('broken'))


# -- the stream and the windows -------------------------------------------------------------
def test_the_stream_passes_over_damaged_data_and_hands_on_only_intact_frames(videos) -> None:
    """The frames after the damage come from the next key frame on, those before it stop early
    enough: every frame handed on is the intact file's own, and the gap is said."""
    whole, damaged = videos
    intact = {f.pts: f.rgb() for f in FrameStream(str(whole))}
    stream = FrameStream(str(damaged))
    frames = list(stream)
    (gap,) = stream.gaps
    assert gap.why == CONCEALED and 2.0 < gap.start < gap.end < 8.0
    assert gap.end == pytest.approx(round(gap.end))  # resumed at a key frame (one a second)
    carried = [f for f in frames if f.gap is not None]
    assert len(carried) == 1 and carried[0].gap is gap and carried[0].time == pytest.approx(gap.end)
    assert not [f.time for f in frames if gap.start - 1e-6 < f.time < gap.end - 1e-6]
    assert frames[-1].time == pytest.approx(9.96) and stream.ended is None and stream.damaged_to_end is None
    assert all(np.array_equal(f.rgb(), intact[f.pts]) for f in frames)  # none rebuilt from damage
    assert [f.index for f in frames] == [round(f.time * FPS) for f in frames]  # the file's numbering


def test_a_key_frame_put_out_late_does_not_end_the_damage_after_it(tmp_path) -> None:
    """x264's B-frames make the decoder put a key frame out after packets that follow it: with
    those packets damaged, the key frame is intact, but the frames decoded after it refer to the
    damaged ones. The gap lasts to the next key frame decoded after the damage (5 s), every frame
    handed on is the intact file's own, and the indices keep to the file's numbering."""
    frames = moving_box(64, 48, 10 * FPS)
    whole = write_video(tmp_path / 'w.mp4', frames, fps=FPS, codec='libx264', keyint=FPS)
    with av.open(str(whole)) as container:  # (pts seconds, byte offset, size) in file order
        packets = [(float(p.pts * p.time_base), p.pos, p.size) for p in container.demux(video=0) if p.size]
    first = next(n for n, p in enumerate(packets) if p[0] == 3.0) + 1  # the packet after the 3 s key frame
    last = next(n for n, p in enumerate(packets) if p[0] == 4.0)  # to the 4 s key frame, itself damaged
    start, end = packets[first][1], packets[last][1] + packets[last][2]
    data = bytearray(whole.read_bytes())
    data[start:end] = np.random.default_rng(1).bytes(end - start)
    damaged = tmp_path / 'd.mp4'
    damaged.write_bytes(bytes(data))
    intact = {f.pts: f.rgb() for f in FrameStream(str(whole))}
    stream = FrameStream(str(damaged))
    frames = list(stream)
    (gap,) = stream.gaps
    assert gap.end == pytest.approx(5.0) and 2.0 < gap.start < 3.2
    assert all(np.array_equal(f.rgb(), intact[f.pts]) for f in frames)
    assert [f.index for f in frames] == [round(f.time * FPS) for f in frames] and frames[-1].index == 249


def passed_over(whole: Path, at: float) -> tuple[FrameStream, list]:
    """``whole`` with 2 % of its bytes random from ``at`` of its length, streamed: ``(stream, its
    frames)``; every frame handed on is asserted to be the intact file's own, numbered as the file
    numbers it, to the last (10 s at 25 fps)."""
    damaged = damaged_copy(whole, whole.with_name(f'damaged {whole.name}'), at=at, share=0.02)
    intact = {f.pts: f.rgb() for f in FrameStream(str(whole))}
    stream = FrameStream(str(damaged))
    frames = list(stream)
    assert all(np.array_equal(f.rgb(), intact[f.pts]) for f in frames)
    assert [f.index for f in frames] == [round(f.time * FPS) for f in frames] and frames[-1].index == 249
    return stream, frames


@pytest.mark.parametrize('name,codec', [('h264.mkv', 'libx264'), ('vp9.webm', 'libvpx-vp9')])
def test_data_a_matroska_demuxer_passes_over_is_a_gap(tmp_path, name: str, codec: str) -> None:
    """Matroska's demuxer reads on at the next block it finds after random bytes, and says nothing
    of the packets it lost: the stretch of the file between two packets is the damage, and the
    frames after it (decoded from missing references) are left out to the next key frame."""
    whole = write_video(tmp_path / name, moving_box(64, 48, 10 * FPS), fps=FPS, codec=codec, keyint=FPS)
    stream, _ = passed_over(whole, at=0.3)
    (gap,) = stream.gaps
    assert re.fullmatch(r"damaged data \(\d+ bytes FFmpeg's demuxer passed over\)", gap.why)
    assert gap.end == pytest.approx(round(gap.end)) and 1.0 < gap.start < gap.end < 6.0


def test_an_avis_frames_keep_their_times_after_data_its_demuxer_passed_over(tmp_path) -> None:
    """An AVI's demuxer numbers the frames it reads: after random bytes it reads on at the next
    chunk it finds, counting on from the last frame it read. The frames after the gap keep the
    numbers the AVI's index gives them (the times of the intact file), and are its own."""
    whole = write_video(tmp_path / 'w.avi', moving_box(64, 48, 10 * FPS), fps=FPS, keyint=FPS)
    stream, frames = passed_over(whole, at=0.45)
    (gap,) = stream.gaps
    assert gap.end == pytest.approx(round(gap.end)) and 1.0 < gap.start < gap.end < 6.0
    assert frames[-1].time == pytest.approx(9.96)


class FailingReads:
    """A PyAV container whose reads fail (an I/O error of the disk) after ``after`` packets: FFmpeg's
    demuxers resynchronise on damaged data, none of the files written here fails a read."""

    def __init__(self, container, after: int) -> None:
        self.container, self.after = container, after

    def __getattr__(self, name: str):
        return getattr(self.container, name)

    def demux(self, *streams):
        for n, packet in enumerate(self.container.demux(*streams)):
            if n == self.after:
                raise av.error.OSError(5, 'Input/output error')
            yield packet


def test_a_read_error_ends_the_frames_where_it_happened(videos) -> None:
    """The frames the decoder holds are put out (with their times), then the stream says where
    it could not read on; nothing is a gap."""
    whole, _ = videos
    stream = FrameStream(str(whole))
    stream._container = FailingReads(stream._container, 120)
    frames = list(stream)
    assert 110 <= len(frames) <= 120 and 4.0 < frames[-1].time < 5.0 and not stream.gaps
    assert stream.ended == f'the file cannot be read past {stream.read_to:.1f} s (FFmpeg: Input/output error)'
    assert stream.read_to == pytest.approx(frames[-1].time + 1 / FPS, abs=0.1)


class FakeFrame:
    """A stream frame whose pixels say its index."""

    def __init__(self, index: int) -> None:
        self.index, self.time = index, index / FPS

    def rgb(self) -> np.ndarray:
        return np.full((2, 2, 3), self.index % 256, np.uint8)


def test_no_window_holds_frames_from_both_sides_of_a_gap() -> None:
    """At a gap the first open window is completed with its last frame (as at the video's end),
    the later ones are dropped, and the first frame after it opens a window off the stride's
    multiples; the next keep to them."""
    slider = SlidingWindows(WindowSampling(8, (0, 2, 4, 6)), stride=0.2, fps=FPS)
    windows = [w for i in range(12) for w in slider.push(FakeFrame(i))]  # windows open at 0, 5, 10
    assert [w.first for w in windows] == [0]
    cut = list(slider.break_at_gap())
    assert [(w.first, [int(f[0, 0, 0]) for f in w.frames]) for w in cut] == [(5, [5, 7, 9, 11])]
    assert cut[0].end == pytest.approx(12 / FPS)
    after = [w for i in range(53, 70) for w in slider.push(FakeFrame(i))]
    assert [w.first for w in after] == [53, 55, 60]  # 53 at once, then 2.2 s and 2.4 s
    assert [int(f[0, 0, 0]) for f in after[0].frames] == [53, 55, 57, 59]


def test_segments_stop_at_a_gap_and_no_smoothing_crosses_it() -> None:
    """Class 0 before a gap from 4 s to 6 s, class 1 after it: two segments that end and start
    with the gap (averaged over 5 windows across it, the boundary would move)."""
    from dna_mm.over_time.frame_stream import Gap

    info = StreamInfo('v.mp4', FPS, 10.0, 250, 1 / FPS, False, 10.0)
    starts = [0.5 * k for k in range(8)] + [6.0 + 0.5 * k for k in range(8)]
    scores = [np.array([0.9, 0.1]) if t < 5 else np.array([0.45, 0.55]) for t in starts]
    windows = [
        WindowScores(t, min(t + 0.64, 4.0 if t < 5 else 10.0), round(t * FPS), s)
        for t, s in zip(starts, scores, strict=True)
    ]
    result = OverTime('v.mp4', info, windows, duration=10.0, gaps=[Gap(4.0, 6.0, 'damaged frame data')])
    found = [(s.label, s.start, s.end, s.first, s.last) for s in result.segments(width=5)]
    assert found == [(0, 0.0, 4.0, 0, 7), (1, 6.0, 10.0, 8, 15)]


# -- tools/infer.py --over-time -------------------------------------------------------------
def test_over_time_scores_on_past_damaged_data_and_says_so(tiny, videos, tmp_path, capsys) -> None:  # noqa: F811
    """The gap is printed in its place, the windows and segments stop before it and start again
    after it, to the end of the file; the timeline files and the annotated video are written
    (without the gap's frames); the status is 1 (the file was not scored whole)."""
    _, damaged = videos
    out, table, annotated = tmp_path / 'dmg.json', tmp_path / 'dmg.csv', tmp_path / 'dmg annotated.mp4'
    assert run(tiny, damaged, '--stride', '0.5', '--out', str(out), '--out-video', str(annotated)) == 1
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    (gap,) = data['gaps']
    assert data['ended'] is None and data['duration'] == pytest.approx(10.0) and data['frames'] == 250
    assert f'{clock(gap["start"]):>8} - {clock(gap["end"]):>8}  not scored: {gap["why"]}' in printed
    assert gap['why'] == CONCEALED
    said = re.search(r'the file is damaged: (\d\.\d) s of its 10\.0 s not scored \(1 gap\)', printed)
    assert said and float(said.group(1)) == pytest.approx(gap['end'] - gap['start'], abs=0.06)
    windows = data['windows']
    before = [w for w in windows if w['end'] <= gap['start']]
    after = [w for w in windows if w['start'] >= gap['end']]
    assert before and after and len(before) + len(after) == len(windows)
    assert after[0]['start'] == gap['end'] and windows[-1]['end'] == pytest.approx(10.0)
    segments = data['segments']
    assert segments[0]['start'] == 0 and segments[-1]['end'] == pytest.approx(10.0)
    assert not [s for s in segments if s['start'] < gap['end'] and s['end'] > gap['start']]
    assert {gap['start'], gap['end']} <= {s['end'] for s in segments} | {s['start'] for s in segments}
    assert 'wrote the annotated video' in printed
    with av.open(str(annotated)) as container:
        shown = [f.time for f in container.decode(video=0)]
    assert len(shown) == len(list(FrameStream(str(damaged)))) and shown[-1] == pytest.approx(9.96)
    assert not [t for t in shown if gap['start'] - 1e-6 < t < gap['end'] - 1e-6]
    assert run(tiny, damaged, '--over-time', '--stride', '0.5', '--out', str(table)) == 1
    rows = [r for r in csv.DictReader(table.open()) if r['kind'] == 'gap']
    assert [(float(r['start']), float(r['end'])) for r in rows] == [(gap['start'], gap['end'])]


def test_damage_no_key_frame_follows_ends_the_timeline_where_it_starts(tiny, tmp_path, capsys) -> None:  # noqa: F811
    """One key frame, at the start: nothing after the damage decodes intact. The windows before it
    are kept and written, ``ended`` says where and what, the status is 1."""
    whole = write_video(
        tmp_path / 'one gop.mp4', moving_box(64, 48, 10 * FPS), fps=FPS, codec='libx264', keyint=250
    )
    damaged = damaged_copy(whole, tmp_path / 'one gop damaged.mp4')
    out = tmp_path / 'one gop.json'
    assert run(tiny, damaged, '--over-time', '--out', str(out)) == 1
    data = json.loads(out.read_text())
    ends = re.fullmatch(
        r'damaged frame data \(FFmpeg: .+\) from (\d\.\d) s to the end of the file', data['ended']
    )
    assert ends and 2.0 < float(ends.group(1)) < 6.0 and data['gaps'] == []
    assert data['duration'] == pytest.approx(float(ends.group(1)), abs=0.05) and len(data['windows']) > 5
    assert f'{data["ended"]}: {len(data["windows"])} windows' in capsys.readouterr().out


# -- a file that cannot be read -------------------------------------------------------------
@pytest.mark.parametrize('name', UNOPENABLE)
def test_a_file_that_cannot_be_read_is_one_line_and_status_1(tiny, broken, name, capsys) -> None:  # noqa: F811
    """With or without --over-time: what is wrong, in words, and status 1 (a missing file, a
    mistake in the command, stays 2)."""
    path = broken[name]
    assert run(tiny, path) == 1
    err = capsys.readouterr().err
    assert re.search(rf'{re.escape(str(path))}\n  cannot be read: {BROKEN[name]}', err)
    assert run(tiny, path, '--over-time') == 1
    err = capsys.readouterr().err
    assert re.search(rf'^infer\.py: {re.escape(str(path))} cannot be read: {BROKEN[name]}', err, re.M)
    assert 'Traceback' not in err and 'error:' not in err
    with pytest.raises(SystemExit) as stop:
        run(tiny, path.with_name('missing.mp4'), '--over-time')
    assert stop.value.code == 2


def test_a_cut_off_mp4_with_its_index_is_described_without_over_time(tiny, broken, capsys) -> None:  # noqa: F811
    """A faststart MP4 (index first) cut in half: decord stops at the cut with its own words
    (``av_read_frame failed``); dna_mm's reader says what is wrong with the file."""
    path = broken['truncated.mp4']
    assert run(tiny, path) == 1
    err = capsys.readouterr().err
    assert re.search(rf'{re.escape(str(path))}\n  cannot be read: {BROKEN["truncated.mp4"]}\n', err)
    assert 'DECORDError' not in err and 'av_read_frame' not in err
