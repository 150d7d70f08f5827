"""A classifying head and its video datasets that disagree on how many labels a video has, named
before anything is built (:func:`dna_mm.config.check.heads.multi_label_problems`): a sigmoid loss
(``BCELossWithLogits``) or ``multi_class=True`` head on single-label lists stopped training at its
first iteration on torch's ``ValueError: Target size (torch.Size([8])) must be the same as input
size``; a softmax head on ``multi_class=True`` lists trained on targets holding several ones without
a word. A head and datasets that agree pass (the multi-label config of docs/datasets/custom.md is
built by tests/docs)."""

from __future__ import annotations

import pytest
import torch
from conftest import DEMO_CONFIG
from mmengine.config import Config
from mmengine.registry import init_default_scope

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.errors import ConfigError

LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')
SIGMOID_HEAD = {
    'model.cls_head.loss_cls': dict(type='BCELossWithLogits'),
    'model.cls_head.average_clips': 'score',
}


def _demo(options: dict, multi_label_data: tuple[str, ...] = ()) -> Config:
    """The demo's config with ``options``, the datasets of ``multi_label_data`` made multi-label."""
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.label_map = None
    cfg.merge_from_dict(options)
    for loader in multi_label_data:
        cfg[loader].dataset.update(multi_class=True, num_classes=4)
    return cfg


def _refused(cfg: Config, mode: str = 'train') -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg, mode)
    return str(err.value)


@pytest.mark.parametrize(
    'options, said',
    [
        (SIGMOID_HEAD, 'loss_cls BCELossWithLogits'),
        (
            {**SIGMOID_HEAD, 'model.cls_head.multi_class': True},
            'multi_class=True and loss_cls BCELossWithLogits',
        ),
    ],
)
def test_a_sigmoid_head_on_single_label_lists_is_one_line(options, said) -> None:
    assert _refused(_demo(options)) == (
        'train_dataloader.dataset, val_dataloader.dataset and test_dataloader.dataset are single-label (no '
        f'multi_class=True: one class a video) and model.cls_head is multi-label ({said}): training would '
        'stop at its first iteration on a target of another size than the scores; give the datasets '
        'multi_class=True and num_classes for lists of several labels a video, or make the head '
        "single-label (no multi_class, a softmax loss such as loss_cls=dict(type='CrossEntropyLoss'))"
    )
    # a test run reads its test list only, and does not train
    message = _refused(_demo(options), 'test')
    assert message.startswith('test_dataloader.dataset is single-label (no multi_class=True')
    assert 'would stop' not in message


def test_a_softmax_head_on_multi_label_lists_is_one_line() -> None:
    """The demo's head (``CrossEntropyLoss``, TimeSformerHead's default) on lists of several labels;
    a sigmoid head without ``multi_class``, which dna_mm's tools read as single-label."""
    cfg = _demo({}, multi_label_data=LOADERS)
    cfg.val_evaluator = cfg.test_evaluator = dict(type='AccMetric', metric_list=('mean_average_precision',))
    assert _refused(cfg) == (
        'train_dataloader.dataset, val_dataloader.dataset and test_dataloader.dataset are multi-label '
        '(multi_class=True) and model.cls_head is not (no multi_class): its softmax loss (CrossEntropyLoss) '
        'would train on targets that hold several ones, without a word; set model.cls_head.multi_class=True, '
        "loss_cls=dict(type='BCELossWithLogits') and average_clips='score'"
    )
    cfg.merge_from_dict(SIGMOID_HEAD)
    assert _refused(cfg).endswith(
        "model.cls_head is not (no multi_class): dna_mm's tools would read the model as single-label "
        '(tools/infer.py: its lists, its scores); set model.cls_head.multi_class=True'
    )
    cfg.merge_from_dict({'model.cls_head.multi_class': True})
    check_config(cfg)  # head and data agree
    cfg.train_dataloader.dataset.multi_class = False  # one list of another kind than the others
    assert _refused(cfg).startswith('train_dataloader.dataset is single-label (no multi_class=True')


def test_mmaction2_trains_a_softmax_head_on_several_ones_and_stops_a_sigmoid_one_on_one_class() -> None:
    """The premises, on MMAction2's own head: a ``CrossEntropyLoss`` takes a multi-hot target as soft
    labels (a finite loss, no word); a ``BCELossWithLogits`` stops on one class a video."""
    from mmaction.registry import MODELS
    from mmaction.structures import ActionDataSample

    init_default_scope('mmaction')
    scores = torch.randn(2, 4)
    multi_hot = [ActionDataSample().set_gt_labels(torch.tensor([1.0, 0.0, 1.0, 0.0])) for _ in range(2)]
    one_class = [ActionDataSample().set_gt_labels(torch.tensor(c)) for c in (1, 3)]
    softmax = MODELS.build(dict(type='TimeSformerHead', num_classes=4, in_channels=8))
    assert torch.isfinite(softmax.loss_by_feat(scores, multi_hot)['loss_cls'])
    sigmoid = MODELS.build(
        dict(type='TimeSformerHead', num_classes=4, in_channels=8, loss_cls=dict(type='BCELossWithLogits'))
    )
    with pytest.raises(ValueError, match='must be the same as input size'):
        sigmoid.loss_by_feat(scores, one_class)
