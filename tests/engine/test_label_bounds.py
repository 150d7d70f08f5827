"""A list with a label beyond the model's head is one line naming the list's line and the head's
key, before the first iteration (training) or the first test batch, where a config states no
number of classes for the check to compare (no dataset ``num_classes``, no ``label_map``)."""

from __future__ import annotations

import pytest
import torch
from conftest import DEMO_CONFIG, load_tool, tiny_run_options
from mmengine.dataset import ConcatDataset, RepeatDataset
from mmengine.registry import init_default_scope

from dna_mm.datasets.robust_samples import largest_label
from dna_mm.engine.label_bounds import _top_label, largest_data_label

#: no number of classes in the config: the demo's label map and its datasets' num_classes dropped
NO_CLASSES = [
    'label_map=None',
    *(f'{split}_dataloader.dataset.num_classes=None' for split in ('train', 'val', 'test')),
]


def test_largest_label_of_single_multi_and_unlabelled_lines() -> None:
    assert largest_label([dict(label=1, lineno=1), dict(label=3, lineno=2), dict(label=3, lineno=5)]) == (
        3,
        2,
    )
    assert largest_label(
        [dict(label=[0, 5], lineno=4), dict(label=[], lineno=6), dict(label=[2], lineno=7)]
    ) == (5, 4)
    assert largest_label([dict(label=-1, lineno=1), dict(label=[], lineno=2)]) is None


def _dataset(root, ann: str, videos=None, **more):
    from mmaction.registry import DATASETS

    init_default_scope('mmaction')
    return DATASETS.build(
        dict(
            type='RobustVideoDataset',
            ann_file=str(root / ann),
            data_prefix=dict(video=str(videos or root / 'videos')),
            pipeline=[],
            **more,
        )
    )


def test_the_largest_label_is_found_through_dataset_wrappers(tiny_video_set, tmp_path) -> None:
    small = tmp_path / 'small.txt'  # the test list's first line only, with label 6
    small.write_text((tiny_video_set / 'test.txt').read_text().splitlines()[0].split()[0] + ' 6\n')
    train, test = _dataset(tiny_video_set, 'train.txt'), _dataset(tiny_video_set, 'test.txt')
    wide = _dataset(tmp_path, 'small.txt', videos=tiny_video_set / 'videos')
    top = max(int(line.split()[-1]) for line in (tiny_video_set / 'train.txt').read_text().splitlines())
    assert largest_data_label(train)[0] == top
    assert largest_data_label(RepeatDataset(train, times=2))[0] == top
    assert largest_data_label(ConcatDataset([test, wide])) == (6, f'{small}:1')
    lines = (tiny_video_set / 'train.txt').read_text().splitlines()
    first = min(range(len(lines)), key=lambda i: int(lines[i].split()[-1]))  # a line of the smallest label
    subset = _dataset(tiny_video_set, 'train.txt', indices=[first])  # mmengine's subset of the list
    assert largest_data_label(subset) == (
        int(lines[first].split()[-1]),
        f'{tiny_video_set}/train.txt:{first + 1}',
    )


def test_training_on_labels_beyond_the_head_is_one_line(tiny_video_set, tmp_path, capsys) -> None:
    opts = [*tiny_run_options(tiny_video_set), *NO_CLASSES, 'model.cls_head.num_classes=2']
    with pytest.raises(SystemExit) as done:
        load_tool('tools/train.py').main([DEMO_CONFIG, '--work-dir', str(tmp_path), '--cfg-options', *opts])
    err = capsys.readouterr().err
    assert done.value.code == 2 and 'Traceback' not in err
    lines = (tiny_video_set / 'train.txt').read_text().splitlines()
    label = max(int(line.split()[-1]) for line in lines)  # named at the first line that holds it
    first = 1 + next(i for i, line in enumerate(lines) if int(line.split()[-1]) == label)
    assert (
        f'train.py: error: {tiny_video_set}/train.txt:{first}: label {label} is beyond '
        'model.cls_head.num_classes (2: labels 0 to 1); training would stop at its first iteration on a '
        'target out of range. Set model.cls_head.num_classes to the number of classes of the data (at '
        f"least {label + 1}), or give train_dataloader a list of the model's classes"
    ) in err
    assert not list(tmp_path.glob('*.pth'))


def test_testing_on_labels_beyond_the_head_is_one_line(tiny_video_set, tmp_path, capsys) -> None:
    """A 2-class model tested on the 4-class list would count the samples of classes 2 and 3 as
    wrong: refused, naming the test list's line."""
    import argparse

    from mmaction.registry import MODELS
    from mmengine.config import Config, DictAction

    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    opts = [*tiny_run_options(tiny_video_set), *NO_CLASSES, 'model.cls_head.num_classes=2']
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *opts]).o)
    init_default_scope('mmaction')
    checkpoint = tmp_path / 'two_classes.pth'
    torch.save(dict(state_dict=MODELS.build(cfg.model).state_dict()), checkpoint)
    with pytest.raises(SystemExit) as done:
        load_tool('tools/test.py').main(
            [DEMO_CONFIG, str(checkpoint), '--work-dir', str(tmp_path / 'w'), '--cfg-options', *opts]
        )
    err = capsys.readouterr().err
    assert done.value.code == 2 and 'Traceback' not in err
    assert f'test.py: error: {tiny_video_set}/test.txt:' in err
    assert "beyond model.cls_head.num_classes (2: labels 0 to 1); its samples would count as wrong" in err
    assert 'give test_dataloader a list of the model\'s classes' in err


def test_another_datasets_labels_are_read_from_its_data_infos(tmp_path) -> None:
    """An MMPretrain ``CustomDataset`` of class folders (its labels the folders' order), and
    MMAction2's ``multi_class`` one-hot targets; a dataset not yet read (``lazy_init``) is left
    alone."""
    import cv2
    import numpy as np
    from mmpretrain.datasets import CustomDataset

    for c in ('ant', 'bee', 'cat'):
        (tmp_path / c).mkdir()
        cv2.imwrite(str(tmp_path / c / f'{c}.png'), np.zeros((4, 4, 3), np.uint8))
    images = CustomDataset(data_root=str(tmp_path), pipeline=[])
    assert largest_data_label(images) == (2, f'CustomDataset sample 2 ({tmp_path / "cat" / "cat.png"})')
    assert largest_data_label(CustomDataset(data_root=str(tmp_path), pipeline=[], lazy_init=True)) is None
    assert _top_label(torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0])) == 3
    assert _top_label(torch.zeros(4)) is None
    assert _top_label([1, 7, 2]) == 7 and _top_label(np.array([4])) == 4
    assert _top_label(-1) is None and _top_label([]) is None
