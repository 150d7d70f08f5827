"""The recipe's settings MMAction2 and mmengine would take and then fail on, or train on without a
word, checked before anything is built (:func:`dna_mm.config.check_config`): an ``AccMetric`` of
one label per sample on a multi-label dataset, ``save_best`` against the multi-label metrics'
keys, the head's ``label_smooth_eps`` and ``loss_cls`` (its ``type``, its ``class_weight``), the
preprocessor's mixup / cutmix (``alpha``, ``num_classes``, ``RandomBatchAugment``'s ``probs``),
``num_clips`` > 1 in training with ``Recognizer3D``, and mmengine's dataset wrappers (``times``,
``oversample_thr``). Each is one line naming the key, on the demo config read by mmengine's
``Config.fromfile``; the premises are shown with MMAction2's and mmengine's own classes. Every
shipped config passes (tests/config/test_log_processor_check.py's
``test_every_shipped_config_passes``)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch
from conftest import DEMO_CONFIG, REPO, TINY_DEMO_CFG, refused_line
from mmengine.config import Config, DictAction

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.config.check.evaluation import MULTI_LABEL_METRICS, evaluator_keys
from dna_mm.config.prepare import limit_topk
from dna_mm.errors import ConfigError

BLEND = 'model.data_preprocessor.blending'
MIXUP = dict(type='MixupBlending', alpha=0.2, num_classes=4)
CUTMIX = dict(type='CutmixBlending', alpha=1.0, num_classes=4)
MAP = "metric_list=('mmit_mean_average_precision', 'mean_average_precision')"
#: a multi-label demo (the audit's ml.py): the datasets' multi_class, a sigmoid loss, the mAP metrics
MULTI_LABEL = (
    "model = dict(cls_head=dict(multi_class=True, loss_cls=dict(type='BCELossWithLogits'), "
    "average_clips='score'))\n"
    '_ds = dict(multi_class=True, num_classes=4)\n'
    'train_dataloader = dict(dataset=dict(**_ds))\n'
    'val_dataloader = dict(dataset=dict(**_ds))\n'
    'test_dataloader = dict(dataset=dict(**_ds))\n'
)
MAP_EVALUATOR = f"val_evaluator = dict(type='AccMetric', {MAP})\ntest_evaluator = val_evaluator\n"


def _merged(cfg: Config, *opts: str) -> Config:
    """``cfg`` with ``opts`` merged as ``--cfg-options`` merges them."""
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    if opts:
        cfg.merge_from_dict(parser.parse_args(['--o', *opts]).o)
    return cfg


def _cfg(*opts: str, config: str = DEMO_CONFIG) -> Config:
    """``config`` with ``opts`` merged as ``--cfg-options`` merges them, prepared as the tools
    prepare it (top-k limited to the classes; the demo's label map, made by ``make demo``, left
    out)."""
    cfg = Config.fromfile(config)
    if str(cfg.get('label_map')).startswith(str(REPO / 'data')):
        cfg.label_map = None  # made by `make demo`: in a checkout that ran it, not in a clean one
    _merged(cfg, *opts)
    limit_topk(cfg)
    return cfg


def _child(tmp_path: Path, text: str, *opts: str) -> Config:
    """A child config of the demo (its text ``text``), read by mmengine's ``Config.fromfile``."""
    path = tmp_path / 'child.py'
    path.write_text(f'_base_ = [{DEMO_CONFIG!r}]\n{text}\n')
    return _cfg(*opts, config=str(path))


def _with(cfg: Config, blending: dict) -> Config:
    """``cfg`` with ``blending`` as its model's data preprocessor's."""
    cfg.model.data_preprocessor.blending = blending
    return cfg


def _top_level_blending(blending: dict) -> Config:
    """The demo whose model has no data preprocessor, the top-level one (with ``blending``) in its
    place: mmengine's runner gives it to the model."""
    cfg = _cfg()
    preprocessor = cfg.model.pop('data_preprocessor')
    cfg.data_preprocessor = dict(preprocessor, blending=blending)
    return cfg


def _typeless_loss(*opts: str) -> Config:
    """The demo as the audit had it: a base that leaves ``loss_cls`` to the head's default (the
    shipped base writes it out since), ``opts`` merged onto that."""
    cfg = _cfg()
    cfg.model.cls_head.pop('loss_cls')
    return _merged(cfg, *opts)


def _wrapped(tmp_path: Path, wrapper: str) -> Config:
    """The demo whose train dataset is wrapped in ``wrapper`` (the audit's wrap_repeat.py /
    wrap_cb.py: ``dict(type=..., <its argument>, dataset=<the demo's train dataset>)``)."""
    return _child(
        tmp_path,
        '_inner = dict(_base_.train_dataloader.dataset)\n'
        f'train_dataloader = dict(dataset=dict(_delete_=True, {wrapper}, dataset=_inner))',
    )


def _refused(cfg: Config, mode: str = 'train') -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg, mode)
    return str(err.value)


def _single_label_metrics(split: str, listed: str, default: str = '', evaluator: str = '') -> str:
    failures = {
        'top_k_accuracy': 'top_k_accuracy reports a wrong accuracy without a word',
        'mean_class_accuracy': 'mean_class_accuracy stops on a TypeError once every prediction is in',
    }
    names = listed.split(' / ')
    return (
        f'{evaluator or split + "_evaluator"}.metric_list: {split}_dataloader.dataset is multi-label '
        f"(multi_class=True), and AccMetric's {listed}{default} "
        f'{"are metrics" if len(names) > 1 else "is a metric"} of one label per sample '
        f'({", ".join(failures[n] for n in names)}): use {MAP}'
    )


def _wrong_classes(at: str, n: int) -> str:
    return (
        f'{at}.num_classes ({n}) must be model.cls_head.num_classes (4): the blended labels are one-hot '
        "vectors of num_classes classes, which the loss compares with the head's scores"
    )


SMOOTH = (
    'model.cls_head.label_smooth_eps must be a number in [0, 1) (the share of each target spread evenly '
    'over the classes: at 1 or more the true class is no longer the most likely one, below 0 the others '
    'are negative; MMAction2 trains on it without a word), got '
)
CLIPS = (
    'train_dataloader.dataset.pipeline[1].num_clips (SampleFrames) must be 1 for training with '
    'Recognizer3D and TimeSformerHead, got {}: the recognizer scores each clip as a sample of its own '
    'against the one label of its video (a ValueError at the first iteration); sample more clips in the '
    'val / test pipelines, where the head averages them'
)
TYPELESS = (
    "model.cls_head.loss_cls has no type, got {}: a loss_cls in the config replaces the head's default "
    'loss whole (MMAction2 would stop on a KeyError naming no key); give model.cls_head.loss_cls.type '
    "with it (e.g. 'CrossEntropyLoss', TimeSformerHead's default)"
)
PROBS_SUM = (
    f"{BLEND}.probs sum to 1.3, more than 1 (each is its augment's chance, 1 - the sum that of no "
    'blending; MMAction2 asserts it)'
)

VAL_DEMO = _single_label_metrics('val', 'top_k_accuracy / mean_class_accuracy')
TEST_DEMO = _single_label_metrics('test', 'top_k_accuracy / mean_class_accuracy')

#: ``(the config, made when the test runs; the modes it is refused in; what the error says, the
#: same in each of those modes, or by mode)``; the other mode passes
REFUSED: list[tuple[Callable[[Path], Config], tuple[str, ...], str | dict[str, str]]] = [
    # the audit's: label_smooth_eps=1.5 trained towards a negative target, exit 0
    *[
        (lambda _, e=eps: _cfg(f'model.cls_head.label_smooth_eps={e}'), ('train',), f'{SMOOTH}{eps}')
        for eps in (1.5, -0.1, 1)
    ],
    (lambda _: _cfg("model.cls_head.label_smooth_eps='abc'"), ('train',), f"{SMOOTH}'abc'"),
    # the audit's: class_weight of 3 for 4 classes, a RuntimeError at the first iteration
    (
        lambda _: _cfg('model.cls_head.loss_cls.class_weight=[1.0,2.0,1.0]'),
        ('train',),
        'model.cls_head.loss_cls.class_weight has 3 weights and model.cls_head.num_classes is 4: one weight '
        "per class (torch's loss would stop the first iteration on a RuntimeError)",
    ),
    # the audit's: loss_weight=2.0 on a base without loss_cls: a registry KeyError naming no key
    (
        lambda _: _typeless_loss('model.cls_head.loss_cls.loss_weight=2.0'),
        ('train', 'test'),
        TYPELESS.format("{'loss_weight': 2.0}"),
    ),
    (
        lambda _: _typeless_loss('model.cls_head.loss_cls.class_weight=[1.0,2.0,1.0,1.0]'),
        ('train', 'test'),
        TYPELESS.format("{'class_weight': [1.0, 2.0, 1.0, 1.0]}"),
    ),
    # the audit's: alpha -1 / 0 a Dirichlet ValueError traceback as the runner is built
    *[
        (
            lambda _, a=alpha: _with(_cfg(), dict(MIXUP, alpha=a)),
            ('train', 'test'),
            f'{BLEND}.alpha must be > 0, got {alpha}',
        )
        for alpha in (0, -1)
    ],
    (
        lambda _: _with(_cfg(), dict(CUTMIX, alpha=0.0)),
        ('train', 'test'),
        f'{BLEND}.alpha must be > 0, got 0.0',
    ),
    # the audit's: no num_classes, a TypeError traceback as the runner is built
    (
        lambda _: _with(_cfg(), dict(type='MixupBlending', alpha=0.2)),
        ('train', 'test'),
        f"{BLEND} needs num_classes (MixupBlending's one-hot labels have that many classes: "
        'model.cls_head.num_classes, 4)',
    ),
    (
        lambda _: _with(_cfg(), dict(type='CutmixBlending')),
        ('train', 'test'),
        f"{BLEND} needs num_classes (CutmixBlending's one-hot labels have that many classes: "
        'model.cls_head.num_classes, 4)',
    ),
    # the audit's: 5 or 3 against the 4-class head, a RuntimeError at the first iteration
    *[
        (lambda _, n=n: _with(_cfg(), dict(MIXUP, num_classes=n)), ('train',), _wrong_classes(BLEND, n))
        for n in (5, 3)
    ],
    (  # the runner gives a model without a data preprocessor the top-level one
        lambda _: _top_level_blending(dict(MIXUP, alpha=-1)),
        ('train', 'test'),
        'data_preprocessor.blending.alpha must be > 0, got -1',
    ),
    # the audit's rba_probs.py: MMAction2 asserts the sum
    (
        lambda _: _with(
            _cfg(),
            dict(type='RandomBatchAugment', augments=[dict(MIXUP, alpha=0.8), CUTMIX], probs=[0.8, 0.5]),
        ),
        ('train', 'test'),
        PROBS_SUM,
    ),
    (
        lambda _: _with(_cfg(), dict(type='RandomBatchAugment', augments=[MIXUP], probs=[0.5, 0.3])),
        ('train', 'test'),
        f'{BLEND}.probs has 2 probabilities for 1 augments: one per augment (MMAction2 asserts it)',
    ),
    (  # MMAction2 appends to it: an AttributeError
        lambda _: _with(_cfg(), dict(type='RandomBatchAugment', augments=[MIXUP, CUTMIX], probs=(0.5, 0.3))),
        ('train', 'test'),
        f'{BLEND}.probs must be a float or a list of floats, one per augment (None: each as likely), got '
        '(0.5, 0.3)',
    ),
    (  # NumPy's choice refuses it at the first iteration
        lambda _: _with(_cfg(), dict(type='RandomBatchAugment', augments=[MIXUP, CUTMIX], probs=[1.2, -0.5])),
        ('train',),
        f'{BLEND}.probs[0] must be in [0, 1] (a probability), got 1.2; '
        f'{BLEND}.probs[1] must be in [0, 1] (a probability), got -0.5',
    ),
    (
        lambda _: _with(
            _cfg(), dict(type='RandomBatchAugment', augments=[MIXUP, dict(CUTMIX, num_classes=3)])
        ),
        ('train',),
        _wrong_classes(f'{BLEND}.augments[1]', 3),
    ),
    (
        lambda _: _with(_cfg(), dict(type='RandomBatchAugment', augments=dict(MIXUP, alpha=0), probs=0.5)),
        ('train', 'test'),
        f'{BLEND}.augments.alpha must be > 0, got 0',
    ),
    # the audit's: num_clips=2 in training, a ValueError at the first iteration
    *[
        (
            lambda _, n=n: _cfg(f'train_dataloader.dataset.pipeline.1.num_clips={n}'),
            ('train',),
            CLIPS.format(n),
        )
        for n in (2, 3)
    ],
    # the audit's wrap_repeat.py with times=0: a ZeroDivisionError in the sampler
    (
        lambda t: _wrapped(t, "type='RepeatDataset', times=0"),
        ('train',),
        'train_dataloader.dataset.times (RepeatDataset) must be > 0, got 0',
    ),
    (
        lambda t: _wrapped(t, "type='RepeatDataset', times=1.5"),
        ('train',),
        'train_dataloader.dataset.times (RepeatDataset) must be an int > 0, got 1.5',
    ),
    (
        lambda t: _wrapped(t, "type='RepeatDataset'"),
        ('train',),
        "train_dataloader.dataset (RepeatDataset) needs 'times'",
    ),
    # the audit's wrap_cb.py with oversample_thr=-0.5: a math domain error
    *[
        (
            lambda t, v=thr: _wrapped(t, f"type='ClassBalancedDataset', oversample_thr={v}"),
            ('train',),
            f'train_dataloader.dataset.oversample_thr (ClassBalancedDataset) must be > 0, got {thr}',
        )
        for thr in (-0.5, 0)
    ],
    # the audit's: a multi-label model with the demo's metrics (a TypeError after the epoch / the test)
    (
        lambda t: _child(t, MULTI_LABEL),
        ('train', 'test'),
        {'train': f'{VAL_DEMO}; {TEST_DEMO}', 'test': TEST_DEMO},
    ),
    (  # the audit's t_ml4: top_k_accuracy alone reported a top1 of 0.00
        lambda t: _child(
            t, MULTI_LABEL + "test_evaluator = dict(type='AccMetric', metric_list='top_k_accuracy')"
        ),
        ('train', 'test'),
        {
            'train': f"{VAL_DEMO}; {_single_label_metrics('test', 'top_k_accuracy')}",
            'test': _single_label_metrics('test', 'top_k_accuracy'),
        },
    ),
    (  # AccMetric's default metric_list, in a list of evaluators; the val split is single-label,
        # which a multi-label head does not fit (a test run reads the test split alone)
        lambda t: _child(
            t,
            MULTI_LABEL + "val_dataloader = dict(dataset=dict(multi_class=False))\n"
            "test_evaluator = [dict(type='AccMetric')]",
        ),
        ('train', 'test'),
        {
            'train': 'val_dataloader.dataset is single-label (no multi_class=True: one class a video) and '
            'model.cls_head is multi-label (multi_class=True and loss_cls BCELossWithLogits); give the '
            'datasets multi_class=True and num_classes for lists of several labels a video, or make the head '
            "single-label (no multi_class, a softmax loss such as loss_cls=dict(type='CrossEntropyLoss')); "
            + _single_label_metrics(
                'test', 'top_k_accuracy / mean_class_accuracy', " (AccMetric's default)", 'test_evaluator[0]'
            ),
            'test': _single_label_metrics(
                'test', 'top_k_accuracy / mean_class_accuracy', " (AccMetric's default)", 'test_evaluator[0]'
            ),
        },
    ),
    # the audit's f_mlbestbad: refused by the hook only after a whole epoch
    (
        lambda t: _child(t, MULTI_LABEL + MAP_EVALUATOR, "default_hooks.checkpoint.save_best='acc/top1'"),
        ('train',),
        "default_hooks.checkpoint.save_best='acc/top1': the validation reports "
        "acc/mmit_mean_average_precision, acc/mean_average_precision (or 'auto': the first of them)",
    ),
    # session 27's ml.py: a multi-label head left at 'prob' tested with a softmax over the classes
    (
        lambda t: _child(t, MULTI_LABEL + MAP_EVALUATOR, "model.cls_head.average_clips='prob'"),
        ('train', 'test'),
        "model.cls_head.average_clips is 'prob' with multi_class=True: a test would score each video with "
        'a softmax over the classes, one distribution that its classes share, where a multi-label head '
        'scores each class on its own (a sigmoid loss), and the mAP would rank the videos by those shares; '
        "set model.cls_head.average_clips='score'",
    ),
]


@pytest.mark.parametrize('make, modes, message', REFUSED)
def test_a_recipe_mistake_is_named(tmp_path, make, modes, message) -> None:
    """Each alone, the whole error (one line) naming the key, in the modes it matters in; the other
    mode passes."""
    cfg = make(tmp_path)
    for mode in ('train', 'test'):
        if mode in modes:
            said = message[mode] if isinstance(message, dict) else message
            with pytest.raises(ConfigError, match=re.escape(said)):
                check_config(cfg, mode)
            assert _refused(cfg, mode) == said
        else:
            check_config(cfg, mode)


def test_what_mmaction2_takes_passes(tmp_path) -> None:
    """The demo as it ships; label smoothing of 0.1; a typed loss with a weight or one weight per
    class; mixup / cutmix with alpha > 0 and the head's classes, ``RandomBatchAugment`` with
    probabilities (a list, a float) or without; more clips in the val / test pipelines; mmengine's
    wrappers with a positive ``times`` / ``oversample_thr``; a multi-label config with the mAP
    metrics (``save_best`` on either key or ``'auto'``), and one whose head trains a softmax on the
    lists' several labels on purpose (``multi_class=True`` with ``CrossEntropyLoss``: soft labels)."""
    multi_label = _child(tmp_path, MULTI_LABEL + MAP_EVALUATOR)
    passing = [
        _cfg(),
        _cfg('model.cls_head.label_smooth_eps=0.1'),
        _cfg('model.cls_head.label_smooth_eps=0'),
        _cfg('model.cls_head.loss_cls.loss_weight=2.0'),  # the shipped base writes loss_cls out
        _cfg('model.cls_head.loss_cls.class_weight=[1.0,2.0,1.0,1.0]'),
        _typeless_loss(
            "model.cls_head.loss_cls.type='CrossEntropyLoss'", 'model.cls_head.loss_cls.loss_weight=2.0'
        ),
        _with(_cfg(), MIXUP),
        _with(_cfg(), CUTMIX),
        _with(_cfg(), dict(type='MixupBlending', num_classes=4)),  # MMAction2's alpha: 0.2
        _with(_cfg(), dict(type='RandomBatchAugment', augments=[MIXUP, CUTMIX], probs=[0.5, 0.3])),
        _with(_cfg(), dict(type='RandomBatchAugment', augments=[MIXUP, CUTMIX], probs=[0.5, 0.5])),
        _with(_cfg(), dict(type='RandomBatchAugment', augments=[MIXUP, CUTMIX])),
        _with(_cfg(), dict(type='RandomBatchAugment', augments=MIXUP, probs=0.5)),
        _top_level_blending(MIXUP),
        _cfg(
            'test_dataloader.dataset.pipeline.1.num_clips=3', 'val_dataloader.dataset.pipeline.1.num_clips=2'
        ),
        _cfg('train_dataloader.dataset.pipeline.1.num_clips=1'),
        _wrapped(tmp_path, "type='RepeatDataset', times=2"),
        _wrapped(tmp_path, "type='ClassBalancedDataset', oversample_thr=0.3"),
        multi_label,
        _child(tmp_path, MULTI_LABEL + MAP_EVALUATOR, "default_hooks.checkpoint.save_best='auto'"),
        _child(tmp_path, MULTI_LABEL + MAP_EVALUATOR, "model.cls_head.loss_cls.type='CrossEntropyLoss'"),
        _with(_child(tmp_path, MULTI_LABEL + MAP_EVALUATOR), MIXUP),
    ]
    for key in ('acc/mmit_mean_average_precision', 'acc/mean_average_precision'):
        passing.append(
            _child(tmp_path, MULTI_LABEL + MAP_EVALUATOR, f"default_hooks.checkpoint.save_best='{key}'")
        )
    assert evaluator_keys(multi_label.val_evaluator) == [f'acc/{m}' for m in MULTI_LABEL_METRICS]
    for cfg in passing:
        for mode in ('train', 'test'):
            check_config(cfg, mode)


def test_the_clips_rule_is_recognizer3ds() -> None:
    """``num_clips`` > 1 in training is refused for ``Recognizer3D`` with a head of ``BaseHead``'s
    loss only: MMAction2's ``Recognizer2D`` passes its head the number of segments (TSN trains on 8
    and averages them), and a subclass of ``Recognizer3D`` with an ``extract_feat`` of its own, or a
    head with a loss of its own, is its own affair."""
    from mmaction.models.heads import TimeSformerHead
    from mmaction.models.recognizers import Recognizer3D
    from mmaction.registry import MODELS

    from dna_mm.config.check.recognizer import training_clips_problems

    clips = 'train_dataloader.dataset.pipeline.1.num_clips=8'
    assert training_clips_problems(_cfg(clips)) == [CLIPS.format(8)]
    assert training_clips_problems(_cfg(clips, 'model.type=Recognizer2D')) == []

    class OwnClipsRecognizer(Recognizer3D):
        def extract_feat(self, inputs, **kwargs):  # one that averages its clips, say
            return super().extract_feat(inputs, **kwargs)

    class OwnLossHead(TimeSformerHead):
        def loss_by_feat(self, cls_scores, data_samples):
            return super().loss_by_feat(cls_scores, data_samples)

    for cls in (OwnClipsRecognizer, OwnLossHead):
        MODELS.register_module(module=cls, force=True)
    try:
        assert training_clips_problems(_cfg(clips, 'model.type=OwnClipsRecognizer')) == []
        assert training_clips_problems(_cfg(clips, 'model.cls_head.type=OwnLossHead')) == []
    finally:
        for cls in (OwnClipsRecognizer, OwnLossHead):
            MODELS.module_dict.pop(cls.__name__)


def _labelled(*labels: Any) -> list:
    from mmaction.structures import ActionDataSample

    return [ActionDataSample().set_gt_labels(label) for label in labels]


def test_mmaction2_fails_on_the_metrics_and_the_head_the_checks_refuse() -> None:
    """The premises, on this MMAction2: ``AccMetric``'s ``mean_class_accuracy`` raises on multi-hot
    labels and its ``top_k_accuracy`` reports a wrong value (both predictions rank a true class
    first: the true top-1 is 1.0), its multi-label metrics report under their names (the prefix
    ``acc``, :func:`evaluator_keys`'s); ``BaseHead`` trains on the smoothed targets of any
    ``label_smooth_eps`` (1.5: a negative one), builds a ``loss_cls`` without a type into a
    ``KeyError`` naming no key, and torch's loss refuses a ``class_weight`` of 3 for 4 classes."""
    from mmaction.evaluation import AccMetric
    from mmaction.models.heads import TimeSformerHead
    from mmaction.models.losses import CrossEntropyLoss

    labels = [np.array([1, 0, 1, 0], dtype=np.float32), np.array([0, 1, 0, 1], dtype=np.float32)]
    preds = [np.array([0.9, 0.1, 0.8, 0.1]), np.array([0.1, 0.9, 0.1, 0.1])]
    with pytest.raises(TypeError, match='y_real dtype must be np.int64'):
        AccMetric().calculate(preds, labels)
    top1 = AccMetric('top_k_accuracy', metric_options=dict(top_k_accuracy=dict(topk=(1,))))
    assert top1.calculate(preds, labels)['top1'] != 1.0
    metric = AccMetric(MULTI_LABEL_METRICS)
    assert list(metric.calculate(preds, labels)) == list(MULTI_LABEL_METRICS)
    assert metric.default_prefix == 'acc'
    assert evaluator_keys(dict(type='AccMetric', metric_list=MULTI_LABEL_METRICS)) == [
        f'{metric.default_prefix}/{m}' for m in MULTI_LABEL_METRICS
    ]

    class Spy(torch.nn.Module):
        def forward(self, scores, targets):
            self.targets = targets
            return scores.sum()

    head = TimeSformerHead(num_classes=4, in_channels=8, label_smooth_eps=1.5)
    head.loss_cls = Spy()
    head.loss_by_feat(torch.zeros(2, 4), _labelled(1, 2))
    assert head.loss_cls.targets.min() < 0  # (1 - 1.5) + 1.5 / 4: the true class's target

    with pytest.raises(KeyError, match='must contain the key "type"'):
        TimeSformerHead(num_classes=4, in_channels=8, loss_cls=dict(loss_weight=2.0))
    with pytest.raises(RuntimeError, match='weight tensor should be defined either for all 4 classes'):
        CrossEntropyLoss(class_weight=[1.0, 2.0, 1.0])(torch.zeros(2, 4), torch.tensor([1, 2]))


def test_mmaction2_fails_on_the_blendings_the_checks_refuse() -> None:
    """The premises, on this MMAction2: a blending of ``alpha`` 0 or -1 and one without
    ``num_classes`` fail as the model is built, ``RandomBatchAugment`` asserts its ``probs``
    (one per augment, a sum <= 1), appends to them (a tuple fails) and draws with NumPy (a negative
    one fails at the first batch); a mixup of 5 classes makes 5-wide labels that torch's loss
    refuses against 4 scores."""
    from mmaction.models.losses import CrossEntropyLoss
    from mmaction.registry import MODELS

    for alpha in (0, -1):
        with pytest.raises(ValueError, match='Dirichlet'):
            MODELS.build(dict(MIXUP, alpha=alpha))
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'num_classes'"):
        MODELS.build(dict(type='CutmixBlending', alpha=1.0))
    augment = dict(type='RandomBatchAugment', augments=[MIXUP, CUTMIX])
    with pytest.raises(AssertionError, match='exceeds 1'):
        MODELS.build(dict(augment, probs=[0.8, 0.5]))
    with pytest.raises(AssertionError, match='must have same lengths'):
        MODELS.build(dict(augment, augments=[MIXUP], probs=[0.5, 0.3]))
    with pytest.raises(AttributeError, match="'tuple' object has no attribute 'append'"):
        MODELS.build(dict(augment, probs=(0.5, 0.3)))
    negative = MODELS.build(dict(augment, probs=[1.2, -0.5]))  # it builds
    with pytest.raises(ValueError, match='probabilities are not non-negative'):
        negative(torch.zeros(2, 1, 3, 2, 4, 4), _labelled(0, 1))

    _, samples = MODELS.build(dict(MIXUP, num_classes=5))(torch.zeros(2, 1, 3, 2, 4, 4), _labelled(0, 3))
    targets = torch.stack([s.gt_labels.item for s in samples])
    assert targets.shape == (2, 5)
    with pytest.raises(RuntimeError):
        CrossEntropyLoss()(torch.zeros(2, 4), targets)


def test_mmaction2_fails_on_training_clips() -> None:
    """The premise, on this MMAction2: the demo's ``Recognizer3D`` (made tiny) trains on 2 videos of
    one clip, and stops on the broadcast ``ValueError`` the audit saw with 2 clips of each."""
    from mmaction.registry import MODELS

    cfg = _cfg()
    cfg.merge_from_dict(TINY_DEMO_CFG)
    model = MODELS.build(cfg.model)
    assert type(model).__name__ == 'Recognizer3D'
    one = model.loss(torch.zeros(2, 1, 3, 8, 32, 32), _labelled(0, 3))
    assert torch.isfinite(one['loss_cls'])
    with pytest.raises(ValueError, match='operands could not be broadcast together'):
        model.loss(torch.zeros(2, 2, 3, 8, 32, 32), _labelled(0, 3))


def test_mmengine_fails_on_the_wrappers_the_checks_refuse() -> None:
    """The premises, on this mmengine: ``RepeatDataset(times=0)`` is empty and its sampler stops on
    a ``ZeroDivisionError``; ``ClassBalancedDataset(oversample_thr=-0.5)`` stops on a math domain
    error as it is built (0 repeats nothing)."""
    from mmengine.dataset import BaseDataset, ClassBalancedDataset, DefaultSampler, RepeatDataset

    class Toy(BaseDataset):
        METAINFO = dict(classes=('a', 'b'))

        def load_data_list(self) -> list:
            return [dict(label=i % 3 // 2) for i in range(6)]

        def get_cat_ids(self, idx: int) -> list:
            return [self.get_data_info(idx)['label']]

    with pytest.raises(ZeroDivisionError):
        list(DefaultSampler(RepeatDataset(Toy(), times=0), shuffle=True))
    assert len(RepeatDataset(Toy(), times=2)) == 12
    with pytest.raises(ValueError, match='math domain error'):
        ClassBalancedDataset(Toy(), oversample_thr=-0.5)
    assert len(ClassBalancedDataset(Toy(), oversample_thr=0)) == 6
    assert len(ClassBalancedDataset(Toy(), oversample_thr=0.5)) > 6


def test_train_stops_on_training_clips_in_one_line_with_status_2(tmp_path, capsys) -> None:
    """tools/train.py with the audit's ``--cfg-options train_dataloader.dataset.pipeline.1.num_clips=2``:
    one line, status 2, before the runner is built (MMAction2 would stop the first iteration on a
    traceback)."""
    opts = ['train_cfg.max_epochs=1', 'train_dataloader.dataset.pipeline.1.num_clips=2']
    args = [DEMO_CONFIG, '--work-dir', str(tmp_path), '--cfg-options', *opts]
    assert refused_line('tools/train.py', args, capsys) == CLIPS.format(2)
    assert not list(tmp_path.rglob('*.log')), 'a runner was built'
