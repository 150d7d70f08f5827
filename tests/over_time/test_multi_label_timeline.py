"""A multi-label model over time (``tools/infer.py --over-time``): each class's own probability a
window, and segments that are each class's runs at or above ``--threshold``, which may overlap (a
model's co-occurring actions; the runs of the top class alone showed one action at a time), drawn
in a lane a class on the annotated video's strip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import MULTI_LABEL_OPTIONS
from test_over_time import run, ten_seconds, tiny  # noqa: F401  (the module's fixtures)

from dna_mm.over_time.overlay import PALETTE, Layout, strip_image
from dna_mm.over_time.segments import Segment, find_segments


def test_each_class_has_its_runs_above_the_threshold_which_may_overlap() -> None:
    starts = np.arange(10) * 1.0
    ends = starts + 1.0
    scores = np.full((10, 3), 0.1)
    scores[0:6, 0] = 0.9  # class 0 from 0 s to 6 s
    scores[3:8, 1] = 0.7  # class 1 from 3 s to 8 s, beside it
    scores[9, 2] = 0.6  # one window of class 2: shorter than min_length
    multi = dict(duration=10.0, threshold=0.5)
    found = find_segments(starts, ends, scores, **multi)
    assert [(s.label, s.start, s.end, s.first, s.last) for s in found] == [
        (0, 0.0, 6.0, 0, 5),
        (1, 3.0, 8.0, 3, 7),
        (2, 9.0, 10.0, 9, 9),
    ]
    assert found[0].score == pytest.approx(0.9) and found[1].score == pytest.approx(0.7)
    assert [s.label for s in find_segments(starts, ends, scores, min_length=1.5, **multi)] == [0, 1]
    assert [s.label for s in find_segments(starts, ends, scores, duration=10.0, threshold=0.8)] == [0]
    # smoothing over 3 windows: class 2's lone window (0.6 + 0.1) / 2 at the end falls below 0.5
    assert [s.label for s in find_segments(starts, ends, scores, width=3, **multi)] == [0, 1]
    gapped = scores.copy()
    gapped[2, 0] = 0.2  # class 0 twice
    assert [(s.label, s.first, s.last) for s in find_segments(starts, ends, gapped, threshold=0.5)][:2] == [
        (0, 0, 1),
        (0, 3, 5),
    ]


def test_overlapping_segments_are_drawn_in_a_lane_a_class() -> None:
    layout = Layout.for_height(240)
    both = [Segment(0, 0.0, 6.0, 0.9, 0, 5), Segment(2, 3.0, 10.0, 0.7, 3, 9)]
    strip = strip_image(320, layout, both, 10.0)
    half = layout.strip // 2
    x = 150  # 4.7 s: both classes
    assert tuple(strip[half // 2, x]) == PALETTE[0] and tuple(strip[half + half // 2, x]) == PALETTE[2]
    assert tuple(strip[half + half // 2, 40]) != PALETTE[2]  # class 2 starts at 3 s
    one_after_another = strip_image(320, layout, [both[0], Segment(2, 6.0, 10.0, 0.7, 6, 9)], 10.0)
    assert tuple(one_after_another[layout.strip - 2, 100]) == PALETTE[0]  # one lane, the whole height


def test_over_time_with_a_multi_label_model_segments_each_class(tiny, ten_seconds, tmp_path, capsys) -> None:  # noqa: F811
    out, video = tmp_path / 'timeline.json', tmp_path / 'annotated.mp4'
    extra = ['--over-time', '--stride', '0.5', '--topk', '4', '--out', str(out)]  # the threshold's default
    assert run(tiny, ten_seconds, *extra, '--out-video', str(video), cfg=tuple(MULTI_LABEL_OPTIONS)) == 0
    printed = capsys.readouterr().out
    assert 'segments (smoothed over 5 windows; each class at or above 0.50):' in printed
    data = json.loads(out.read_text())
    assert data['smoothing'] == dict(windows=5, min_segment=0.0, threshold=0.5)
    scores = np.zeros((len(data['windows']), 4))
    for i, w in enumerate(data['windows']):
        for top in w['top']:
            scores[i, top['class']] = top['score']
    assert ((scores > 0) & (scores < 1)).all()  # each class's own probability, not a softmax's share
    assert not np.allclose(scores.sum(axis=1), 1.0, atol=0.01)
    expected = find_segments(
        [w['start'] for w in data['windows']],
        [w['end'] for w in data['windows']],
        scores,
        width=5,
        duration=data['duration'],
        threshold=0.5,
    )
    assert [(s['class'], s['start'], s['end']) for s in data['segments']] == [
        (e.label, round(e.start, 3), round(e.end, 3)) for e in expected
    ]
    assert data['segments'] and all(s['score'] >= 0.5 for s in data['segments'])
    assert video.stat().st_size > 0


def test_a_threshold_outside_0_and_1_is_one_line(tiny, ten_seconds, capsys) -> None:  # noqa: F811
    with pytest.raises(SystemExit):
        run(tiny, ten_seconds, '--over-time', '--threshold', '1.5')
    assert '--threshold must be a probability between 0 and 1, got 1.5' in capsys.readouterr().err
