"""Which ``optim_wrapper.paramwise_cfg.custom_keys`` key gives each parameter its settings.

mmengine's ``DefaultOptimWrapperConstructor`` (and :class:`~dna_mm.engine.layer_decay.
LayerDecayOptimizerConstructor`) match a key against ``'{module}.{name}'``, the owning
module's dotted name, a dot and the parameter's own name (``'.name'`` for a parameter of the
model itself): the longest key that is a substring wins (equal lengths: the first in
alphabetical order), and its settings are the parameter's; the other keys are not applied to
it. A key that wins no parameter changes nothing, silently:

* it matches no parameter name (a typo, ``'alpah'``; a block the model does not have);
* every parameter it matches takes a longer key (``'alpha'`` beside a base's ``'.attn.alpha'``:
  the child's ``lr_mult`` never applies).

:func:`custom_key_notes` names each such key in one line. The shipped schedules' keys for the
attention family's gains (:data:`SHARED_KEYS`) serve softmax, DnA and differential attention
alike, so a model without the gain does not make them a note.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Mapping, Optional

from torch import nn

#: the keys the shipped schedules give the family's gains (DnA's per-head ``alpha``,
#: differential attention's ``lambda_*``): one schedule for every member, softmax included
SHARED_KEYS = ('alpha', 'lambda_')
#: the constructors that match ``custom_keys`` as mmengine's does
MATCHING_CONSTRUCTORS = ('DefaultOptimWrapperConstructor', 'LayerDecayOptimizerConstructor')


def matched_names(model: nn.Module) -> list[str]:
    """Each parameter's name as mmengine matches a key against it: ``'{module}.{name}'``, with
    ``'.name'`` for a parameter of ``model`` itself (``model.named_parameters()`` order)."""
    return [name if '.' in name else f'.{name}' for name, _ in model.named_parameters()]


def winning_key(name: str, keys: Iterable[str]) -> Optional[str]:
    """The key whose settings parameter ``name`` (:func:`matched_names`) takes: the longest that
    is a substring of it, the first alphabetically among equal lengths; ``None`` if none is."""
    ordered = sorted(sorted(keys), key=len, reverse=True)
    return next((key for key in ordered if key in name), None)


def paramwise_notes(model: nn.Module, optim_wrapper: Mapping) -> list[str]:
    """:func:`custom_key_notes` for an ``optim_wrapper`` config whose constructor matches keys as
    mmengine's does (:data:`MATCHING_CONSTRUCTORS`); a wrapper (DDP) is looked through. Another
    constructor, or none of ``custom_keys``: no note."""
    constructor = optim_wrapper.get('constructor') or 'DefaultOptimWrapperConstructor'
    keys = (optim_wrapper.get('paramwise_cfg') or {}).get('custom_keys')
    if constructor not in MATCHING_CONSTRUCTORS or not isinstance(keys, Mapping) or not keys:
        return []
    return custom_key_notes(getattr(model, 'module', model), keys)


def custom_key_notes(
    model: nn.Module, custom_keys: Mapping[str, object], at: str = 'optim_wrapper.paramwise_cfg.custom_keys'
) -> list[str]:
    """One line for each key of ``custom_keys`` that gives no parameter of ``model`` its
    settings (module docstring), naming what it matches, which key those parameters take, or
    the closest name the model has."""
    names = matched_names(model)
    winners = {name: winning_key(name, custom_keys) for name in names}
    notes = []
    for key in custom_keys:
        if any(won == key for won in winners.values()):
            continue
        matched = [name for name in names if key in name]
        if matched:
            takers = sorted({winners[name] for name in matched})
            shown = matched[0].lstrip('.') + (', ...' if len(matched) > 1 else '')
            taken = ' / '.join(repr(k) for k in takers)
            notes.append(
                f'{at}[{key!r}] applies to no parameter: each of the {len(matched)} it matches ({shown}) '
                f'takes the key {taken} (one key per parameter, the longest that matches); put '
                f'its settings in {taken}{_longer(key, matched, max(map(len, takers)))}'
            )
        elif key not in SHARED_KEYS and names:
            notes.append(
                f'{at}[{key!r}] matches no parameter of the model (a key is matched as a substring of '
                f"names such as {names[-1].lstrip('.')!r}){_closest(key, names)}"
            )
    return notes


def _closest(key: str, names: list[str]) -> str:
    """``'; without its leading dot ...'`` where the key's dot is what stops it (MMAction2's
    ``'.backbone.cls_token'`` against ``'backbone.cls_token'``), else the closest part of a
    parameter name, or ``''``."""
    bare = [name for name in names if key.startswith('.') and key[1:] in name]
    if bare:
        return f'; without its leading dot it matches {bare[0].lstrip(".")!r}'
    parts = sorted({part for name in names for part in name.split('.') if part})
    near = difflib.get_close_matches(key.strip('.').rsplit('.', 1)[-1], parts, n=1)
    return f'; did you mean {near[0]!r}?' if near else ''


def _longer(key: str, matched: list[str], length: int) -> str:
    """``", or use a longer key for them, such as 'attn.alpha'"``: the shortest tail of the first
    ``matched`` name (whole dotted parts) that holds ``key``, is longer than ``length`` and
    matches every one of ``matched``; ``''`` if none does."""
    parts = matched[0].lstrip('.').split('.')
    tails = ('.'.join(parts[-k:]) for k in range(1, len(parts) + 1))
    fits = (t for t in tails if key in t and len(t) > length and all(t in name for name in matched))
    tail = next(fits, None)
    return f', or use a longer key for them, such as {tail!r}' if tail else ''
