"""``DumpPredictions`` (``tools/test.py --dump preds.csv``) on an image classifier: MMPretrain's
samples carry ``pred_score`` / ``gt_label`` tensors and ``img_path``, not MMAction2's
``pred_scores`` / ``gt_labels`` and ``filename`` (the video case: tests/tools/test_train_test.py).
A tiny DnA-ViT-T of the ImageNet config (32 px, patch 8, 2 blocks, 4 classes) on generated
``val/<wnid>/*.JPEG`` folders."""

from __future__ import annotations

import csv
import re

import numpy as np
import torch
from conftest import REPO, WNIDS, run_main, tiny_imagenet_options


def test_an_image_classifiers_test_dumps_one_row_per_image(tmp_path) -> None:
    import cv2

    from dna_mm.config.model import model_from_config
    from dna_mm.tools.cli import cfg_options

    root = tmp_path / 'imagenet'
    rng = np.random.default_rng(0)
    for wnid in WNIDS:
        (root / 'val' / wnid).mkdir(parents=True)
        for i in range(2):
            image = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
            cv2.imwrite(str(root / 'val' / wnid / f'{wnid}_{i}.JPEG'), image)
    config = str(REPO / 'configs' / 'imagenet' / 'dna_vit-t16_in1k.py')
    opts = tiny_imagenet_options(root, batch=4)
    _, model = model_from_config(config, cfg_options(opts), clear_pretrained=True)
    checkpoint = tmp_path / 'epoch_1.pth'
    torch.save(dict(meta=dict(epoch=1), state_dict=model.state_dict()), checkpoint)
    dump = tmp_path / 'preds.csv'
    proc = run_main(
        ['tools/test.py', config, str(checkpoint), '--work-dir', str(tmp_path / 'test')]
        + ['--dump', str(dump), '--cfg-options', *opts]
    )
    assert proc.stdout.strip().splitlines()[-1].startswith('Test results: top-1: ')  # the metric too
    rows = list(csv.DictReader(dump.open()))
    assert list(rows[0]) == ['image', 'label', 'pred', 'score', 'top5']
    expected = {
        str(root / 'val' / w / f'{w}_{i}.JPEG'): str(c) for c, w in enumerate(WNIDS) for i in range(2)
    }
    assert {r['image']: r['label'] for r in rows} == expected
    for r in rows:
        top5 = r['top5'].split()
        assert r['pred'] == top5[0] and sorted(top5) == ['0', '1', '2', '3'] and 0 < float(r['score']) <= 1


def test_a_dump_that_fails_midway_leaves_the_previous_file_whole(tmp_path) -> None:
    """The CSV is written under a temporary name and renamed: a write that fails after some rows
    (here a row the writer refuses) leaves the earlier file as it was, no part of the new one."""
    import pytest

    from dna_mm.evaluation.dump import DumpPredictions

    path = tmp_path / 'preds.csv'
    path.write_text('video,label,pred,score,top5\nold.mp4,0,0,0.9,0\n')
    before = path.read_text()
    rows = [dict(video='a.mp4', label='0', pred=0, score=0.5, top5='0'), dict(video='b.mp4', bogus=1)]
    with pytest.raises(ValueError, match='bogus'):
        DumpPredictions(out_file_path=str(path)).compute_metrics(rows)
    assert path.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ['preds.csv']


def test_the_pickle_dumps_are_mmengines_and_a_failed_one_leaves_the_previous_file_whole(tmp_path) -> None:
    """``--dump x.pkl`` (mmengine's ``DumpResults``; MMDetection's ``DumpDetResults`` for a
    detector) opened the final name for writing: a write the storage refused midway (here a real
    file-size limit, as a full disk) left the previous file cut short. Now it is the same pickle,
    written under a temporary name and renamed."""
    import resource
    import signal

    import pytest
    from mmengine.evaluator import DumpResults
    from mmengine.registry import METRICS

    from dna_mm.errors import ConfigError
    from dna_mm.evaluation.dump import dump_evaluator

    samples = [dict(pred_score=torch.rand(400), gt_label=torch.tensor([1])) for _ in range(50)]
    for detector in (False, True):
        metric = METRICS.build(dump_evaluator(str(tmp_path / 'preds.pkl'), detector))
        assert type(metric).__name__ == ('DumpDetResultsWhole' if detector else 'DumpResultsWhole')
        assert metric.prefix == 'dump'  # mmengine warns "The prefix is not set" of a metric without one
        metric.compute_metrics(samples)
        DumpResults(out_file_path=str(tmp_path / 'theirs.pkl')).compute_metrics(samples)
        before = (tmp_path / 'preds.pkl').read_bytes()
        assert before == (tmp_path / 'theirs.pkl').read_bytes()
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)
        handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) // 2, limit[1]))
        try:
            with pytest.raises(OSError, match='File too large'):
                metric.compute_metrics(samples * 2)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, limit)
            signal.signal(signal.SIGXFSZ, handler)
        assert (tmp_path / 'preds.pkl').read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ['preds.pkl', 'theirs.pkl']
    for name, detector, expected in [('x.csv', True, '.pkl or .json'), ('x.txt', False, '.csv or .pkl')]:
        with pytest.raises(ConfigError, match=rf'--dump .*must end in {re.escape(expected)}, got x\.'):
            dump_evaluator(name, detector)
