"""Streams as input of tools/infer.py --over-time: MPEG-TS on standard input, a loopback UDP
sender, Ctrl-C; the tiny recognizer of test_over_time.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import av
import pytest
import torch
from conftest import DEMO_CONFIG, REPO
from test_over_time import TINY, TINY_CFG, moving_box, run, tiny  # noqa: F401  (the module's checkpoint fixture)
from tolerance import REORDERED, tolerance

from dna_mm.over_time.predictor import OverTimePredictor


def write_ts(path: Path, seconds: float, fps: int = 25) -> Path:
    """MPEG-TS, MPEG-4 Part 2, 48x48, a keyframe a second."""
    with av.open(str(path), 'w', format='mpegts') as out:
        stream = out.add_stream('mpeg4', rate=fps)
        stream.width = stream.height = 48
        stream.pix_fmt, stream.codec_context.gop_size = 'yuv420p', fps
        for img in moving_box(48, 48, int(seconds * fps)):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(img, format='rgb24')))
        out.mux(stream.encode())
    return path


class Stdin:
    def __init__(self, path: Path) -> None:
        self.buffer = open(path, 'rb')  # noqa: SIM115 (closed by the test)


def test_a_pipe_on_standard_input(tiny, tmp_path, monkeypatch, capsys) -> None:  # noqa: F811
    ts = write_ts(tmp_path / 'live.ts', 4)
    monkeypatch.setattr(sys, 'stdin', Stdin(ts))
    out = tmp_path / 'live.json'
    assert run(tiny, '-', '--over-time', '--stride', '0.5', '--out', str(out)) == 0
    sys.stdin.buffer.close()
    printed = capsys.readouterr().out
    assert '<stdin>: 25.00 fps; windows of 16 frames' in printed and '(live: ' in printed
    assert printed.count('[latency ') == 8 and 'the stream ended: 8 windows, 4.0 s of video' in printed
    from_pipe = json.loads(out.read_text())
    assert run(tiny, ts, '--over-time', '--stride', '0.5', '--out', str(tmp_path / 'file.json')) == 0
    from_file = json.loads((tmp_path / 'file.json').read_text())
    # the same windows, read live one at a time or batched from the file: the same classes, the
    # scores (written to 6 decimals) equal up to the batch's round-off
    for live, batched in zip(from_pipe['windows'], from_file['windows'], strict=True):
        assert [c['class'] for c in live['top']] == [c['class'] for c in batched['top']]
        scores = [c['score'] for c in batched['top']]
        written = 2 * 5e-7 + tolerance(torch.float32, 1.0, REORDERED)['atol']  # 6 decimals, float32
        assert [c['score'] for c in live['top']] == pytest.approx(scores, abs=written)


def test_a_udp_stream_ends_when_its_data_stops(tiny, tmp_path, capsys) -> None:  # noqa: F811
    """A sender on the loopback interface, a datagram of 7 TS packets at a time, paced at about
    twice real time; the run ends cleanly --stream-timeout seconds after the last datagram."""
    data = write_ts(tmp_path / 'udp.ts', 3).read_bytes()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]

    def send() -> None:
        time.sleep(1.0)  # the reader opens the socket first
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            for i in range(0, len(data), 1316):
                sender.sendto(data[i : i + 1316], ('127.0.0.1', port))
                time.sleep(0.002)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    url = f'udp://127.0.0.1:{port}'
    assert run(tiny, url, '--over-time', '--stride', '0.5', '--stream-timeout', '2') == 0
    sender.join()
    printed = capsys.readouterr().out
    assert f'{url}: 25.00 fps' in printed and 'the stream stopped' in printed
    assert printed.count('[latency ') >= 4  # the stream's first keyframe may come after the first second


def test_ctrl_c_stops_the_pass_cleanly(tiny, tmp_path) -> None:  # noqa: F811
    """KeyboardInterrupt while windows are scored: the windows so far are the result."""
    from mmengine.config import Config

    from dna_mm.apis.inference import load_recognizer, test_pipeline_of

    ckpt, _ = tiny
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(TINY_CFG)
    predictor = OverTimePredictor(load_recognizer(cfg, str(ckpt)), test_pipeline_of(cfg), batch_size=2)
    seen = []

    def interrupt(scored) -> None:
        seen.extend(scored)
        if len(seen) >= 4:
            raise KeyboardInterrupt

    result = predictor.run(str(write_ts(tmp_path / 'long.ts', 8)), 0.5, interrupt)
    assert result.ended == 'stopped by Ctrl-C' and len(result.windows) == 4
    assert [s.label for s in result.segments()]  # segments of what was seen


@pytest.mark.integration
def test_sigint_from_the_terminal(tiny, tmp_path) -> None:  # noqa: F811
    """A real SIGINT to the tool reading a pipe that stays open: exit 0, the segments printed."""
    ckpt, names = tiny
    ts = write_ts(tmp_path / 'slow.ts', 6).read_bytes()
    cmd = [sys.executable, 'tools/infer.py', DEMO_CONFIG, str(ckpt), '-', '--over-time', '--stride', '0.5',
           '--label-map', str(names), '--cfg-options', *TINY]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=False,
        env={**os.environ, 'PYTHONUNBUFFERED': '1'},
        # a terminal's Ctrl-C, also where the suite runs in the background of a shell without job
        # control, which starts it with SIGINT ignored (Python then installs no handler)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    proc.stdin.write(ts[: len(ts) // 2])  # half, and the pipe stays open: the stream goes on
    proc.stdin.flush()
    lines = []
    while sum('[latency ' in ln for ln in lines) < 2:
        line = proc.stdout.readline().decode()
        assert line, proc.stderr.read().decode()[-3000:]
        lines.append(line)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    text = ''.join(lines) + out.decode()
    assert proc.returncode == 0, err.decode()[-3000:]
    assert 'stopped by Ctrl-C' in text and 'segments (smoothed over 5 windows):' in text


@pytest.mark.integration
def test_sigint_on_a_file_stops_it_and_says_so(tiny, tmp_path) -> None:  # noqa: F811
    """A real SIGINT while a file is scored: the timeline so far is written and says it was
    stopped (its frames those the windows cover), no annotated video (its frames after the stop
    would show the last window's classes), status 130 as for a Ctrl-C elsewhere."""
    from dna_mm.synthetic.videos import write_video

    ckpt, names = tiny
    video = write_video(tmp_path / 'long.mp4', moving_box(48, 48, 25 * 60), fps=25, codec='mpeg4')
    out, annotated = tmp_path / 'stopped.json', tmp_path / 'annotated.mp4'
    cmd = [sys.executable, 'tools/infer.py', DEMO_CONFIG, str(ckpt), str(video), '--stride', '0.04',
           '--out', str(out), '--out-video', str(annotated), '--label-map', str(names),
           '--cfg-options', *TINY]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, 'PYTHONUNBUFFERED': '1'},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in the test above
    )  # fmt: skip
    lines = []
    while len(lines) < 20:  # the header and some windows scored
        line = proc.stdout.readline().decode()
        assert line, proc.stderr.read().decode()[-3000:]
        lines.append(line)
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    text = ''.join(lines) + rest.decode()
    assert proc.returncode == 130, err.decode()[-3000:]
    assert (
        'stopped by Ctrl-C' in text and 'the annotated video was not written: the pass was stopped at' in text
    )
    data = json.loads(out.read_text())
    assert data['ended'] == 'stopped by Ctrl-C' and 0 < data['duration'] < 55
    last = data['windows'][-1]
    assert data['duration'] == last['end'] and data['frames'] == last['first_frame'] + 16
    assert not annotated.exists() and not list(tmp_path.glob('annotated*'))


@pytest.mark.integration
def test_a_pipe_that_stays_open_without_data_ends_after_the_timeout(tiny, tmp_path) -> None:  # noqa: F811
    """Standard input kept open, no more data: the run ends --stream-timeout seconds after the
    last data, saying so, with the segments of what came (FFmpeg's own timeout does not reach a
    read of a Python file); a pipe that never brings data is one line."""
    ckpt, names = tiny
    ts = write_ts(tmp_path / 'some.ts', 3).read_bytes()
    cmd = [sys.executable, 'tools/infer.py', DEMO_CONFIG, str(ckpt), '-', '--over-time', '--stride', '0.5',
           '--stream-timeout', '2', '--label-map', str(names), '--cfg-options', *TINY]  # fmt: skip
    for data in (ts, b''):
        with open(tmp_path / 'out', 'w+b') as stdout, open(tmp_path / 'err', 'w+b') as stderr:
            proc = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr)
            proc.stdin.write(data)
            proc.stdin.flush()  # and the pipe stays open (communicate() would close it)
            try:
                proc.wait(timeout=90)
            finally:
                proc.stdin.close()
                proc.kill()
        out, err = (tmp_path / 'out').read_bytes(), (tmp_path / 'err').read_bytes()
        if data:
            assert proc.returncode == 0, err.decode()[-3000:]
            assert 'the stream stopped: no data for 2 s (the timeout of a stream)' in out.decode()
            assert 'segments (smoothed over 5 windows):' in out.decode()
        else:
            line = 'infer.py: error: standard input: no data for 2 s (the timeout of a stream)'
            assert proc.returncode == 2 and line in err.decode() and 'Traceback' not in err.decode()
