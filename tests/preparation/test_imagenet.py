"""ImageNet as people have it (dna_mm.preparation.imagenet, tools/data/imagenet/check_imagenet.py):
train/ class folders, val/ as class folders or flat with the devkit's labels (its meta.mat written
here by scipy in the devkit's structure, its ILSVRC2012 ids in an order that is not the sorted
WordNet ids'), MMPretrain's meta lists; counts per class, unreadable files named and left out;
MMPretrain's ImageNet dataset reads what the tool writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import load_tool

check = load_tool('tools/data/imagenet/check_imagenet.py')
WNIDS = ['n01440764', 'n01443537', 'n01484850']
ILSVRC_IDS = {'n01440764': 3, 'n01443537': 1, 'n01484850': 2}  # the devkit's ids, not sorted order


def _jpeg(path: Path, value: int) -> None:
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((20, 24, 3), value, np.uint8))


@pytest.fixture
def root(tmp_path) -> Path:
    """train/<wnid>/ (2, 3, 4 images); val/<wnid>/ (1 each)."""
    root = tmp_path / 'imagenet'
    for c, wnid in enumerate(WNIDS):
        for i in range(2 + c):
            _jpeg(root / 'train' / wnid / f'{wnid}_{i}.JPEG', 50 * c)
        _jpeg(root / 'val' / wnid / f'ILSVRC2012_val_0000000{c + 1}.JPEG', 50 * c)
    return root


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_class_folders_counted_and_listed_as_mmpretrain_reads_them(root, capsys) -> None:
    assert check.main([str(root), '--workers', '1']) == 0
    out = capsys.readouterr().out
    assert f'{root}: 3 classes (train/ folders)' in out
    assert 'train: 9 images from folders; per class 2-4' in out and 'val: 3 images from folders' in out
    assert _lines(root / 'meta' / 'val.txt') == [
        f'{w}/ILSVRC2012_val_0000000{c + 1}.JPEG {c}' for c, w in enumerate(WNIDS)
    ]
    from mmpretrain.datasets import ImageNet

    for split in ('train', 'val'):  # the lists, and MMPretrain's own folder scan, agree
        listed = ImageNet(data_root=str(root), split=split, metainfo=dict(classes=WNIDS))
        scanned = ImageNet(
            data_root=str(root), data_prefix=split, metainfo=dict(classes=WNIDS)
        )  # no list: a scan
        assert scanned.ann_file == ''
        read = [listed.get_data_info(i) for i in range(len(listed))]
        assert listed.ann_file.endswith(f'meta/{split}.txt') and len(read) == (9 if split == 'train' else 3)
        assert sorted((d['img_path'], d['gt_label']) for d in read) == sorted(
            (d['img_path'], d['gt_label']) for d in scanned.load_data_list()
        )


def test_flat_validation_labelled_by_the_devkit(root, tmp_path, capsys) -> None:
    from scipy.io import savemat

    for c, wnid in enumerate(WNIDS):  # the official flat layout: ILSVRC2012_val_%08d.JPEG
        (root / 'val' / wnid / f'ILSVRC2012_val_0000000{c + 1}.JPEG').rename(
            root / 'val' / f'ILSVRC2012_val_0000000{c + 1}.JPEG'
        )
        (root / 'val' / wnid).rmdir()
    devkit = tmp_path / 'ILSVRC2012_devkit_t12'
    (devkit / 'data').mkdir(parents=True)
    synsets = np.array(
        [(ILSVRC_IDS[w], w, f'words {w}') for w in WNIDS],
        dtype=[('ILSVRC2012_ID', 'O'), ('WNID', 'O'), ('words', 'O')],
    )
    savemat(str(devkit / 'data' / 'meta.mat'), {'synsets': synsets})
    # image i is of the class whose devkit id is written on line i: val_1 -> n01440764 (id 3), ...
    (devkit / 'data' / 'ILSVRC2012_validation_ground_truth.txt').write_text('3\n1\n2\n')
    with pytest.raises(SystemExit) as done:
        check.main([str(root), '--workers', '1', '--splits', 'val'])
    assert done.value.code == 2 and 'flat images without labels: give --devkit' in capsys.readouterr().err
    assert check.main([str(root), '--workers', '1', '--devkit', str(devkit)]) == 0
    assert 'val: 3 images from devkit; per class 1-1' in capsys.readouterr().out
    assert _lines(root / 'meta' / 'val.txt') == [f'ILSVRC2012_val_0000000{c + 1}.JPEG {c}' for c in range(3)]


def test_unreadable_images_are_named_and_left_out(root, capsys) -> None:
    bad = root / 'train' / WNIDS[1] / 'broken.JPEG'
    whole = (root / 'train' / WNIDS[1] / f'{WNIDS[1]}_0.JPEG').read_bytes()
    bad.write_bytes(whole[: len(whole) // 2])  # truncated
    (root / 'train' / WNIDS[2] / 'notes.JPEG').write_text('not an image')
    assert check.main([str(root), '--workers', '2']) == 1
    out = capsys.readouterr().out
    assert (
        f'unreadable: {bad}: ' in out and f'unreadable: {root / "train" / WNIDS[2] / "notes.JPEG"}: ' in out
    )
    assert 'decoded 14 images: 2 unreadable' in out
    listed = _lines(root / 'meta' / 'train.txt')
    assert len(listed) == 9 and not any('broken' in ln or 'notes' in ln for ln in listed)
    assert len(_lines(root / 'meta' / 'unreadable.txt')) == 2
