"""One optimizer call per set of options, not one per parameter.

mmengine's ``paramwise_cfg`` (the recipes' exceptions to weight decay, layer decay) gives every
parameter a param group of its own, and a PyTorch optimizer runs its update once per group. On a
GPU that update is a handful of multi-tensor (``foreach``) kernels, each made to update many
tensors in one launch; with one tensor a group, TimeSformer-B's SGD step launches four or five
kernels per parameter, for 249 parameters with softmax and 369 with DnA (its ``q_neg``, ``v_neg`` and
``alpha`` in 24 attentions), and pays Python's per-group work as many times.

:func:`step_by_options` makes ``optimizer.step`` run over the groups merged by their options
(``DnARunner`` does so for every run's optimizers, :func:`wrapper_steps_by_options`):

    merged(groups) = [ {**g_1, params: params(g_1) + params(g_j) + ...}  for each distinct set
                       of options (every key but ``params``), in order of first appearance ]

and then puts the groups back as they were. An optimizer keeps its state per parameter
(``optimizer.state[p]``), so the merged call does the same computation (the same elementwise
updates of the same tensors, over longer lists) and everything else (``state_dict`` and the
checkpoints, the lr schedulers, the logged lr, gradient clipping) sees the groups as built.
Only the optimizers whose step reads its groups' options and writes nothing into them are
merged (:data:`MERGED_OPTIMIZERS`); a group whose options cannot be compared (a tensor lr) keeps
a call of its own. Hooks registered on the optimizer's step run inside the call and so see the
merged groups: a pre-hook that changes a group's options changes the merged copy, for that step.
Merging costs one pass over the groups' options each step.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Union

import torch
from mmengine.optim import OptimWrapper, OptimWrapperDict

#: optimizer classes (exactly these, not subclasses) whose ``step`` only reads its groups' options
MERGED_OPTIMIZERS = (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)


def options_key(group: dict) -> Optional[tuple]:
    """The options of a param group as a hashable key (every key but ``params``), or ``None``
    where one cannot be compared by value (a tensor, an unhashable value)."""
    items = tuple(sorted((k, v) for k, v in group.items() if k != 'params'))
    if any(isinstance(v, torch.Tensor) for _, v in items):
        return None
    try:
        hash(items)
    except TypeError:
        return None
    return items


def merged_groups(groups: list[dict]) -> list[dict]:
    """``groups`` with those of equal options merged into one (a new dict, the first one's options
    and every member's params in order); the given dicts and lists are left unchanged."""
    merged: list[dict] = []
    by_key: dict[tuple, dict] = {}
    for group in groups:
        key = options_key(group)
        if key is None:
            merged.append(group)
        elif key in by_key:
            by_key[key]['params'].extend(group['params'])
        else:
            by_key[key] = {**group, 'params': list(group['params'])}
            merged.append(by_key[key])
    return merged


def step_by_options(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """Make ``optimizer.step`` one call per set of options (module docstring); an optimizer not in
    :data:`MERGED_OPTIMIZERS`, or already made so, is returned unchanged. Returns ``optimizer``."""
    step: Callable[..., Any] = optimizer.step
    if type(optimizer) not in MERGED_OPTIMIZERS or getattr(step, 'by_options', False):
        return optimizer

    @functools.wraps(step)
    def step_merged(*args: Any, **kwargs: Any) -> Any:
        groups = optimizer.param_groups
        merged = merged_groups(groups)
        if len(merged) == len(groups):
            return step(*args, **kwargs)
        optimizer.param_groups = merged
        try:
            return step(*args, **kwargs)
        finally:
            optimizer.param_groups = groups

    step_merged.by_options = True  # type: ignore[attr-defined]
    optimizer.step = step_merged  # type: ignore[method-assign]
    return optimizer


def wrapper_steps_by_options(
    wrapper: Union[OptimWrapper, OptimWrapperDict],
) -> Union[OptimWrapper, OptimWrapperDict]:
    """:func:`step_by_options` for the optimizer of an mmengine optim wrapper (each optimizer of
    an ``OptimWrapperDict``); returns ``wrapper``."""
    wrappers = wrapper.values() if isinstance(wrapper, OptimWrapperDict) else [wrapper]
    for each in wrappers:
        step_by_options(each.optimizer)
    return wrapper
