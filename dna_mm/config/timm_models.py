"""A timm model as the tools take it (export, benchmarks, analyses, FLOPs): ``timm:<name>``, their
``--cfg-options`` as ``create_model`` arguments (dotted keys nest: ``attn_cfg.variant=qpm_v``).
:func:`create_timm_model` builds it;
a user's mistake in either is a one-line :class:`~dna_mm.errors.ConfigError` with the closest
valid names (a name timm does not know: timm's model list; an argument the model does not take:
the arguments of its class, :func:`~dna_mm.utils.build_errors.accepted_arguments`), which the
tools print as every user mistake (:func:`dna_mm.tools.cli.run_tool`: one line, exit status 2).
"""

from __future__ import annotations

import difflib
import re
from types import TracebackType
from typing import Optional, Sequence

from torch import nn

from ..errors import ConfigError
from ..utils.build_errors import accepted_arguments

#: how a tool's model argument names a timm model
TIMM_PREFIX = 'timm:'
# Python's TypeError for a keyword argument a callable does not take
_UNEXPECTED = re.compile(r"got an unexpected keyword argument '([^']+)'")


def timm_name(model: str) -> Optional[str]:
    """The timm model name of a tool's model argument (``'timm:NAME'`` → ``'NAME'``), else ``None``
    (a config)."""
    return model[len(TIMM_PREFIX) :] if model.startswith(TIMM_PREFIX) else None


def check_timm_name(name: str, what: Optional[str] = None) -> None:
    """A :class:`~dna_mm.errors.ConfigError` for a model ``name`` timm does not know (``dna_vit_*``
    included: registered by ``import dna_mm``): ``what`` (default: ``timm:NAME: timm has no model
    'NAME'``), then the closest names of timm's model list. A name with a source (``hf-hub:…``,
    ``local-dir:…``) is left to timm."""
    import timm  # dna_vit_* are registered by dna_mm/__init__.py, run before this module

    if ':' in name or timm.is_model(name):
        return
    close = closest_names(name, timm.list_models())
    hint = f"did you mean {' / '.join(map(repr, close))}?" if close else 'timm.list_models() lists them'
    raise ConfigError(f'{what or f"{TIMM_PREFIX}{name}: timm has no model {name!r}"}; {hint}')


def closest_names(name: str, names: Sequence[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The (at most ``n``) names of ``names`` closest to a misspelt ``name``, closest first: each
    compared whole and by its start as long as ``name`` (difflib's ratio, the better of the two, at
    least ``cutoff``), since timm's names grow by suffixes (``dna_vit_tinyy`` is closest to
    ``dna_vit_tiny_patch16_224``, not to ``davit_tiny``)."""

    def score(candidate: str) -> tuple[float, float]:
        whole = difflib.SequenceMatcher(None, name, candidate).ratio()
        start = difflib.SequenceMatcher(None, name, candidate[: len(name)]).ratio()
        return max(whole, start), whole

    scored = sorted(((score(c), c) for c in names), key=lambda item: item[0], reverse=True)
    return [c for (best, _), c in scored[:n] if best >= cutoff]


def nested_arguments(model_args: Optional[dict]) -> dict:
    """``create_model`` keyword arguments from a tool's ``--cfg-options`` dict: dotted keys nest
    (``{'attn_cfg.variant': 'qpm_v'}`` → ``{'attn_cfg': {'variant': 'qpm_v'}}``)."""
    if not model_args:
        return {}
    from mmengine.config import Config

    nested = Config()
    nested.merge_from_dict(dict(model_args))
    return nested.to_dict()


def _built_class(tb: Optional[TracebackType]) -> Optional[type]:
    """The class timm's ``build_model_with_cfg`` was building when the error of ``tb`` was raised
    (innermost), else ``None``."""
    found = None
    while tb is not None:
        frame = tb.tb_frame
        built = frame.f_locals.get('model_cls') if frame.f_code.co_name == 'build_model_with_cfg' else None
        found = built if isinstance(built, type) else found
        tb = tb.tb_next
    return found


def unexpected_argument(
    err: TypeError, name: str, model_args: dict, flag: str = '--cfg-options'
) -> Optional[str]:
    """The line for ``err``, raised by ``create_model(name, **model_args)``, when it is an argument
    of ``model_args`` the model does not take: the key and the closest arguments of the class
    being built; ``None`` for any other ``TypeError`` (a programming error)."""
    match = _UNEXPECTED.search(str(err))
    if match is None or match.group(1) not in model_args:
        return None
    key, cls = match.group(1), _built_class(err.__traceback__)
    what = f'the model {cls.__name__}' if cls is not None else 'the model'
    valid = accepted_arguments(cls) if cls is not None else []
    close = difflib.get_close_matches(key, valid, n=3, cutoff=0.6)
    if close:
        hint = f"did you mean {' / '.join(map(repr, close))}?"
    else:
        hint = f"it takes {', '.join(valid)}" if valid else 'see its create_model arguments'
    return f'{TIMM_PREFIX}{name}: {what} takes no argument {key!r} ({flag}); {hint}'


def create_timm_model(name: str, model_args: Optional[dict] = None, flag: str = '--cfg-options') -> nn.Module:
    """``timm.create_model(name, pretrained=False, **model_args)`` (dotted keys nested:
    :func:`nested_arguments`), with random weights.

    Raises:
        ConfigError: a ``name`` timm does not know (:func:`check_timm_name`) or an argument of
            ``model_args`` (the tool's ``flag``) the model does not take
            (:func:`unexpected_argument`), in one line with the closest valid names.
    """
    import timm

    check_timm_name(name)
    kwargs = nested_arguments(model_args)
    try:
        return timm.create_model(name, pretrained=False, **kwargs)
    except TypeError as err:
        line = unexpected_argument(err, name, kwargs, flag)
        if line is None:
            raise
        raise ConfigError(line) from None
