"""dna_mm's PyAV reader (dna_mm.datasets.video_reader.KeyframeReader) against decord's
VideoReader on real encoded files: the same frame count and the same frames for any indices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dna_mm.datasets.video_reader import KeyframeReader, frames_in_sequence
from dna_mm.errors import DataError
from dna_mm.synthetic.videos import panning_clip, write_video


@pytest.fixture(scope='module')
def files(tmp_path_factory) -> dict[str, Path]:
    """H.264 with B-frames (decode order differs from presentation order) and a keyframe every
    5 frames; MPEG-4 Part 2 in AVI (as NTU RGB+D ships); H.264 with x264's default interval."""
    root = tmp_path_factory.mktemp('reader')
    return {
        'h264_keyint5': write_video(root / 'a b é.mp4', panning_clip(128, 96, 60), codec='libx264', keyint=5),
        'mpeg4_avi': write_video(root / 'sample.avi', panning_clip(96, 64, 50), keyint=12),
        'h264_default': write_video(root / 'long.mp4', panning_clip(64, 48, 90), codec='libx264'),
    }


@pytest.mark.parametrize('name', ['h264_keyint5', 'mpeg4_avi', 'h264_default'])
def test_same_frames_as_decord_in_any_order(files, name) -> None:
    import decord

    path = str(files[name])
    ours, theirs = KeyframeReader(path), decord.VideoReader(path, num_threads=1)
    assert len(ours) == len(theirs)
    n = len(ours)
    rng = np.random.default_rng(0)
    for inds in (
        list(range(0, n, 7)),  # increasing, several keyframes apart
        [n - 1, 0, n // 2, n // 2, 1],  # backwards and repeated
        sorted(rng.choice(n, 8, replace=False).tolist()),
        [3, 4, 5, 6],  # consecutive: no seek in between
    ):
        np.testing.assert_array_equal(
            ours.get_batch(inds), theirs.get_batch(inds).asnumpy(), err_msg=str(inds)
        )
    # the frames differ from each other: an indexing error could not pass
    first, last = ours.get_batch([0, n - 1])
    assert np.abs(first.astype(int) - last.astype(int)).mean() > 5
    assert ours.get_avg_fps() == pytest.approx(theirs.get_avg_fps())


def test_scaled_frames_are_the_downscaled_picture(files) -> None:
    import cv2

    path = str(files['h264_keyint5'])
    small = KeyframeReader(path, size=(64, 48)).get_batch([0, 30])
    full = KeyframeReader(path).get_batch([0, 30])
    assert small.shape == (2, 48, 64, 3)
    for a, b in zip(small, full, strict=True):
        ref = cv2.resize(b, (64, 48), interpolation=cv2.INTER_AREA).astype(int)
        assert np.abs(a.astype(int) - ref).mean() < 4


def test_bad_indices_and_unreadable_files_name_the_file(files, tmp_path) -> None:
    path = str(files['mpeg4_avi'])
    reader = KeyframeReader(path, name=path)
    with pytest.raises(DataError, match=r'sample\.avi: frame index 50 outside \[0, 50\)'):
        reader.get_batch([0, 50])
    truncated = tmp_path / 'truncated.mp4'
    truncated.write_bytes(files['h264_keyint5'].read_bytes()[:2000])
    with pytest.raises(
        DataError, match=r'truncated\.mp4: an MP4 / MOV file without its index \(no moov box\)'
    ):
        KeyframeReader(str(truncated), name=str(truncated)).get_batch([0, 40])
    raw = tmp_path / 'raw.h264'  # an elementary stream: packets carry no timestamps
    import av

    with av.open(str(raw), 'w', format='h264') as container:
        stream = container.add_stream('libx264', rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, 'yuv420p'
        for image in panning_clip(64, 48, 4):
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format='rgb24')))
        container.mux(stream.encode())
    with pytest.raises(DataError, match='raw.h264: a packet without a presentation timestamp'):
        KeyframeReader(str(raw), name=str(raw))
    sound = tmp_path / 'sound.wav'
    with av.open(str(sound), 'w') as container:
        stream = container.add_stream('pcm_s16le', rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format='s16', layout='mono')
        frame.sample_rate = 8000
        container.mux(stream.encode(frame))
    with pytest.raises(DataError, match='sound.wav: no video stream'):
        KeyframeReader(str(sound), name=str(sound))


def test_keyframe_only_decoding_asks_for_decord(files) -> None:
    from mmaction.registry import TRANSFORMS

    results = dict(filename=str(files['mpeg4_avi']), start_index=0, modality='RGB')
    results = TRANSFORMS.build(dict(type='ScaledPyAVInit'))(results)
    results['frame_inds'] = np.array([0, 12])
    with pytest.raises(ValueError, match="mode='efficient'.*ScaledDecordInit"):
        TRANSFORMS.build(dict(type='SortedDecordDecode', mode='efficient'))(results)


def test_a_stream_cut_before_its_first_keyframe(files, tmp_path) -> None:
    """Packets copied from the middle of a GOP (a cut without re-encoding): FFmpeg's decoder puts
    out no frame before the first keyframe (their references were cut away), so the reader
    counts from it and returns the frames decoded in sequence; decord counts the packets (two
    more) and returns approximations of the undecodable ones."""
    import av
    import decord

    cut = tmp_path / 'cut.mkv'
    with av.open(str(files['h264_keyint5'])) as source, av.open(str(cut), 'w') as target:
        stream = target.add_stream_from_template(source.streams.video[0])
        for n, packet in enumerate(source.demux(source.streams.video[0])):
            if packet.size and n >= 3:
                packet.stream = stream
                target.mux(packet)
    _, reference = frames_in_sequence(str(cut))
    ours, theirs = KeyframeReader(str(cut)), decord.VideoReader(str(cut), num_threads=1)
    assert len(ours) == len(reference) == len(theirs) - 2 and ours.fallback is None
    for inds in ([0, 1, len(ours) - 1], [len(ours) - 1, 0, 7, 3]):
        np.testing.assert_array_equal(ours.get_batch(inds), np.stack([reference[i] for i in inds]))
