"""The whole-model load behind ``load_from``, ``--resume``, ``tools/test.py``, ``tools/infer.py``
and the analysis tools: read safely, take the weights as the code that wrote the file laid them
out, compare key by key, refuse a mismatch (or load what matches when asked; a file of which nothing
fits the model is refused either way).

The comparison is the model's own ``load_state_dict`` run once with nothing copied: every
module's load pre-hooks convert the keys as in a real load (e.g. a swapped attention reading its
host's layout, :mod:`dna_mm.models.adapters.swap`), and a last pre-hook on each module takes its
own converted tensors out of the state dict before they would be copied. What torch then
reports missing / unexpected, and the shapes taken out, make the :class:`StateDictReport`; the
weights taken out are what a load copies.
"""

from __future__ import annotations

import inspect
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import torch
from mmengine.logging import print_log
from torch import nn

from ..errors import CheckpointMismatchError, CorruptCheckpointError
from .sources import read_checkpoint

#: mmengine's default: strip the ``module.`` prefix of a (Distributed)DataParallel model
STRIP_DDP_PREFIX = [(r'^module\.', '')]
#: how the refusal ends when some of the file fits the model, and when none of it does
PARTIAL_ADVICE = (
    'Nothing was loaded: use a checkpoint of this model, or --partial-load (config: load_partial = True) '
    'to load what matches'
)
NOTHING_FITS = (
    'Nothing of it fits the model, so a partial load is refused too: use a checkpoint of this model'
)


@dataclass
class StateDictReport:
    """How a checkpoint's weights match a model's (see :func:`compare_state_dict`)."""

    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, tuple, tuple]] = field(default_factory=list)  # key, ckpt, model
    loaded: int = 0
    layout: str = 'state_dict'  # the checkpoint's layout (dna_mm.converters.whole_model)
    weights: dict = field(default_factory=dict, repr=False)  # the model's keys -> checkpoint values
    checkpoint: Any = field(default=None, repr=False)  # the file's contents, as read

    @property
    def complete(self) -> bool:
        """Every model key loaded and every checkpoint key used."""
        return not (self.missing or self.unexpected or self.mismatched)

    def describe(self, limit: int = 20) -> str:
        """The problems, one key per line (at most ``limit`` per kind, then a count)."""

        def block(title: str, items: list[str]) -> list[str]:
            if not items:
                return []
            shown = [f'    {item}' for item in items[:limit]]
            more = [f'    ... ({len(items) - limit} more)'] if len(items) > limit else []
            return [f'  {title} ({len(items)}):', *shown, *more]

        return '\n'.join(
            block('missing from the checkpoint', self.missing)
            + block('unexpected (not in the model)', self.unexpected)
            + block('shape mismatch', self.shapes)
        )

    @property
    def shapes(self) -> list[str]:
        """The resized keys as ``'key: checkpoint [..] vs model [..]'``."""
        return [f'{key}: checkpoint {list(ck)} vs model {list(mo)}' for key, ck, mo in self.mismatched]

    def summary(self, examples: int = 2) -> str:
        """The problems on one line: each kind's count and its first ``examples`` keys, one resized
        key with its two shapes (``missing 369 (a, b and 367 more); unexpected 2 (x, y); shape
        mismatch 1 (w: checkpoint [7, 32] vs model [4, 32])``)."""
        kinds = (
            ('missing', self.missing, examples),
            ('unexpected', self.unexpected, examples),
            ('shape mismatch', self.shapes, 1),
        )
        return '; '.join(
            f'{title} {len(items)} ({first_keys(items, n)})' for title, items, n in kinds if items
        )


def first_keys(items: list[str], count: int) -> str:
    """The first ``count`` of ``items``, comma-separated, then ``and N more`` for the rest."""
    more = f' and {len(items) - count} more' if len(items) > count else ''
    return ', '.join(items[:count]) + more


def first_non_finite(tensors: Mapping[str, Any]) -> Optional[str]:
    """The first key of ``tensors`` whose floating-point tensor holds a NaN or inf, else ``None``."""
    for key, value in tensors.items():
        if torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return key
    return None


def compare_state_dict(model: nn.Module, state_dict: dict) -> StateDictReport:
    """Compare ``state_dict`` with ``model``'s keys and shapes as the model's load pre-hooks
    convert it; nothing is copied into ``model`` (see the module docstring). BN's
    ``num_batches_tracked`` is added by BN's own loader when missing, as in a real load."""
    own = model.state_dict(keep_vars=True)
    taken: dict = {}

    def take_own(module: nn.Module, local: dict, prefix: str, *_: Any) -> None:
        for key in [k for k in local if k in own and k.rpartition('.')[0] == prefix[:-1]]:
            taken[key] = local.pop(key)

    handles = [m.register_load_state_dict_pre_hook(take_own) for m in model.modules()]
    try:
        result = model.load_state_dict(state_dict, strict=False)
    finally:
        for handle in handles:
            handle.remove()
    place = {key: i for i, key in enumerate(state_dict)}  # the file's order, not torch's (module by module)
    report = StateDictReport(
        unexpected=sorted(result.unexpected_keys, key=lambda k: place.get(k, len(place)))
    )
    report.missing = [k for k in result.missing_keys if k not in taken]
    for key, value in taken.items():
        if hasattr(value, 'shape') and tuple(value.shape) != tuple(own[key].shape):
            report.mismatched.append((key, tuple(value.shape), tuple(own[key].shape)))
        else:
            report.weights[key] = value
    report.loaded = len(report.weights)
    return report


def load_whole_model(
    model: nn.Module,
    filename: str,
    *,
    strict: bool = True,
    map_location: Any = 'cpu',
    revise_keys: Optional[list[tuple[str, str]]] = None,
    after_read: Optional[Callable[[Any], None]] = None,
    advice: Optional[str] = None,
) -> StateDictReport:
    """Load the whole-model checkpoint ``filename`` into ``model``.

    The file is read ``weights_only`` from any source (:func:`~.sources.read_checkpoint`) and
    its weights taken as the code that wrote it laid them out (mmengine, the authors' TimeSformer
    and ImageNet ViT files, a bare state dict:
    :func:`dna_mm.converters.whole_model.whole_model_state_dict`; an MMPretrain classifier on a
    timm model into that timm model: :func:`~dna_mm.converters.whole_model.timm_classifier_state_dict`).
    A layout other than mmengine's is logged.

    ``strict``: any missing, unexpected or resized key is a ``CheckpointMismatchError`` naming
    ``filename`` (nothing is loaded; one line: :func:`mismatch_line`, ending in ``advice`` where a
    caller that offers no partial load gives its own); otherwise what matches is
    loaded and the rest keeps the model's values. A file of which no weight fits the model is
    refused in both cases: a partial load of nothing would train or test the model's own start.

    A weight (a parameter of ``model``) that holds a NaN or inf is refused with a
    ``CorruptCheckpointError`` naming it: nothing is loaded.

    ``revise_keys``: ``(pattern, replacement)`` regexes applied to the keys first (default:
    strip a ``module.`` prefix, as mmengine does). ``after_read`` is called with
    the file's contents before anything is loaded (the runner's ``after_load_checkpoint``
    hooks). Returns the comparison, with ``layout`` (the file's) and ``checkpoint`` (its
    contents).
    """
    from ..converters.whole_model import (  # imports the models
        LAYOUT_NAMES,
        timm_classifier_state_dict,
        whole_model_state_dict,
    )

    checkpoint = read_checkpoint(filename, map_location)
    if after_read is not None:
        after_read(checkpoint)
    if not isinstance(checkpoint, dict):
        raise CheckpointMismatchError(
            f'checkpoint {filename} holds a {type(checkpoint).__name__}, not a state dict'
        )
    state_dict, layout = whole_model_state_dict(checkpoint)
    timm_keys = timm_classifier_state_dict(state_dict)
    if timm_keys is not None and not any(k.startswith('backbone.') for k in model.state_dict()):
        state_dict, layout = timm_keys, 'mmpretrain_timm'  # into the timm model itself
    if layout != 'mmengine':
        print_log(f'checkpoint {filename}: {LAYOUT_NAMES[layout]}', logger='current')
    for pattern, repl in STRIP_DDP_PREFIX if revise_keys is None else revise_keys:
        state_dict = OrderedDict((re.sub(pattern, repl, k), v) for k, v in state_dict.items())
    report = compare_state_dict(model, state_dict)
    report.layout, report.checkpoint = layout, checkpoint
    if not report.complete and (strict or not report.loaded):
        raise CheckpointMismatchError(mismatch_line(model, filename, report, advice))
    parameters = dict(model.named_parameters())  # buffers may hold -inf on purpose (masks)
    bad = first_non_finite({k: v for k, v in report.weights.items() if k in parameters})
    if bad is not None:
        raise CorruptCheckpointError(
            f'checkpoint {filename}: the weight {bad} holds NaN or inf values (a damaged file, or a '
            f'run that diverged); nothing was loaded'
        )
    model.load_state_dict(report.weights, strict=False)
    return report


def mismatch_line(
    model: nn.Module, filename: str, report: StateDictReport, advice: Optional[str] = None
) -> str:
    """The one-line refusal of ``filename`` (:func:`load_whole_model`): how many of the model's
    weights match, each kind of problem with a few keys (:meth:`StateDictReport.summary`), and
    what to do: the backbone's own initialisation when the file is an image ViT's weights
    (:func:`backbone_option`; a few of them may fit by name, as MMPretrain's ``cls_token``), else
    ``advice`` when given (a caller that offers no partial load: the analysis tools), else a
    partial load when some of the file fits (:data:`PARTIAL_ADVICE`, the training and testing
    tools' options), else a checkpoint of this model."""
    total = report.loaded + len(report.missing) + len(report.mismatched)
    head = f'checkpoint {filename} does not match the model ({report.loaded} of its {total} weights match)'
    # an image ViT's file holds keys the model has not (its own blocks, head); a file of this model
    # (a detector's own, whose backbone keys read as a ViT's) holds none
    layout = image_vit_layout(report.checkpoint) if report.unexpected else None
    option = backbone_option(model, filename) if layout else None
    if option is None:  # not an image ViT's file (or no backbone that reads one)
        end = advice or (PARTIAL_ADVICE if report.loaded else NOTHING_FITS)
        return f'{head}: {report.summary()}. {end}'
    return (
        f"{head}: it holds an image ViT's weights (layout {layout}: {first_keys(report.unexpected, 2)}). "
        f'Nothing was loaded; initialise the backbone from it with --cfg-options {option} (load_from, '
        f"--resume and tools/test.py take a whole model's checkpoint)"
    )


def image_vit_layout(checkpoint: Any) -> Optional[str]:
    """The image-ViT layout of ``checkpoint``'s keys (timm, ``dna_vit_*``, the authors' DnA ViT,
    MMPretrain's classifiers, MMAction2's ImageNet ViT: ``IMAGE_LAYOUTS``, as the backbones'
    ``pretrained`` loaders detect it: :func:`dna_mm.converters.timesformer.detect_layout`), or
    ``None``."""
    from ..converters.timesformer import IMAGE_LAYOUTS, detect_layout, unwrap

    try:
        layout = detect_layout(unwrap(checkpoint))
    except ValueError:  # no layout the converters know
        return None
    return layout if layout in IMAGE_LAYOUTS else None


def backbone_option(model: nn.Module, filename: str) -> Optional[str]:
    """The ``--cfg-options`` that initialise ``model.backbone`` from ``filename``, when the
    backbone reads image checkpoints itself (a ``pretrained_state_dict`` method, as dna_mm's
    ``DnATimeSformer`` and ``ViTDet``): its ``pretrained`` argument, else its ``init_cfg``;
    ``None`` when the model has no such backbone."""
    backbone = getattr(model, 'backbone', None)
    if not callable(getattr(backbone, 'pretrained_state_dict', None)):
        return None
    if 'pretrained' in inspect.signature(type(backbone)).parameters:
        return f'model.backbone.pretrained={filename}'
    return f'model.backbone.init_cfg.type=Pretrained model.backbone.init_cfg.checkpoint={filename}'
