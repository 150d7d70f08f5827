"""The backbones' ``pretrained`` loader: read the file, convert its keys, fit the attentions
(:func:`~dna_mm.models.fitting.adapt_attentions`), check the shapes, load (non-strict) and log
a report.

:func:`load_pretrained` serves ``DnATimeSformer`` and ``ViTDet``; each gives only its key
conversion, a method ``pretrained_state_dict(checkpoint, combine) -> ModelKeys``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Collection, Mapping, NamedTuple

from mmengine.logging import print_log
from mmengine.runner.checkpoint import _load_checkpoint
from torch import Tensor, nn

from ...errors import PretrainedMismatchError
from ...family import NEGATIVE_INIT, NegativeInit
from ..fitting import abbreviate, adapt_attentions


class ModelKeys(NamedTuple):
    """A checkpoint in a backbone's keys (what its ``pretrained_state_dict`` returns).

    Attributes:
        state_dict: The file's tensors under the model's names, position tables resized.
        layout: The source layout recognised (named in the log).
        notes: Report sections the backbone adds, ``name → (log title, keys)`` (``resized``,
            ...); a model key noted here is not listed again as missing.
        self_init: Keys of the model's attentions that keep their initialisation when the file
            lacks them (ViTDet's rel-pos tables: an ImageNet ViT has none); their absence does
            not make an attention incomplete (they are still reported missing).
    """

    state_dict: 'OrderedDict[str, Tensor]'
    layout: str
    notes: Mapping[str, tuple[str, list[str]]]
    self_init: Collection[str] = ()


def load_pretrained(
    model: nn.Module, filename: str, neg_init: NegativeInit = NEGATIVE_INIT, combine: str = 'add'
) -> dict[str, list[str]]:
    """Load a checkpoint into a backbone (non-strict) and log a report: tensors ``generated``
    (DnA negative branches, ``neg_init``: ``Q- = q_neg_scale · Q``, ``V- = v_neg_scale · V``, ``α = alpha``),
    ``missing`` (they keep their initialisation), ``unexpected``, and the backbone's notes
    (``resized``; TimeSformer: ``video_init``; ViTDet: ``unused``).

    Args:
        model: A backbone with ``pretrained_state_dict(checkpoint, combine) -> ModelKeys``.
        filename: Read by mmengine's ``_load_checkpoint`` (on the CPU).
        combine: Sign of the branch sum in the authors' checkpoint (``'add'`` / ``'sub'``, see
            :func:`dna_mm.converters.official_to_dna_mm`).

    Raises:
        PretrainedMismatchError: the file does not fit the model (a user's mistake, one line in
            the tools; also a ``ValueError``): a key present in both has another shape (after the
            resizing; the first such key, and how many more), the backbone does not recognise
            its layout, or one of the model's attentions has some but not all of its tensors in
            the file; the message names the file and the key(s).
    """
    checkpoint = _load_checkpoint(filename, map_location='cpu')
    try:  # the key conversion and the fitting refuse a file that is not of this model: its keys
        converted = model.pretrained_state_dict(checkpoint, combine)
        sd, generated = adapt_attentions(model, converted.state_dict, neg_init, filename, converted.self_init)
    except PretrainedMismatchError:
        raise
    except ValueError as err:
        text = str(err)
        raise PretrainedMismatchError(text if text.startswith(filename) else f'{filename}: {text}') from err
    own = model.state_dict()
    resized = [key for key, value in sd.items() if key in own and own[key].shape != value.shape]
    if resized:
        key, more = resized[0], len(resized) - 1
        also = f' (and {more} more tensor{"s" * (more != 1)} of another shape)' if more else ''
        raise PretrainedMismatchError(
            f'{filename}: shape mismatch for {key}: checkpoint {list(sd[key].shape)}, model '
            f'{list(own[key].shape)}{also}: a checkpoint of a model of other sizes'
        )
    result = model.load_state_dict(sd, strict=False)
    noted = {k for _, keys in converted.notes.values() for k in keys}
    sections = dict(  # name → (log title, keys)
        missing=('missing (kept at init)', sorted(set(result.missing_keys) - noted)),
        unexpected=('unexpected', sorted(result.unexpected_keys)),
        generated=('generated', sorted(generated)),
        **converted.notes,
    )
    report = {name: keys for name, (_, keys) in sections.items()}
    lines = [
        f'loaded {filename} into {type(model).__name__} (layout: {converted.layout}, combine: {combine}): '
        f'{len(sd) - len(report["unexpected"])} tensors; generated {len(generated)} negative-branch '
        f'tensors; missing {len(report["missing"])}; unexpected {len(report["unexpected"])}'
    ]
    lines += [f'  {title}: {abbreviate(keys, 8)}' for title, keys in sections.values() if keys]
    print_log('\n'.join(lines), logger='current')
    return report
