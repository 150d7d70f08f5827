"""tools/analysis/eval_imagenet_variants.py: what it refuses before any work (an ``--out`` that
names an input or is a folder, a set too small for ``--beta``), on a tiny DnA-ViT-T checkpoint
(32 px, patch 8, 2 blocks, 4 classes) and ImageNet-A in its layout (two of the classes, 3 images
each), both generated here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, run_main

TOOL = 'tools/analysis/eval_imagenet_variants.py'
WNIDS = [f'n0{c:07d}' for c in range(4)]
#: the tiny model of the DnA ViT-T config and its test pipeline at 32 px
TINY = [
    'model.head.num_classes=4',
    'data_preprocessor.num_classes=4',
    'model.backbone.img_size=32',
    'model.backbone.patch_size=8',
    'model.backbone.depth=2',
    'test_dataloader.dataset.pipeline.1.scale=36',
    'test_dataloader.dataset.pipeline.2.crop_size=32',
]


@pytest.fixture(scope='module')
def inputs(tmp_path_factory) -> dict[str, Path]:
    """``config`` (a copy of the DnA ViT-T config's leaf), ``checkpoint`` (the tiny model's
    weights as mmengine saves them), ``train_root`` (``train/<wnid>/`` folders naming the 4
    classes) and ``imagenet_a`` (``<wnid>/*.jpg`` of 2 classes, 3 images each)."""
    import cv2

    from dna_mm.config.model import model_from_config
    from dna_mm.tools.cli import cfg_options

    root = tmp_path_factory.mktemp('variants')
    config = root / 'dna_vit-t16_in1k.py'
    config.write_text(f'_base_ = [{str(REPO / "configs" / "imagenet" / "dna_vit-t16_in1k.py")!r}]\n')
    _, model = model_from_config(str(config), cfg_options(TINY), clear_pretrained=True)
    checkpoint = root / 'epoch_1.pth'
    torch.save(dict(meta=dict(epoch=1), state_dict=model.state_dict()), checkpoint)
    rng = np.random.default_rng(0)
    for c, wnid in enumerate(WNIDS):
        (root / 'imagenet' / 'train' / wnid).mkdir(parents=True)
        if c < 2:
            (root / 'imagenet-a' / wnid).mkdir(parents=True)
            for i in range(3):
                img = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
                cv2.imwrite(str(root / 'imagenet-a' / wnid / f'a_{i}.jpg'), img)
    return dict(
        config=config, checkpoint=checkpoint, train_root=root / 'imagenet', imagenet_a=root / 'imagenet-a'
    )


def _run(inputs: dict[str, Path], *extra: str):
    cmd = [TOOL, str(inputs['config']), str(inputs['checkpoint']), '--imagenet-a', str(inputs['imagenet_a'])]
    cmd += ['--train-root', str(inputs['train_root']), *extra, '--cfg-options', *TINY]
    return run_main(cmd, check=False)


def _same_spellings(inputs: dict[str, Path], tmp_path: Path) -> dict[str, tuple[str, Path]]:
    """``{case: (--out, the input it names)}``: each input as given, by a link, by a path through ``..``."""
    image = inputs['imagenet_a'] / WNIDS[1] / 'a_2.jpg'
    link = tmp_path / 'link.pth'
    link.symlink_to(inputs['checkpoint'])
    ckpt = inputs['checkpoint']
    return {
        'the checkpoint': (str(ckpt), ckpt),
        'a link to it': (str(link), ckpt),
        'another spelling': (f'{ckpt.parent}/../{ckpt.parent.name}/./{ckpt.name}', ckpt),
        'the config': (str(inputs['config']), inputs['config']),
        'an image of the set': (os.path.relpath(image, REPO), image),  # relative to the tool's folder
    }


@pytest.mark.parametrize(
    'case', ['the checkpoint', 'a link to it', 'another spelling', 'the config', 'an image of the set']
)
def test_an_out_that_names_an_input_is_refused_before_any_work(inputs, tmp_path, case: str) -> None:
    out, named = _same_spellings(inputs, tmp_path)[case]
    before = named.read_bytes()
    proc = _run(inputs, '--out', out, '--beta', '2')
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f'eval_imagenet_variants.py: error: --out {out} is the ' in proc.stderr, proc.stderr
    assert 'it would be overwritten' in proc.stderr and 'Traceback' not in proc.stderr
    assert named.read_bytes() == before and 'imagenet-a (' not in proc.stdout  # nothing ran


def test_an_out_that_is_a_folder_is_one_line_before_any_work(inputs, tmp_path) -> None:
    proc = _run(inputs, '--out', str(tmp_path), '--beta', '2')
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    assert f'eval_imagenet_variants.py: error: --out {tmp_path} is a folder' in proc.stderr, proc.stderr
    assert 'imagenet-a (' not in proc.stdout  # the evaluation did not run


def test_a_set_too_small_for_beta_is_refused_before_the_model_runs(inputs, tmp_path) -> None:
    """Hendrycks' RMS calibration error leaves its most confident bin out: 2 · β images at least.
    6 images and the default β = 100: one line saying so and the β that fits, before the model
    runs; with that β the measures are written (into a folder made for them)."""
    out = tmp_path / 'new' / 'robustness.json'
    proc = _run(inputs, '--out', str(out))
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    error = [line for line in proc.stderr.splitlines() if 'error:' in line]
    assert len(error) == 1 and f'{inputs["imagenet_a"]}: 6 image(s), too few for' in error[0], error
    assert 'bins of --beta 100 images: it needs at least 200' in error[0]
    assert error[0].endswith('give --beta 3 or less'), error[0]
    assert 'Loads checkpoint' not in proc.stdout + proc.stderr and not out.exists()

    before = inputs['checkpoint'].read_bytes()
    proc = _run(inputs, '--out', str(out), '--beta', '3')
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())['imagenet-a']
    assert result['images'] == 6 and 0 <= result['rmsce'] <= 100 and 0 <= result['acc'] <= 100
    assert inputs['checkpoint'].read_bytes() == before


def test_the_sets_are_listed_and_checked_without_the_model(inputs) -> None:
    from dna_mm.errors import DataError
    from dna_mm.evaluation.imagenet_variants import list_sets

    sets = list_sets(WNIDS, imagenet_a=inputs['imagenet_a'], beta=3)
    a = sets.scored['imagenet-a']
    assert a.columns == [0, 1] and a.labels.tolist() == [0, 0, 0, 1, 1, 1] and sets.ood is None
    assert sets.images() == a.images and len(a.images) == 6
    with pytest.raises(DataError, match=r'6 image\(s\), too few .* at least 8 \(two bins.*--beta 3 or less$'):
        list_sets(WNIDS, imagenet_a=inputs['imagenet_a'], beta=4)
