"""A child config that sets keys of an attention its base names by name, as ``--cfg-options``
does.

A base may give an attention by its member's name (``attn_cfg='dna'``, ``attn_cfg=dict(
temporal='softmax', spatial='dna')``); ``--cfg-options model.backbone.attn_cfg.variant=apm``
sets a key of the dict that name stands for (:func:`~dna_mm.config.options.string_parent_options`).
A child config doing the same through ``_base_``::

    _base_ = ['dna_mm::vitdet_dna_coco.py']          # attn_cfg='dna'
    model = dict(backbone=dict(attn_cfg=dict(variant='apm')))

stopped at mmengine's merge (``attn_cfg={'variant': 'apm'} in child config cannot inherit from
base because attn_cfg is a dict in the child config but is of type <class 'str'>``). Here the
base's name becomes the dict it stands for before the merge (``dict(type='DnAAttention')``), and
the child's keys merge into it: ``dict(type='DnAAttention', variant='apm')``, what the option
gives. Only a key named ``attn_cfg`` (and its per-step keys, ``temporal`` / ``spatial``) whose
base value is a string naming a registered member, and whose child value is a dict without
``_delete_``, is read so; anything else merges as mmengine merges it (a name no member has keeps
mmengine's message).
"""

from __future__ import annotations

import functools
import os
from typing import Any

#: the key that holds a host's attention, and its per-step keys (TimeSformer's)
ATTENTION_KEY, STEP_KEYS = 'attn_cfg', ('temporal', 'spatial')
DELETE = '_delete_'


def named_parents(child: Any, base: Any) -> Any:
    """``base`` with each attention name that ``child`` sets keys below replaced by the dict the
    name stands for (:func:`~dna_mm.config.build.attention_named`), a copy where one is; else
    ``base`` itself."""
    if not isinstance(child, dict) or not isinstance(base, dict):
        return base
    value = child.get(ATTENTION_KEY)
    if not isinstance(value, dict) or value.get(DELETE) or ATTENTION_KEY not in base:
        return base
    held = base[ATTENTION_KEY]
    if isinstance(held, str):
        return _replaced(base, ATTENTION_KEY, held)
    if isinstance(held, dict):  # per step: attn_cfg=dict(temporal='softmax', spatial=...)
        steps = held
        for step in STEP_KEYS:
            below = value.get(step)
            if isinstance(below, dict) and not below.get(DELETE) and isinstance(steps.get(step), str):
                steps = _replaced(steps, step, steps[step])
        if steps is not held:
            base = base.copy()
            base[ATTENTION_KEY] = steps
    return base


def _replaced(parent: dict, key: str, name: str) -> dict:
    from mmengine.config import ConfigDict

    from .build import attention_named

    new = attention_named(name)
    if not isinstance(new, dict):  # no member of that name: mmengine's own message
        return parent
    parent = parent.copy()
    parent[key] = ConfigDict(new)
    return parent


def install() -> bool:
    """Wrap mmengine's ``Config._merge_a_into_b`` (a static method; the merge of a child config
    into its base, and of ``--cfg-options``) so that it merges into :func:`named_parents`'s base
    (idempotent). Returns whether the wrapper is in place (``DNA_MM_NO_MMENGINE_PATCH=1``: no)."""
    from mmengine.config import Config

    if os.environ.get('DNA_MM_NO_MMENGINE_PATCH') == '1':
        return False
    original = Config._merge_a_into_b
    if getattr(original, '__wrapped__', None) is not None:
        return True

    @functools.wraps(original)
    def _merge_a_into_b(a: dict, b: dict, allow_list_keys: bool = False) -> dict:
        return original(a, named_parents(a, b), allow_list_keys)

    Config._merge_a_into_b = staticmethod(_merge_a_into_b)
    return True
