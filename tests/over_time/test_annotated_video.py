"""The annotated video (tools/infer.py --out-video): the input's size, rate, length and audio,
the top-k and the segment strip on every frame; the tiny recognizer of test_over_time.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_over_time import moving_box, run, tiny  # noqa: F401  (the module's checkpoint fixture)

from dna_mm.over_time.motion_video import mux_tone
from dna_mm.over_time.overlay import PALETTE, Layout, annotate, strip_image
from dna_mm.over_time.segments import Segment


def write_with_audio(path: Path, frames, fps: int = 25, audio: str | None = 'aac', rotation: int = 0) -> Path:
    """A video (H.264) with a 440 Hz tone as long as it (``audio``: the codec, or ``None``)."""
    import av

    rate = 16000
    with av.open(str(path), 'w') as container:
        video = None
        sound = container.add_stream(audio, rate=rate) if audio else None
        if sound is not None:
            sound.layout = 'mono'
        sent = 0
        for i, img in enumerate(frames):
            if video is None:
                video = container.add_stream('libx264', rate=fps)
                video.height, video.width, video.pix_fmt = *img.shape[:2], 'yuv420p'
                if rotation:
                    video.set_display_rotation(rotation)
            container.mux(video.encode(av.VideoFrame.from_ndarray(img, format='rgb24')))
            if sound is not None:  # audio up to this frame's end
                sent = mux_tone(container, sound, sent, (i + 1) * rate / fps, amplitude=0.3)
        container.mux(video.encode())
        if sound is not None:
            container.mux(sound.encode())
    return path


def probe(path: Path) -> dict:
    """Size, rate, frame count, the first frame, and the audio stream's codec and seconds."""
    import av

    with av.open(str(path)) as container:
        v = container.streams.video[0]
        frames = [f.to_ndarray(format='rgb24') for f in container.decode(v)]
        a = container.streams.audio[0] if container.streams.audio else None
        audio = None
        if a is not None:
            container.seek(0)
            packets = [p for p in container.demux(a) if p.pts is not None]
            end = max(float((p.pts + p.duration) * p.time_base) for p in packets)
            audio = (a.codec_context.name, end)
        return dict(
            size=(v.codec_context.width, v.codec_context.height),
            rate=float(v.average_rate),
            frames=frames,
            seconds=float(v.duration * v.time_base) if v.duration else None,
            audio=audio,
        )


def test_the_annotated_video_keeps_size_rate_length_and_audio(tiny, tmp_path, capsys) -> None:  # noqa: F811
    src = write_with_audio(tmp_path / 'holiday.mp4', moving_box(192, 128, 100))  # 4 s
    out = tmp_path / 'annotated.mp4'
    assert run(tiny, src, '--out-video', str(out), '--stride', '0.5', '--topk', '3') == 0
    assert f'wrote the annotated video {out}' in capsys.readouterr().out
    before, after = probe(src), probe(out)
    assert after['size'] == before['size'] == (192, 128) and after['rate'] == 25
    assert len(after['frames']) == len(before['frames']) == 100
    assert after['audio'][0] == 'aac' and after['audio'][1] == pytest.approx(before['audio'][1], abs=0.07)
    for a, b in zip(before['frames'][::20], after['frames'][::20], strict=True):
        diff = np.abs(a.astype(int) - b.astype(int)).mean(axis=2)
        assert diff[-4:].mean() > 40  # the strip at the bottom
        assert diff[:30, :60].mean() > 15  # the top-k panel
        assert diff[50:100].mean() < 6  # the rest is the video (encoded twice)


def test_a_video_without_audio_rotated_and_of_odd_size(tiny, tmp_path, capsys) -> None:  # noqa: F811
    """Upright at its shown size (a 90-degree display rotation turns 96x64 into 64x96); no
    audio in, none out; an odd size is padded to even, with a note."""
    src = write_with_audio(tmp_path / 'phone.mp4', moving_box(96, 64, 30), audio=None, rotation=90)
    out = tmp_path / 'phone annotated.mkv'
    assert run(tiny, src, '--out-video', str(out)) == 0
    got = probe(out)
    assert got['size'] == (64, 96) and got['audio'] is None and len(got['frames']) == 30
    odd = tmp_path / 'odd.mkv'
    from dna_mm.synthetic.videos import write_video

    write_video(odd, moving_box(65, 49, 20), fps=10, codec='mjpeg')
    assert run(tiny, odd, '--out-video', str(tmp_path / 'odd annotated.mp4')) == 0
    assert 'is padded by one pixel' in capsys.readouterr().out
    assert probe(tmp_path / 'odd annotated.mp4')['size'] == (66, 50)


def test_audio_the_container_cannot_take_is_re_encoded(tiny, tmp_path) -> None:  # noqa: F811
    src = write_with_audio(tmp_path / 'camera.mkv', moving_box(64, 48, 25), audio='pcm_s16le')
    out = tmp_path / 'camera annotated.mp4'
    assert run(tiny, src, '--out-video', str(out)) == 0
    got = probe(out)
    assert got['audio'][0] == 'aac' and got['audio'][1] == pytest.approx(1.0, abs=0.1)


def test_the_overlay_draws_the_segments_in_their_colours() -> None:
    img = np.zeros((240, 320, 3), np.uint8)
    segments = [Segment(0, 0.0, 5.0, 0.9, 0, 4), Segment(2, 5.0, 10.0, 0.8, 5, 9)]
    layout = Layout.for_height(240)
    strip = strip_image(320, layout, segments, 10.0, ['a', 'b', 'c'])
    drawn = annotate(img, 7.5, [(2, 0.8), (0, 0.15)], strip, 10.0, layout, ['a', 'b', 'c'])
    assert drawn.shape == img.shape and not img.any()  # a new array
    row = drawn[-2]
    assert tuple(row[100]) == PALETTE[0] and tuple(row[300]) == PALETTE[2]
    x = round(7.5 / 10 * 319)
    assert tuple(drawn[-2, x]) == (255, 255, 255)  # the cursor
    assert drawn[: layout.line * 2, :100].any()  # the top-k panel


def test_relevance_is_drawn_per_branch(tiny, tmp_path, capsys) -> None:  # noqa: F811
    """--relevance: the relevance maps of each window blended in (DnA: the positive branch
    orange on the left half, the negative blue on the right with ``both``); a branch the model
    does not have is one line."""
    src = write_with_audio(tmp_path / 'clip.mp4', moving_box(96, 64, 40), audio=None)
    plain, both = tmp_path / 'plain.mp4', tmp_path / 'both.mp4'
    assert run(tiny, src, '--out-video', str(plain)) == 0
    assert run(tiny, src, '--out-video', str(both), '--relevance', 'both') == 0
    assert 'relevance maps of the' in capsys.readouterr().out
    a, b = np.stack(probe(plain)['frames']).astype(int), np.stack(probe(both)['frames']).astype(int)
    middle = slice(20, 50)  # below the top-k panel, above the strip
    left, right = b[:, middle, :48] - a[:, middle, :48], b[:, middle, 48:] - a[:, middle, 48:]
    assert (left[..., 0] - left[..., 2]).mean() > 10  # orange, where the positive branch looks
    assert (right[..., 2] - right[..., 0]).max() > 40  # blue, where the negative branch looks
    # softmax (the DnA checkpoint's shared weights): its one map is drawn as the positive branch;
    # a negative one is refused before any window is scored
    softmax = ('--partial-load',)
    one_map = tmp_path / 'softmax.mp4'
    capsys.readouterr()
    assert (
        run(
            tiny,
            src,
            '--out-video',
            str(one_map),
            '--relevance',
            'pos',
            *softmax,
            cfg=('model.backbone.attn_cfg=softmax',),
        )
        == 0
    )
    c = np.stack(probe(one_map)['frames']).astype(int)[:, middle] - a[:, middle]
    assert (c[..., 0] - c[..., 2]).mean() > 10  # orange over the whole width
    message = (
        r'--relevance pos/neg: this model has no neg branch: its attention has one map \(--relevance pos'
    )
    capsys.readouterr()
    with pytest.raises(SystemExit, match=message):
        run(tiny, src, '--out-video', str(tmp_path / 'x.mp4'), '--relevance', 'both', *softmax,
            cfg=('model.backbone.attn_cfg=softmax',))  # fmt: skip
    assert ' - ' not in capsys.readouterr().out  # no window scored
