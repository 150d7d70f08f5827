"""``CheckedCocoDataset`` (MMDetection's ``CocoDataset``, which dna_mm's COCO configs name): a
malformed annotation file, an annotation of an unknown category, an unreadable test image are each
one ``DataError`` naming the file and the entry (the checks of ``check_annotations.py``); an
unreadable training image is skipped, named and counted, in a real training run too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import dna_mm  # noqa: F401
from dna_mm.errors import DataError
from dna_mm.synthetic.coco_shapes import CocoDatasetSpec, ensure_coco_dataset

pytest.importorskip('mmdet.datasets')
from mmdet.registry import DATASETS  # noqa: E402

SPEC = CocoDatasetSpec(train_images=2, test_images=2, size=64, min_object=18, max_object=30, max_objects=2)


@pytest.fixture(autouse=True)
def _mmdet_scope() -> None:
    from mmengine.registry import init_default_scope

    init_default_scope('mmdet')


@pytest.fixture(scope='module')
def coco(tmp_path_factory) -> Path:
    return ensure_coco_dataset(tmp_path_factory.mktemp('coco'), SPEC)


def _broken(coco: Path, tmp_path: Path, edit) -> Path:
    data = json.loads((coco / 'annotations' / 'instances_test.json').read_text())
    edit(data)
    path = tmp_path / 'broken.json'
    path.write_text(json.dumps(data))
    return path


def _classes(coco: Path) -> tuple:
    return tuple(
        c['name'] for c in json.loads((coco / 'annotations/instances_test.json').read_text())['categories']
    )


@pytest.mark.parametrize(
    'edit, named',
    [
        (lambda d: d['annotations'][1].pop('bbox'), r'bad bbox .*: annotations\[1\] \(id \d+\): None'),
        (lambda d: d.pop('categories'), 'missing or non-list section: categories'),
        (lambda d: d['images'][1].pop('file_name'), r'image without file_name: images\[1\] \(id \d+\)'),
        (lambda d: d['annotations'][0].pop('area'), r'annotation without area: annotations\[0\] \(id \d+\)'),
        (
            lambda d: d['annotations'][0].update(category_id=77),
            r'annotation of an unknown category_id: annotations\[0\] \(id \d+\): category_id 77',
        ),
    ],
    ids=['no-bbox', 'no-categories', 'no-file_name', 'no-area', 'unknown-category'],
)
def test_a_malformed_annotation_file_is_one_error_naming_it(coco, tmp_path, edit, named) -> None:
    ann = _broken(coco, tmp_path, edit)
    with pytest.raises(DataError, match=named) as err:
        DATASETS.build(
            dict(
                type='CheckedCocoDataset',
                data_root=str(coco),
                ann_file=str(ann),
                data_prefix=dict(img='images/test/'),
                metainfo=dict(classes=_classes(coco)),
                pipeline=[],
                test_mode=True,
            )
        )
    message = str(err.value)
    assert message.startswith(f'{ann}: ') and '\n' not in message, message


def _test_split(root: Path, classes: tuple, pipeline: list, **kwargs):
    """``CheckedCocoDataset`` of ``root``'s test split."""
    return DATASETS.build(
        dict(
            type='CheckedCocoDataset',
            data_root=str(root),
            ann_file='annotations/instances_test.json',
            data_prefix=dict(img='images/test/'),
            metainfo=dict(classes=classes),
            pipeline=pipeline,
            **kwargs,
        )
    )


def test_a_sound_file_loads_as_before(coco) -> None:
    ds = _test_split(coco, _classes(coco), [dict(type='LoadImageFromFile')], test_mode=True)
    assert len(ds) == SPEC.test_images and ds[0]['img'].shape[:2] == (SPEC.size, SPEC.size)


def _with_truncated_image(coco: Path, tmp_path: Path, test_mode: bool):
    """A copy of ``coco`` whose first test image is cut to 60 bytes, as a dataset, and that image."""
    root = tmp_path / 'coco'
    shutil.copytree(coco, root)
    ann = root / 'annotations' / 'instances_test.json'
    image = root / 'images' / 'test' / json.loads(ann.read_text())['images'][0]['file_name']
    image.write_bytes(image.read_bytes()[:60])
    pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True)]
    ds = _test_split(root, _classes(coco), pipeline, test_mode=test_mode, filter_cfg=None)
    return ds, image


def test_an_unreadable_test_image_is_one_error_naming_it(coco, tmp_path) -> None:
    ds, image = _with_truncated_image(coco, tmp_path, test_mode=True)
    index = next(i for i in range(len(ds)) if ds.get_data_info(i)['img_path'] == str(image))
    with pytest.raises(DataError, match=f'cannot read image {image} ') as err:
        ds[index]
    assert '\n' not in str(err.value)


def test_an_unreadable_training_image_is_skipped_named_and_counted(coco, tmp_path, caplog) -> None:
    from mmengine.logging import MMLogger

    ds, image = _with_truncated_image(coco, tmp_path, test_mode=False)
    index = next(i for i in range(len(ds)) if ds.get_data_info(i)['img_path'] == str(image))
    logger = MMLogger.get_current_instance()  # print_log's; it does not propagate to caplog's
    logger.addHandler(caplog.handler)
    try:
        sample = ds[index]
    finally:
        logger.removeHandler(caplog.handler)
    assert sample['img_path'] != str(image)  # another sample in its place (drawn at random: maybe
    named = caplog.text.count(f'skipped unreadable image {image} ')  # after it again)
    assert named >= 1 and ds.skipped.value == named and ds.skipped.noun == 'image'


def test_a_file_shaped_as_mmdetections_own_test_data_loads_as_mmdetection_loads_it(tmp_path) -> None:
    """A file of the shape MMDetection's own ``tests/data/coco_sample.json`` has (no segmentation,
    a ``score`` per annotation, ``info: null``, an image without annotations): the same data list
    as MMDetection's ``CocoDataset``."""
    box = dict(bbox=[0, 0, 20, 20], area=400.0, score=1.0)
    data = dict(
        images=[dict(file_name=f'fake{i + 1}.jpg', height=800, width=800, id=i) for i in range(3)],
        annotations=[
            dict(box, category_id=1, id=1, image_id=0),
            dict(box, category_id=2, id=2, image_id=0),
            dict(box, category_id=1, id=3, image_id=1),
        ],
        categories=[
            dict(id=1, name='bus', supercategory='none'),
            dict(id=2, name='car', supercategory='none'),
        ],
        licenses=[],
        info=None,
    )
    ann = tmp_path / 'coco_sample.json'
    ann.write_text(json.dumps(data, indent=4))
    classes = dict(classes=('bus', 'car'))
    cfg = dict(ann_file=str(ann), data_prefix=dict(img=''), metainfo=classes, pipeline=[], test_mode=True)
    checked = DATASETS.build(dict(type='CheckedCocoDataset', **cfg))
    stock = DATASETS.build(dict(type='CocoDataset', **cfg))
    assert len(checked) == len(stock) == 3
    assert [checked.get_data_info(i) for i in range(3)] == [stock.get_data_info(i) for i in range(3)]


@pytest.mark.integration
def test_detection_training_skips_an_unreadable_image_and_counts_it_over_workers(coco, tmp_path) -> None:
    """``tools/train.py`` of the detection demo (iteration-based, 2 loader workers) with a training
    image cut short: the run ends with its checkpoint; each count of ``SkippedSamplesHook`` (every 2
    iterations) equals the skips the workers logged."""
    import re

    from conftest import REPO, TINY_MASK_RCNN, coco_run_options, run_tool

    root = tmp_path / 'coco'
    shutil.copytree(coco, root)
    ann = root / 'annotations' / 'instances_train.json'
    image = root / 'images' / 'train' / json.loads(ann.read_text())['images'][0]['file_name']
    image.write_bytes(image.read_bytes()[:60])
    values = dict(TINY_MASK_RCNN, **coco_run_options(root))
    values.update(
        {
            'model.backbone.window_size': 4,
            'train_cfg.max_iters': 5,
            'train_cfg.val_interval': 100,
            'train_dataloader.num_workers': 2,
            'train_dataloader.dataset.filter_cfg': None,
            'custom_hooks.0.interval': 2,
        }
    )
    opts = [f'{k}={json.dumps(v) if isinstance(v, list) else v}' for k, v in values.items()]
    config = str(REPO / 'configs' / 'vitdet_dna_demo.py')
    proc = run_tool(['tools/train.py', config, '--work-dir', str(tmp_path / 'w'), '--cfg-options', *opts])
    log = proc.stdout + proc.stderr
    skips = log.count(f'skipped unreadable image {image} ')
    counts = re.findall(
        r'iterations (\d+)-(\d+): (\d+) unreadable training image\(s\) skipped, summed over all '
        r'dataloader workers and ranks \((\d+) so far in this run\)',
        log,
    )
    assert skips >= 1 and sum(int(c[2]) for c in counts) == skips, (skips, counts, log[-3000:])
    assert int(counts[-1][3]) == skips and all(int(c[1]) <= 5 for c in counts), counts
    assert (tmp_path / 'w' / 'iter_5.pth').exists()
