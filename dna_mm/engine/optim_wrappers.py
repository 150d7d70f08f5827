"""The optimizer wrappers of a run: mmengine's ``OptimWrapper``, or each one of an
``OptimWrapperDict`` (a config with one optimizer per part of the model)."""

from __future__ import annotations

from typing import Any


def optim_wrappers(optim_wrapper: Any) -> dict[str, Any]:
    """Name -> ``OptimWrapper``: an ``OptimWrapperDict``'s ``optim_wrappers``, else
    ``{'': optim_wrapper}``."""
    return dict(getattr(optim_wrapper, 'optim_wrappers', None) or {'': optim_wrapper})
