"""The annotated video (tools/infer.py --out-video): the input's size (a frame too small for the
overlay enlarged), rate, length and audio, the top-k and the segment strip on every frame; the
tiny recognizer of test_over_time.py."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import DEMO_CONFIG
from test_over_time import TINY, infer, moving_box, run, tiny  # noqa: F401  (the module's checkpoint fixture)

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


def white(frame: np.ndarray) -> np.ndarray:
    """Where ``frame`` is white: the overlay's text and cursor (the moving box is red, the rest dark)."""
    return (frame > 190).all(axis=2)


def test_the_annotated_video_keeps_size_rate_length_and_audio(tiny, tmp_path, capsys) -> None:  # noqa: F811
    """From 240 lines up the annotated video is the input's size (here 256 lines)."""
    src = write_with_audio(tmp_path / 'holiday.mp4', moving_box(320, 256, 100))  # 4 s
    out = tmp_path / 'annotated.mp4'
    assert run(tiny, src, '--out-video', str(out), '--stride', '0.5', '--topk', '3') == 0
    printed = capsys.readouterr().out
    assert f'wrote the annotated video {out}' in printed and 'enlarged' not in printed
    before, after = probe(src), probe(out)
    assert after['size'] == before['size'] == (320, 256) and after['rate'] == 25
    assert len(after['frames']) == len(before['frames']) == 100
    assert after['audio'][0] == 'aac' and after['audio'][1] == pytest.approx(before['audio'][1], abs=0.07)
    for a, b in zip(before['frames'][::20], after['frames'][::20], strict=True):
        diff = np.abs(a.astype(int) - b.astype(int)).mean(axis=2)
        assert diff[-4:].mean() > 40  # the strip at the bottom
        assert diff[:30, :60].mean() > 15  # the top-k panel
        assert diff[50:100].mean() < 6  # the rest is the video (encoded twice)


def test_a_video_without_audio_rotated_and_of_odd_size(tiny, tmp_path, capsys) -> None:  # noqa: F811
    """Upright at its shown size (a 90-degree display rotation turns 96x64 into 64x96, enlarged
    3x to 240 lines and more); no audio in, none out; an odd size is padded to even, with a note."""
    src = write_with_audio(tmp_path / 'phone.mp4', moving_box(96, 64, 30), audio=None, rotation=90)
    out = tmp_path / 'phone annotated.mkv'
    assert run(tiny, src, '--out-video', str(out)) == 0
    got = probe(out)
    assert got['size'] == (192, 288) and got['audio'] is None and len(got['frames']) == 30
    odd = tmp_path / 'odd.mkv'
    from dna_mm.synthetic.videos import write_video

    write_video(odd, moving_box(65, 49, 20), fps=10, codec='mjpeg')
    assert run(tiny, odd, '--out-video', str(tmp_path / 'odd annotated.mp4')) == 0
    assert 'is 326x246, enlarged 5x (each pixel a 5x5 block), padded by one pixel' in capsys.readouterr().out
    assert probe(tmp_path / 'odd annotated.mp4')['size'] == (326, 246)  # 5 x (65, 49), padded
    write_video(odd, moving_box(481, 241, 20), fps=10, codec='mjpeg')
    assert run(tiny, odd, '--out-video', str(tmp_path / 'odd annotated.mp4')) == 0
    assert 'is padded by one pixel' in capsys.readouterr().out
    assert probe(tmp_path / 'odd annotated.mp4')['size'] == (482, 242)


def test_a_small_video_is_enlarged_for_a_readable_overlay(tiny, tmp_path, capsys) -> None:  # noqa: F811
    """64x48 (the demo's size): written 5x as large, 320x240 (the overlay's readable minimum),
    each pixel a 5x5 block; the top-k panel and the clock inside the frame, the strip at the bottom."""
    from dna_mm.synthetic.videos import write_video

    src = write_video(tmp_path / 'demo.mp4', moving_box(64, 48, 50), fps=25, codec='libx264')
    out = tmp_path / 'demo annotated.mp4'
    assert run(tiny, src, '--out-video', str(out), '--topk', '4') == 0
    printed = capsys.readouterr().out
    assert f'{src} is 64x48, too small for a readable overlay: {out} is 320x240, enlarged 5x' in printed
    before, after = probe(src), probe(out)
    assert after['size'] == (320, 240) and len(after['frames']) == 50
    for a, b in zip(before['frames'][::10], after['frames'][::10], strict=True):
        big = a.repeat(5, axis=0).repeat(5, axis=1).astype(int)
        assert np.abs(big - b.astype(int))[70:200].mean() < 6  # the video, enlarged, between the overlays
        text = white(b)
        panel, clock = text[:60], text[180:224]  # 4 lines of 10 rows; the clock above the strip
        assert panel[:, :5].sum() == 0 and panel[:, -5:].sum() == 0 and panel[:, 5:150].sum() > 100
        assert clock[:, :100].sum() == 0 and clock[:, -5:].sum() == 0 and clock[:, 200:].sum() > 40
        diff = np.abs(big - b.astype(int)).mean(axis=2)
        assert diff[-6:].mean() > 40  # the strip


@pytest.mark.parametrize(('size', 'enlarged'), [((320, 64), (1280, 256)), ((64, 320), (128, 640))])
def test_a_wide_or_narrow_video_keeps_the_overlay_in_the_frame(tiny, tmp_path, size, enlarged) -> None:  # noqa: F811
    """Very wide (320x64: 4x, to 256 lines) or very narrow (64x320: 240 lines, but a label does
    not fit 64 pixels: 2x, the font made as small as 240 lines' to fit 128 pixels)."""
    from dna_mm.synthetic.videos import write_video

    src = write_video(tmp_path / 'clip.mp4', moving_box(*size, 20), fps=25, codec='libx264')
    out = tmp_path / 'annotated.mp4'
    assert run(tiny, src, '--out-video', str(out), '--topk', '5') == 0
    got = probe(out)
    assert got['size'] == enlarged
    w, h = enlarged
    for frame in got['frames'][::5]:
        text = white(frame)
        strip = round(h * 0.045)  # the cursor reaches a third of it above it
        panel, clock = text[: h // 8], text[h - h // 8 : h - strip - strip // 3 - 1]
        assert panel[:, :3].sum() == 0 and panel[:, -4:].sum() == 0 and panel.sum() > 200
        assert clock[:, :3].sum() == 0 and clock[:, -2:].sum() == 0 and clock.sum() > 40


def test_the_enlargement() -> None:
    """The smallest whole factor to 240 lines and room for the widest line of text; none above."""
    from dna_mm.over_time.overlay import Layout, enlargement, fits, overlay_texts

    texts = overlay_texts([[(1, 0.5), (3, 0.25)]], ['still', 'horizontal', 'vertical', 'diagonal'], 24.0)
    assert texts[-1] == '0:24.0 / 0:24.0' and '0.50  horizontal' in texts
    sizes = {(64, 48): 5, (32, 32): 8, (65, 49): 5, (320, 64): 4, (64, 320): 2, (320, 240): 1}
    sizes[1920, 1080] = 1
    for (w, h), factor in sizes.items():
        assert enlargement(w, h, texts) == factor, (w, h)
        assert h * factor >= 240 and fits(texts, Layout.for_frame(w * factor, h * factor, texts), w * factor)
    long = ['1.00  using remote controller (not gaming)']
    assert enlargement(64, 480, long) == 4  # its 42 characters need 243 pixels
    assert Layout.for_frame(720, 1280, long).font < Layout.for_height(1280).font  # portrait: smaller
    assert Layout.for_frame(1280, 720, long) == Layout.for_height(720)  # it fits: as before
    assert enlargement(16, 4000, long) == 1  # no more than 4096 pixels a side: the label is cut


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
    orange on the left, the negative blue on the right with ``both``, each on the frame at half
    its size, its shape kept, between black bands); a branch the model does not have is one
    line."""
    src = write_with_audio(tmp_path / 'clip.mp4', moving_box(96, 64, 40), audio=None)
    plain, both = tmp_path / 'plain.mp4', tmp_path / 'both.mp4'
    assert run(tiny, src, '--out-video', str(plain)) == 0
    assert run(tiny, src, '--out-video', str(both), '--relevance', 'both') == 0
    assert 'relevance maps of the' in capsys.readouterr().out
    a, b = np.stack(probe(plain)['frames']).astype(int), np.stack(probe(both)['frames']).astype(int)
    assert a.shape[1:3] == b.shape[1:3] == (256, 384)  # 4x
    # each branch on the frame at half its size ([128, 192]: rows 64-192), side by side
    half = np.stack([cv2.resize(f.astype(np.uint8), (192, 128), interpolation=cv2.INTER_AREA) for f in a])
    left, right = b[:, 64:192, :192] - half, b[:, 64:192, 192:] - half
    assert (left[..., 0] - left[..., 2]).mean() > 10  # orange, where the positive branch looks
    assert (right[..., 2] - right[..., 0]).max() > 40  # blue, where the negative branch looks
    assert b[:, 196:210].max() < 24  # the band below them: black (above the clock and the strip)
    middle = slice(80, 200)  # below the top-k panel, above the strip
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


def test_relevance_on_an_enlarged_video_covers_the_view(tiny, tmp_path) -> None:  # noqa: F811
    """64x48 enlarged 5x with --relevance pos: the map is drawn over the part of the enlarged
    frame the model's view covers (a centre crop: Resize to 32 lines, keeping the ratio, then
    32x32: the middle 0.75 of the width, 5 x 7.5 to 5 x 56.5 pixels), nothing beside it."""
    from dna_mm.synthetic.videos import write_video

    config = tmp_path / 'cropped.py'
    config.write_text(
        f'_base_ = [{DEMO_CONFIG!r}]\n'
        'test_dataloader = dict(dataset=dict(pipeline=[\n'
        "    dict(type='DecordInit', io_backend='disk'),\n"
        "    dict(type='SampleFrames', clip_len=8, frame_interval=2, num_clips=1, test_mode=True),\n"
        "    dict(type='DecordDecode'),\n"
        "    dict(type='Resize', scale=(-1, 32)),\n"
        "    dict(type='CenterCrop', crop_size=32),\n"
        "    dict(type='FormatShape', input_format='NCTHW'),\n"
        "    dict(type='PackActionInputs'),\n"
        ']))\n'
    )
    src = write_video(tmp_path / 'demo.mp4', moving_box(64, 48, 40), fps=25, codec='libx264')
    ckpt, names = tiny
    frames = {}
    for name, extra in (('plain', ()), ('pos', ('--relevance', 'pos'))):
        out = tmp_path / f'{name}.mp4'
        args = [str(config), str(ckpt), str(src), '--label-map', str(names), '--out-video', str(out), *extra]
        assert infer.main([*args, '--cfg-options', *TINY]) == 0
        frames[name] = np.stack(probe(out)['frames']).astype(int)
    a, b = frames['plain'], frames['pos']
    assert a.shape[1:3] == b.shape[1:3] == (240, 320)
    tint = (b - a)[:, 70:200]  # below the top-k panel, above the strip
    orange = tint[..., 0] - tint[..., 2]
    assert np.abs(tint[:, :, :30]).mean() < 3 and np.abs(tint[:, :, -30:]).mean() < 3  # outside the view
    assert orange[:, :, 45:275].mean() > 10  # inside it
