"""``DumpPredictions`` (``tools/test.py --dump preds.csv``) on an image classifier: MMPretrain's
samples carry ``pred_score`` / ``gt_label`` tensors and ``img_path``, not MMAction2's
``pred_scores`` / ``gt_labels`` and ``filename`` (the video case: tests/tools/test_train_test.py).
A tiny DnA-ViT-T of the ImageNet config (32 px, patch 8, 2 blocks, 4 classes) on generated
``val/<wnid>/*.JPEG`` folders."""

from __future__ import annotations

import csv

import numpy as np
import torch
from conftest import REPO, run_main

WNIDS = [f'n0{c:07d}' for c in range(4)]


def _tiny(root) -> list[str]:
    """``--cfg-options``: the tiny model, its test loader on ``root`` (4 classes, batch 4, 32 px)."""
    opts = [
        'model.head.num_classes=4',
        'data_preprocessor.num_classes=4',
        'model.backbone.img_size=32',
        'model.backbone.patch_size=8',
        'model.backbone.depth=2',
    ]
    for split in ('val', 'test'):
        opts += [
            f'{split}_dataloader.dataset.data_root={root}',
            f'{split}_dataloader.dataset.metainfo.classes=[{",".join(WNIDS)}]',
            f'{split}_dataloader.batch_size=4',
            f'{split}_dataloader.num_workers=0',
            f'{split}_dataloader.persistent_workers=False',
            f'{split}_dataloader.dataset.pipeline.1.scale=36',
            f'{split}_dataloader.dataset.pipeline.2.crop_size=32',
        ]
    return opts


def test_an_image_classifiers_test_dumps_one_row_per_image(tmp_path) -> None:
    import cv2

    from dna_mm.config.build import model_from_config
    from dna_mm.tools.cli import cfg_options

    root = tmp_path / 'imagenet'
    rng = np.random.default_rng(0)
    for wnid in WNIDS:
        (root / 'val' / wnid).mkdir(parents=True)
        for i in range(2):
            image = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
            cv2.imwrite(str(root / 'val' / wnid / f'{wnid}_{i}.JPEG'), image)
    config = str(REPO / 'configs' / 'imagenet' / 'dna_vit-t16_in1k.py')
    opts = _tiny(root)
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
