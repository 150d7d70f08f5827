"""Where a dataset reads its files from (dna_mm.config.check): a ``data_prefix`` that is not a dict
(mmengine's ``BaseDataset``: an ``AttributeError`` traceback as the dataset is built) and a
``backend_args.backend`` mmengine has no file backend of (a ``KeyError`` there) are one line,
through dataset wrappers, before any work."""

from __future__ import annotations

import pytest
from conftest import REPO
from mmengine.config import Config
from mmengine.dataset import BaseDataset

from dna_mm.config.check import check_config
from dna_mm.errors import ConfigError

COCO = str(REPO / 'configs' / 'vitdet_dna_coco.py')


def test_a_data_prefix_that_is_not_a_dict_is_named() -> None:
    cfg = Config.fromfile(COCO)
    cfg.train_dataloader.dataset.data_prefix = 'train2017/'
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'train')
    assert str(err.value) == (
        'train_dataloader.dataset.data_prefix must be a dict of folders by kind (e.g. '
        "dict(img='train2017/'), dict(video='videos/')), got 'train2017/'"
    )
    with pytest.raises(AttributeError):  # what mmengine would do with it
        BaseDataset(data_prefix='x/', lazy_init=True)


def test_a_file_backend_mmengine_has_not_is_named_inside_a_wrapper() -> None:
    cfg = Config.fromfile(COCO)  # MMDetection's datasets take backend_args (MMAction2's do not)
    inner = cfg.test_dataloader.dataset
    cfg.test_dataloader.dataset = dict(
        type='RepeatDataset', times=2, dataset=dict(inner, backend_args=dict(backend='lcoal'))
    )
    with pytest.raises(
        ConfigError,
        match=(
            r"^test_dataloader\.dataset\.dataset\.backend_args\.backend is not one of mmengine's file "
            r"backends, got 'lcoal' \(did you mean 'local'\? valid: local, "
        ),
    ):
        check_config(cfg, 'test')
    cfg.test_dataloader.dataset.dataset.backend_args.backend = 'local'
    check_config(cfg, 'test')


def test_a_text_data_prefix_passes_where_the_dataset_takes_one() -> None:
    """MMPretrain's datasets take a string ``data_prefix`` (their image folder: its zoo's BLIP
    configs write ``data_prefix='train2014'``); MMDetection's, mmengine's, do not."""
    from mmpretrain.datasets import ImageNet

    cfg = Config.fromfile(str(REPO / 'configs' / 'imagenet' / 'vit-b16_softmax_in1k.py'))
    cfg.test_dataloader.dataset.data_prefix = 'val'
    check_config(cfg, 'test')
    assert ImageNet(data_root='/none', data_prefix='val', lazy_init=True).data_prefix == {
        'img_path': '/none/val'
    }
    from mmpretrain.datasets.refcoco import RefCOCO  # names data_prefix with no default, makes a dict of it

    from dna_mm.config.check.data import _text_prefix

    assert _text_prefix(RefCOCO) and not _text_prefix(type(None))
    det = Config.fromfile(COCO)
    det.test_dataloader.dataset.data_prefix = 'val2017/'
    with pytest.raises(ConfigError, match=r'^test_dataloader\.dataset\.data_prefix must be a dict'):
        check_config(det, 'test')
