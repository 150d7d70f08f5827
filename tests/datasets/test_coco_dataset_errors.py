"""``CheckedCocoDataset`` (MMDetection's ``CocoDataset``, which dna_mm's COCO configs name): a
malformed annotation file, an annotation of an unknown category, an unreadable test image are each
one ``DataError`` naming the file and the entry (the checks of ``check_annotations.py``); so are a
segmentation a mask-loading pipeline stops on, classes other than the file's categories, images
missing on disk; an empty box is a warning; an unreadable training image is skipped, named and
counted, in a real training run too."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import cv2
import numpy as np
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
    path = tmp_path / 'my annotations' / 'broken.json'
    path.parent.mkdir()
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
    # the checker it proposes runs as pasted: the folder's blank quoted
    command = message[message.rindex('(python ') + 1 : message.rindex(' lists every problem)')]
    assert shlex.split(command)[1:] == ['tools/data/coco/check_annotations.py', '--ann-file', str(ann)]


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


#: a pipeline that loads masks, as dna_mm's Mask R-CNN configs' do
WITH_MASKS = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True, with_mask=True)]


def _dataset(coco: Path, ann: Path, kind: str = 'CheckedCocoDataset', **kwargs):
    """A dataset of ``ann`` over ``coco``'s test images (the mask-loading pipeline unless given)."""
    cfg = dict(data_root=str(coco), ann_file=str(ann), data_prefix=dict(img='images/test/'), filter_cfg=None)
    cfg.update(metainfo=dict(classes=_classes(coco)), pipeline=WITH_MASKS)
    cfg.update(kwargs)
    return DATASETS.build(dict(type=kind, **cfg))


def _index_of_first_annotation(ds, ann: Path) -> int:
    image_id = json.loads(ann.read_text())['annotations'][0]['image_id']
    return next(i for i in range(len(ds)) if ds.get_data_info(i)['img_id'] == image_id)


@pytest.mark.parametrize(
    'segmentation, named',
    [
        ([], r'empty segmentation: annotations\[0\] \(id \d+\): \[\]'),
        (None, r'empty segmentation: annotations\[0\] \(id \d+\): None'),
        ('drop', r'annotation without segmentation: annotations\[0\] \(id \d+\)'),
        ('crowd []', r'empty segmentation: annotations\[0\] \(id \d+\): \[\]'),
        ('abc', r"segmentation neither polygons nor an RLE: annotations\[0\] \(id \d+\): 'abc'"),
        ([2, 2, 20, 2, 20, 20], r'polygon not a list of numbers: annotations\[0\] \(id \d+\) polygon 0: 2'),
    ],
    ids=['empty', 'null', 'missing', 'crowd-empty', 'string', 'flat-numbers'],
)
@pytest.mark.parametrize('test_mode', [False, True], ids=['train', 'val'])
def test_a_segmentation_a_mask_pipeline_stops_on_is_one_error_at_build(
    coco, tmp_path, segmentation, named, test_mode
) -> None:
    """MMDetection's own pipeline stops on such an annotation mid-run (``KeyError: 'mask'``, a
    ``TypeError``), in training or at the first validation; the checked dataset at build."""

    def edit(data: dict) -> None:
        first = data['annotations'][0]
        if segmentation == 'drop':
            first.pop('segmentation')
        elif segmentation == 'crowd []':
            first.update(segmentation=[], iscrowd=1)
        else:
            first['segmentation'] = segmentation

    ann = _broken(coco, tmp_path, edit)
    stock = _dataset(coco, ann, 'CocoDataset', test_mode=test_mode)
    with pytest.raises((KeyError, TypeError)):
        stock.prepare_data(_index_of_first_annotation(stock, ann))
    with pytest.raises(DataError, match=named) as err:
        _dataset(coco, ann, test_mode=test_mode)
    message = str(err.value)
    assert message.startswith(f'{ann}: ') and '\n' not in message, message
    assert 'LoadAnnotations(with_mask=True) in the pipeline stops on such an annotation' in message


@pytest.mark.parametrize(
    'segmentation, pipeline',
    [([[]], WITH_MASKS), ([[1, 2, 3, 4]], WITH_MASKS), ([], WITH_MASKS[:1] + [dict(type='LoadAnnotations')])],
    ids=['no-point-polygon', 'short-polygon', 'empty-box-only'],
)
def test_a_segmentation_mmdetection_loads_past_is_not_refused(coco, tmp_path, segmentation, pipeline) -> None:
    """``[[]]`` and a polygon of under 3 points (MMDetection ignores the instance), an empty one
    where the pipeline loads boxes only: both datasets load the sample."""
    ann = _broken(coco, tmp_path, lambda d: d['annotations'][0].update(segmentation=segmentation))
    for kind in ('CocoDataset', 'CheckedCocoDataset'):
        ds = _dataset(coco, ann, kind, pipeline=pipeline, test_mode=True)
        assert ds.prepare_data(_index_of_first_annotation(ds, ann))['img'] is not None


def _own_set(tmp_path: Path, categories: list[dict]) -> Path:
    """A set of one's own: 2 images of 32x32 pixels, one instance of each category in each;
    ``images/`` and ``ann.json`` under the returned root."""
    root = tmp_path / 'own'
    (root / 'images').mkdir(parents=True)
    images, annotations = [], []
    for i in range(2):
        cv2.imwrite(str(root / 'images' / f'{i}.png'), np.full((32, 32, 3), 40 * i, np.uint8))
        images.append(dict(id=i, file_name=f'{i}.png', width=32, height=32))
        for cat in categories:
            box = dict(
                bbox=[2, 2, 18, 18], area=324.0, iscrowd=0, segmentation=[[2, 2, 20, 2, 20, 20, 2, 20]]
            )
            annotations.append(dict(box, id=len(annotations) + 1, image_id=i, category_id=cat['id']))
    data = dict(images=images, annotations=annotations, categories=categories)
    (root / 'ann.json').write_text(json.dumps(data))
    return root


def _own(root: Path, **kwargs):
    cfg = dict(data_root=str(root), ann_file='ann.json', data_prefix=dict(img='images/'), pipeline=WITH_MASKS)
    return DATASETS.build(dict(type='CheckedCocoDataset', **cfg, **kwargs))


PERSON_CAR = [dict(id=1, name='person'), dict(id=2, name='car')]


@pytest.mark.parametrize(
    'categories, metainfo, named',
    [
        (
            PERSON_CAR,
            dict(classes=('person', 'truck')),
            r"metainfo classes \('person', 'truck'\) do not match its categories \{'person': 1, 'car': 2\} "
            r"\(name: id\): \('truck'\) is not among them: MMDetection leaves such a class out",
        ),
        (
            PERSON_CAR,
            dict(classes=('car', 'person')),
            r"metainfo classes \('car', 'person'\) do not match .*: MMDetection would train category "
            r"'person' \(id 1\) as label 0, which the classes \(and so the checkpoint and the predictions\) "
            r"name 'car'",
        ),
        (
            PERSON_CAR,
            None,
            r"the dataset's classes, MMDetection's default where metainfo names none, COCO's 80 \('person', "
            r"'bicycle', 'car', \.\.\. 80 in all\), do not match .*: MMDetection would train category 'car' "
            r"\(id 2\) as label 1, which the classes .* name 'bicycle'",
        ),
        (
            PERSON_CAR[::-1],
            dict(classes=('person', 'car')),
            r"do not match its categories \{'car': 2, 'person': 1\} .*: MMDetection would train category "
            r"'car' \(id 2\) as label 0, which the classes .* name 'person'",
        ),
    ],
    ids=['unknown-class', 'swapped-order', 'no-metainfo', 'file-order-not-id-order'],
)
def test_classes_other_than_the_files_categories_are_one_error_saying_what_to_write(
    tmp_path, categories, metainfo, named
) -> None:
    root = _own_set(tmp_path, categories)
    with pytest.raises(DataError, match=named) as err:
        _own(root, **({'metainfo': metainfo} if metainfo else {}))
    message = str(err.value)
    assert message.startswith(f'{root / "ann.json"}: ') and '\n' not in message, message
    fix = tuple(c['name'] for c in categories)  # MMDetection's labels: the file's order
    assert message.endswith(f'write metainfo=dict(classes={fix!r}) (or a subset of them, in that order)')


#: COCO 2017's category ids, in its file's order (MMDetection's METAINFO names them in this order)
COCO_IDS = [*range(1, 12), *range(13, 26), 27, 28, *range(31, 45), *range(46, 66), 67, 70]
COCO_IDS += [*range(72, 83), *range(84, 91)]


@pytest.mark.parametrize('metainfo', [None, 'coco', ('car',)], ids=['no-metainfo', 'coco-classes', 'subset'])
def test_classes_that_label_as_they_say_build(tmp_path, metainfo) -> None:
    """COCO's 80 categories (its ids, in its order) with MMDetection's default classes or the
    same given; a subset of a file's categories, in its order (MMDetection's way to train fewer)."""
    from mmdet.datasets import CocoDataset

    names = CocoDataset.METAINFO['classes']
    assert len(COCO_IDS) == len(names) == 80
    if metainfo == ('car',):
        root = _own_set(tmp_path, PERSON_CAR)
    else:
        root = _own_set(tmp_path, [dict(id=i, name=n) for i, n in zip(COCO_IDS, names, strict=True)])
    kwargs = (
        {} if metainfo is None else dict(metainfo=dict(classes=names if metainfo == 'coco' else metainfo))
    )
    ds = _own(root, **kwargs, test_mode=True)
    assert len(ds) == 2 and ds[0]['gt_bboxes_labels'].max() < len(ds.metainfo['classes'])


def test_the_synthetic_shapes_set_builds_through_the_demo_config(coco) -> None:
    """``configs/vitdet_dna_demo.py``'s datasets (its classes, mask pipelines) on the generated
    shapes set: built, a sample of each loaded."""
    from conftest import REPO, coco_run_options
    from mmengine.config import Config

    cfg = Config.fromfile(str(REPO / 'configs' / 'vitdet_dna_demo.py'))
    cfg.merge_from_dict(coco_run_options(coco))
    for split in ('train', 'val', 'test'):
        ds = DATASETS.build(cfg[f'{split}_dataloader'].dataset)
        assert type(ds).__name__ == 'CheckedCocoDataset' and len(ds) > 0
        assert ds.metainfo['classes'] == _classes(coco) and ds[0] is not None


@pytest.mark.parametrize('test_mode', [False, True], ids=['train', 'val'])
@pytest.mark.parametrize(
    'prefix, why',
    [('images/tset/', 'that folder does not exist'), ('annotations/', 'none is there')],
    ids=['no-folder', 'other-folder'],
)
def test_a_wrong_image_folder_is_one_error_at_build(coco, test_mode, prefix, why) -> None:
    """``data_prefix`` pointing nowhere: in training 1,001 warnings and then MMDetection's ``Cannot
    find valid image``, in validation a stop at its first image; here one line at build."""
    ann = coco / 'annotations' / 'instances_test.json'
    with pytest.raises(DataError) as err:
        _dataset(coco, ann, data_prefix=dict(img=prefix), test_mode=test_mode)
    message = str(err.value)
    n = SPEC.test_images
    first = json.loads(ann.read_text())['images'][0]
    assert message.startswith(f'{ann}: {n} of {n} listed images are not on disk: ') and '\n' not in message
    assert f'{coco}/{prefix}{first["file_name"]} (image id {first["id"]})' in message
    assert message.endswith(
        f"they are looked for in '{coco}/{prefix}' (data_root '{coco}' joined with data_prefix img); "
        f'{why}: is data_prefix=dict(img=...) right?'
    )


def test_an_image_missing_on_disk_is_one_error_at_build(coco, tmp_path) -> None:
    root = tmp_path / 'coco'
    shutil.copytree(coco, root)
    ann = root / 'annotations' / 'instances_test.json'
    image = root / 'images' / 'test' / json.loads(ann.read_text())['images'][1]['file_name']
    image.unlink()
    with pytest.raises(
        DataError, match=f'1 of {SPEC.test_images} listed images are not on disk: {image} '
    ) as err:
        _dataset(root, ann, test_mode=True)
    tail = f"(data_root '{root}' joined with data_prefix img); restore them, or remove them from the file"
    assert str(err.value).endswith(tail)


@pytest.mark.parametrize(
    'options',
    [
        dict(check_files=False),
        dict(data_prefix=dict(img='s3://bucket/images/test/')),
        dict(pipeline=[dict(type='LoadImageFromFile', backend_args=dict(backend='petrel'))]),
        dict(pipeline=[]),
    ],
    ids=['check_files-False', 's3-prefix', 'petrel-backend', 'no-image-loader'],
)
def test_images_not_read_from_local_files_are_not_looked_for(coco, options) -> None:
    ann = coco / 'annotations' / 'instances_test.json'
    cfg = dict(data_prefix=dict(img='images/tset/'), test_mode=True)
    ds = _dataset(coco, ann, **{**cfg, **options})
    assert len(ds) == SPEC.test_images


def test_an_empty_box_is_one_warning_at_build(coco, tmp_path, caplog) -> None:
    """Training drops a box of zero width or height, COCO's evaluation counts it: AP changes
    without a word. Built, with one warning naming the file and the boxes."""
    from mmengine.logging import MMLogger

    def edit(data: dict) -> None:
        data['annotations'][0]['bbox'][2] = 0
        data['annotations'][1]['bbox'][3] = -1

    ann = _broken(coco, tmp_path, edit)
    logger = MMLogger.get_current_instance()  # print_log's; it does not propagate to caplog's
    logger.addHandler(caplog.handler)
    try:
        ds = _dataset(coco, ann, test_mode=True)
    finally:
        logger.removeHandler(caplog.handler)
    assert len(ds) == SPEC.test_images
    (line,) = [r.getMessage() for r in caplog.records if 'empty bbox' in r.getMessage()]
    assert line.startswith(
        f'{ann}: 2 annotation(s) with an empty bbox (w or h <= 0): annotations[0] (id 1): ['
    ), line
    assert "; training drops them, COCO's evaluation of this file counts them" in line and '\n' not in line
    assert [r.levelname for r in caplog.records if 'empty bbox' in r.getMessage()] == ['WARNING']
