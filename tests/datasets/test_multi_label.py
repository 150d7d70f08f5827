"""Multi-label lists (``multi_class=True``, ``num_classes=N``, lines ``path l1 l2 ...``) read by
dna_mm's robust datasets, built through MMAction2's registry on the tiny video set: each line's
classes for mmengine's ``ClassBalancedDataset``, one line for each mistake at build time (no
``num_classes``, a line without a label, a multi-label list read as a single-label one), and
``tools/test.py --dump x.csv`` writing each video's classes, not its one-hot target."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest
import torch
from conftest import DEMO_CONFIG, run_main, tiny_run_options
from mmaction.registry import DATASETS
from mmaction.utils import register_all_modules

import dna_mm.datasets  # noqa: F401  (registers the robust datasets)
from dna_mm.errors import ConfigError, DataError
from dna_mm.evaluation.dump import DumpPredictions

register_all_modules()

#: the classes of the 8 lines of the multi-label training list (the tiny set's train videos, in order)
TRAIN_CLASSES = [[0], [0], [0], [0, 1], [0], [2], [2, 3], [0, 2]]


def _videos(root: Path, split: str) -> list[str]:
    return [line.split()[0] for line in (root / f'{split}.txt').read_text().splitlines()]


def _multi_label_list(path: Path, videos: list[str], classes: list[list[int]]) -> Path:
    """A list of ``videos`` with several labels a line (``classes``, a line's in that order)."""
    path.write_text(''.join(f'{v} {" ".join(map(str, c))}\n' for v, c in zip(videos, classes, strict=True)))
    return path


def _video_cfg(ann: Path, root: Path, **kw) -> dict:
    return dict(
        type='RobustVideoDataset',
        ann_file=str(ann),
        data_prefix=dict(video=str(root / 'videos')),
        pipeline=[],
        **kw,
    )


def _frames_cfg(ann: Path, **kw) -> dict:
    """A frame-folder dataset that does not look for its folders (only its list is read)."""
    return dict(type='RobustRawframeDataset', ann_file=str(ann), pipeline=[], check_files=False, **kw)


def test_class_balanced_sampling_repeats_by_each_lines_classes(tiny_video_set, tmp_path) -> None:
    """mmengine's ``ClassBalancedDataset`` asks ``get_cat_ids`` for each line's classes; MMAction2
    has made a multi-label line's labels a one-hot tensor by then (``int()`` of it failed)."""
    ann = _multi_label_list(tmp_path / 'train.txt', _videos(tiny_video_set, 'train'), TRAIN_CLASSES)
    ds = DATASETS.build(_video_cfg(ann, tiny_video_set, multi_class=True, num_classes=4))
    assert [ds.get_data_info(i)['label'].tolist() for i in range(2, 4)] == [[1, 0, 0, 0], [1, 1, 0, 0]]
    assert [ds.get_cat_ids(i) for i in range(len(ds))] == TRAIN_CLASSES
    balanced = DATASETS.build(
        dict(
            type='ClassBalancedDataset',
            oversample_thr=0.5,
            dataset=_video_cfg(ann, tiny_video_set, multi_class=True, num_classes=4),
        )
    )
    # by hand: class 0 is in 6 of the 8 lines, class 1 in 1, class 2 in 3, class 3 in 1, so the
    # class factors max(1, sqrt(0.5 / f)) are 1, sqrt(0.5 / (1/8)) = 2, sqrt(0.5 / (3/8)) = sqrt(4/3)
    # and 2, and a line's is the largest of its classes'
    r2 = math.sqrt(4 / 3)
    expected = [1, 1, 1, 2, 1, r2, 2, r2]
    assert balanced._get_repeat_factors(balanced.dataset, 0.5) == pytest.approx(expected)
    assert balanced.repeat_indices == [0, 1, 2, 3, 3, 4, 5, 5, 6, 6, 7, 7]  # ceil of each factor
    assert len(balanced) == 12


def test_multi_class_without_num_classes_is_one_line_at_build(tiny_video_set, tmp_path) -> None:
    """MMAction2's own datasets assert it; without it the first training sample failed in a loader
    worker (``torch.zeros(None)``), a traceback naming no key."""
    ann = _multi_label_list(tmp_path / 'train.txt', _videos(tiny_video_set, 'train'), TRAIN_CLASSES)
    expected = (
        f"{ann}: multi_class=True needs num_classes (the length of the 0/1 target that each line's "
        "labels become), got none; set num_classes in the dataset's config"
    )
    with pytest.raises(ConfigError) as err:
        DATASETS.build(_video_cfg(ann, tiny_video_set, multi_class=True))
    assert str(err.value) == expected
    frames = tmp_path / 'frames.txt'
    frames.write_text('clip_a 8 0 1\n')
    with pytest.raises(ConfigError, match=r'frames\.txt: multi_class=True needs num_classes \('):
        DATASETS.build(_frames_cfg(frames, multi_class=True))


def test_a_multi_label_line_without_a_label_is_named_unless_labels_are_optional(
    tiny_video_set, tmp_path
) -> None:
    """A multi-label line with no label trained as an all-zero target: a video of no class, as a
    single-label line without its label would be, which is refused unless ``labels_optional``."""
    videos = _videos(tiny_video_set, 'train')[:4]
    ann = tmp_path / 'train.txt'
    ann.write_text(f'{videos[0]} 0\n{videos[1]} 0\n{videos[2]} 1 2\n{videos[3]}\n')
    with pytest.raises(DataError) as err:
        DATASETS.build(_video_cfg(ann, tiny_video_set, multi_class=True, num_classes=4))
    assert str(err.value) == (
        f'{ann}:4: expected "path label [label ...]", got {videos[3]!r} (no label; a list of videos '
        'without labels, such as an OOD list, needs labels_optional=True)'
    )
    ood = DATASETS.build(
        _video_cfg(ann, tiny_video_set, multi_class=True, num_classes=4, labels_optional=True, test_mode=True)
    )
    assert ood.get_data_info(3)['label'].tolist() == [0, 0, 0, 0]  # no class, not the last one
    assert [ood.get_cat_ids(i) for i in range(4)] == [[0], [0], [1, 2], []]
    frames = tmp_path / 'frames.txt'
    frames.write_text('clip_a 8 0 1\nclip_b 8\n')
    with pytest.raises(
        DataError, match=r'frames\.txt:2: expected "frame_dir total_frames label \[label \.\.\.\]", got '
    ):
        DATASETS.build(_frames_cfg(frames, multi_class=True, num_classes=4))


def test_a_multi_label_list_read_as_single_label_is_said_to_be_one(tiny_video_set, tmp_path) -> None:
    """``video.mp4 1 2`` without ``multi_class`` was diagnosed as a line of frame folders
    (``frame_dir total_frames label``); a line whose first field is no video file still is."""
    videos = _videos(tiny_video_set, 'train')
    ann = _multi_label_list(tmp_path / 'train.txt', videos, TRAIN_CLASSES)
    with pytest.raises(DataError) as err:
        DATASETS.build(_video_cfg(ann, tiny_video_set, num_classes=4))
    assert str(err.value) == (
        f"{ann}:4: '{videos[3]} 0 1' gives the video {videos[3]} 2 labels (0 1), and the dataset reads "
        'one label a video; for a multi-label list set multi_class=True and num_classes (the number of '
        "classes) in the dataset's config, and multi_class=True with loss_cls=dict(type='BCELossWithLogits') "
        "in the model's cls_head"
    )
    ann.write_text(f'{videos[0]} 0\nclip_a 16 2\n')
    with pytest.raises(
        DataError, match=r"train\.txt:2: 'clip_a 16 2' is a line of a list of frame folders \("
    ):
        DATASETS.build(_video_cfg(ann, tiny_video_set, num_classes=4))


def test_a_multi_label_tests_dump_writes_each_videos_classes(
    tiny_video_set, tiny_checkpoint, tmp_path
) -> None:
    """``tools/test.py --dump x.csv`` of a multi-label test wrote the one-hot target (``1 0 0 1``,
    read as four class indices); it writes the line's classes, in increasing order."""
    test_classes = [[3, 0], [1], [0, 1, 2], [2]]
    ann = _multi_label_list(tmp_path / 'test.txt', _videos(tiny_video_set, 'test'), test_classes)
    config = tmp_path / 'multi_label.py'
    config.write_text(
        f"""_base_ = [{DEMO_CONFIG!r}]
model = dict(cls_head=dict(multi_class=True, loss_cls=dict(type='BCELossWithLogits'), average_clips='score'))
_multi = dict(multi_class=True, num_classes=4)
train_dataloader = dict(dataset=_multi)
val_dataloader = dict(dataset=_multi)
test_dataloader = dict(dataset=_multi)
val_evaluator = dict(type='AccMetric', metric_list=('mmit_mean_average_precision', 'mean_average_precision'))
test_evaluator = val_evaluator
"""
    )
    opts = [
        o for o in tiny_run_options(tiny_video_set) if not o.startswith('test_dataloader.dataset.ann_file=')
    ]
    dump = tmp_path / 'preds.csv'
    proc = run_main(
        ['tools/test.py', str(config), str(tiny_checkpoint), '--work-dir', str(tmp_path / 't')]
        + ['--dump', str(dump), '--cfg-options', f'test_dataloader.dataset.ann_file={ann}', *opts]
    )
    assert re.search(r'^Test results: mAP: \d+\.\d\d  mmit mAP: \d+\.\d\d$', proc.stdout, re.M), proc.stdout[
        -3000:
    ]
    rows = list(csv.DictReader(dump.open()))
    videos = [str(tiny_video_set / 'videos' / v) for v in _videos(tiny_video_set, 'test')]
    assert [(r['video'], r['label']) for r in rows] == list(
        zip(videos, ['0 3', '1', '0 1 2', '2'], strict=True)
    )
    for r in rows:
        assert sorted(r['top5'].split()) == ['0', '1', '2', '3'] and r['pred'] == r['top5'].split()[0]
        assert 0 < float(r['score']) < 1  # its class's own probability (test_a_multi_label_dump_...)


def test_a_single_label_dump_is_as_it_was(tmp_path) -> None:
    """The single-label rows, byte for byte as before multi-label targets were told apart:
    MMAction2's label (a 1-element integer tensor, ``-1`` for an OOD video) and MMPretrain's (an
    integer tensor of class indices, several for its multi-label samples) as they are."""
    scores = torch.tensor([0.15, 0.6, 0.2, 0.05])
    samples = [
        dict(filename='a.mp4', pred_scores=dict(item=scores), gt_labels=dict(item=torch.tensor([2]))),
        dict(
            filename='b.mp4', pred_scores=dict(item=scores.flip(0)), gt_labels=dict(item=torch.tensor([-1]))
        ),
        dict(img_path='c.jpg', pred_score=scores, gt_label=torch.tensor([0, 3])),
    ]
    path = tmp_path / 'preds.csv'
    metric = DumpPredictions(out_file_path=str(path))
    metric.process({}, samples[:2])
    metric.compute_metrics(metric.results)
    rows = [b'video,label,pred,score,top5', b'a.mp4,2,1,0.6,1 2 0 3', b'b.mp4,-1,2,0.6,2 1 3 0']
    assert path.read_bytes() == b''.join(r + b'\r\n' for r in rows)
    metric.results = []
    metric.process({}, samples[2:])
    metric.compute_metrics(metric.results)
    assert path.read_bytes() == b'image,label,pred,score,top5\r\nc.jpg,0 3,1,0.6,1 2 0 3\r\n'


def test_a_multi_label_dump_writes_each_classs_probability(tmp_path) -> None:
    """A multi-label head's scores are its mean logits (``average_clips='score'``): the dump writes
    the top class's own probability, their sigmoid (it wrote the logit: 2.0, -0.4), ranked as
    before; ``tools/test.py --dump`` asks it of a multi-label head's config."""
    from dna_mm.evaluation.dump import dump_evaluator

    logits = torch.tensor([2.0, -1.0, 0.5, -3.0])
    path = tmp_path / 'preds.csv'
    metric = DumpPredictions(out_file_path=str(path), multi_label=True)
    one_hot = torch.tensor([1.0, 0.0, 1.0, 0.0])
    metric.process({}, [dict(filename='a.mp4', pred_scores=dict(item=logits), gt_labels=dict(item=one_hot))])
    metric.compute_metrics(metric.results)
    assert path.read_bytes() == b'video,label,pred,score,top5\r\na.mp4,0 2,0,0.880797,0 2 1 3\r\n'
    assert dump_evaluator('x.csv', False, multi_label=True)['multi_label'] is True
