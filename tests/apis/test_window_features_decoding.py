"""``window_features`` (``tools/extract_features.py --over-time``) decodes on the thread that
``tools/infer.py --over-time`` decodes on (``OverTimePredictor.decoding``): the features and
windows are those of a plain serial pass, damaged data passed over alike, and the thread ends and
the file is closed however the pass ends (an error in either thread, Ctrl-C, a ``break``); the
tiny demo recognizer on videos written here."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import DEMO_CONFIG, TINY_DEMO_CFG, tiny_demo_recognizer
from mmengine.config import Config

import dna_mm.apis.features as features
from dna_mm.apis import inference
from dna_mm.apis.features import extract_batch, window_features
from dna_mm.over_time.frame_stream import Gap
from dna_mm.over_time.predictor import DECODING_THREAD, Decoded, OverTimePredictor
from dna_mm.synthetic.videos import write_video

FPS = 25


def moving_box(frames: int, seed: int = 0):
    """A bright box moving across a noisy dark 64x48 frame."""
    rng = np.random.default_rng(seed)
    for t in range(frames):
        img = rng.integers(0, 40, size=(48, 64, 3), dtype=np.uint8)
        x = (t * 2) % 56
        img[8:16, x : x + 8] = (230, 40, 40)
        yield img


@pytest.fixture(scope='module')
def tiny(tmp_path_factory) -> tuple:
    """``(model, pipeline, {name: video})``: the tiny demo recognizer with random weights, its
    test pipeline, and 4 s at 25 fps, H.264 with a key frame a second, whole and with a tenth
    of its bytes random from 40 % of the file on (a gap of damaged data)."""
    root = tmp_path_factory.mktemp('window_features')
    _, model = tiny_demo_recognizer(root)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(TINY_DEMO_CFG)
    whole = write_video(root / 'whole.mp4', moving_box(4 * FPS), fps=FPS, codec='libx264', keyint=FPS)
    data = bytearray(whole.read_bytes())
    start, size = int(len(data) * 0.4), int(len(data) * 0.1)
    data[start : start + size] = np.random.default_rng(0).bytes(size)
    (damaged := root / 'damaged.mp4').write_bytes(bytes(data))
    return model.eval(), inference.test_pipeline_of(cfg), {'whole': whole, 'damaged': damaged}


def serial(model, predictor: OverTimePredictor, video: Path, stride: float) -> tuple:
    """``window_features`` as a plain loop in this thread: decode a batch, take its features,
    decode the next (what it was before it decoded ahead); and the stream's gaps."""
    from mmengine.dataset import pseudo_collate

    feats, times, batch = [], [], []

    def flush() -> None:
        samples = [predictor.sample(w, str(video)) for w in batch]
        data = model.data_preprocessor(pseudo_collate(samples), False)
        feats.append(extract_batch(model, data['inputs']))
        times.extend((w.start, w.end) for w in batch)
        batch.clear()

    stream, stride = predictor.open(str(video), stride)
    with stream:
        for window in predictor.windows(stream, stride):
            batch.append(window)
            if len(batch) == predictor.batch_size:
                flush()
        if batch:
            flush()
    return np.concatenate(feats), np.asarray(times).reshape(-1, 2), stream.gaps


def decoding_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == DECODING_THREAD}


@pytest.mark.parametrize('name', ['whole', 'damaged'])
def test_the_features_are_those_of_a_serial_pass(tiny, name: str) -> None:
    """The same features, bit for bit, and the same windows, in batches of 4 (the last one short;
    one across the gap of the damaged copy)."""
    model, pipeline, videos = tiny
    predictor = OverTimePredictor(model, pipeline, batch_size=4)
    want, want_times, gaps = serial(model, predictor, videos[name], 0.2)
    got, times = window_features(model, predictor, str(videos[name]), 0.2)
    assert (len(gaps) == 1) == (name == 'damaged')  # the copy has its gap
    assert len(want) > 2 * 4 and len(want) % 4  # several batches, the last one short
    assert times.dtype == np.float64 and np.array_equal(times, want_times)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize('error', [RuntimeError, KeyboardInterrupt])
def test_an_error_while_a_batch_is_handled_ends_the_decoding_thread(tiny, monkeypatch, error) -> None:
    """An error (or Ctrl-C) while the model takes a batch's features: raised as it is, once the
    decoding thread, which was decoding ahead meanwhile, has ended and the file is closed."""
    model, pipeline, videos = tiny
    predictor = OverTimePredictor(model, pipeline, batch_size=2)
    before, seen, closed = decoding_threads(), [], []
    opened = predictor.open

    def open_(*args, **kwargs):
        stream, stride = opened(*args, **kwargs)
        close = stream.close
        stream.close = lambda: closed.append(close())
        return stream, stride

    def failing(*args, **kwargs):
        seen.append(decoding_threads() - before)
        if len(seen) == 2:
            raise error('in the second batch')
        return extract_batch(*args, **kwargs)

    monkeypatch.setattr(predictor, 'open', open_)
    monkeypatch.setattr(features, 'extract_batch', failing)
    with pytest.raises(error, match='in the second batch'):
        window_features(model, predictor, str(videos['whole']), 0.2)
    assert all(len(alive) == 1 for alive in seen)  # the batches were taken while it decoded ahead
    assert decoding_threads() <= before and closed == [None]


def test_an_error_in_the_decoding_thread_reaches_the_caller(tiny, monkeypatch) -> None:
    model, pipeline, videos = tiny
    predictor = OverTimePredictor(model, pipeline, batch_size=2)
    before, packed = decoding_threads(), []
    sample = predictor.sample

    def failing(window, video):
        packed.append(threading.current_thread().name)
        if len(packed) == 5:
            raise ValueError('the fifth window')
        return sample(window, video)

    monkeypatch.setattr(predictor, 'sample', failing)
    with pytest.raises(ValueError, match='the fifth window'):
        window_features(model, predictor, str(videos['whole']), 0.2)
    assert set(packed) == {DECODING_THREAD} and decoding_threads() <= before


def test_a_consumer_that_stops_early_ends_the_thread(tiny) -> None:
    """A ``break`` out of the windows: the thread, blocked on a full queue, ends and the stream is
    closed; what came before the break came in order, the gap in its place."""
    model, pipeline, videos = tiny
    predictor = OverTimePredictor(model, pipeline, batch_size=1)
    before, items, closed = decoding_threads(), [], []
    stream, stride = predictor.open(str(videos['damaged']), 0.2)
    close = stream.close
    stream.close = lambda: closed.append(close())
    with predictor.decoding(stream, stride) as ahead:
        for item in ahead:
            items.append(item)
            if isinstance(item, Gap):
                break
    assert decoding_threads() <= before and closed == [None]
    assert isinstance(items[-1], Gap) and all(isinstance(d, Decoded) for d in items[:-1])
    starts = [d.window.start for d in items[:-1]]
    assert starts == sorted(starts) and items[-2].window.end <= items[-1].start
