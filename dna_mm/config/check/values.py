"""What a checked value must be, and the registry names a misspelt one is matched against: the
helpers every topic of :func:`dna_mm.config.check.check_config` shares.
"""

from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Any, Optional

from mmengine.config import Config


def not_positive(value: Any, key: str, allow: tuple = (), integer: bool = False) -> list[str]:
    """``value`` of ``key`` > 0 (or one of ``allow``); ``None`` leaves it to the default. With
    ``integer`` (a count, a length, an interval) it must be an int: mmengine's loops take
    ``int()`` of ``max_epochs`` or assert that it is one, torch's ``DataLoader`` refuses a float
    ``batch_size``. A string (``abc``, or ``[4`` that ``--cfg-options`` could not read as a list)
    is named either way."""
    kind = 'an int' if integer else 'a number'
    alt = f' (or {" / ".join(map(str, allow))})' if allow else ''
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return [f'{key} must be {kind} > 0{alt}, got {value!r}'] if integer or isinstance(value, str) else []
    if value in allow or value > 0:
        return []
    return [f'{key} must be > 0{alt}, got {value}']


def registry_of(cfg: Config, name: str) -> Any:
    """mmengine's registry ``name`` (``'OPTIMIZERS'``, ...) of the scope ``cfg`` builds in (its
    default scope's, whose parents are mmengine's); ``None`` where it cannot be had (a library
    that does not import here: the build will tell)."""
    from importlib import import_module  # noqa: PLC0415

    from mmengine import registry as root  # noqa: PLC0415

    from ..build import default_scope  # noqa: PLC0415

    try:
        scope = default_scope(cfg)
        return getattr(import_module(f'{scope}.registry') if scope else root, name)
    except Exception:  # noqa: BLE001 (an uninstalled or broken library: nothing to check against)
        return None


def registered_class(registry: Any, kind: str) -> tuple[bool, Any]:
    """``(known, class)``: whether ``registry`` could be asked, and the class it (or a parent)
    builds for ``kind`` (``None``: none)."""
    try:
        return True, registry.get(kind)
    except Exception:  # noqa: BLE001 (a library whose modules do not import here: the build will tell)
        return False, None


def type_class(registry: Any, kind: Any) -> Optional[type]:
    """The class a config's ``type`` names: itself (a new-style config's), or the one ``registry``
    (or a parent) builds for the name; ``None`` where none is found."""
    if isinstance(kind, type):
        return kind
    if isinstance(kind, str) and registry is not None:
        cls = registered_class(registry, kind)[1]
        return cls if isinstance(cls, type) else None
    return None


def class_arguments(cls: type) -> Optional[list[str]]:
    """The keyword arguments ``cls`` takes (its ``__init__``'s, up the classes while each passes
    ``**kwargs`` on: :func:`~dna_mm.utils.build_errors.accepted_arguments`; one that drops them
    ends the walk), or ``None`` where an ``__init__`` on the way takes some of them out, or looks
    at some that one after it drops (``RandomSampler``'s ``rng``), or the chain ends in one that
    keeps them for something else (any key then)."""
    import inspect  # noqa: PLC0415

    from ...utils.build_errors import accepted_arguments, keyword_use  # noqa: PLC0415

    owners = [k.__dict__['__init__'] for k in cls.__mro__ if '__init__' in k.__dict__]
    looked = False
    for i, init in enumerate(owners):
        # the walk of accepted_arguments: **kwargs reach no named argument past these
        inherited = i > 0 and getattr(init, '__module__', '').startswith(('torch.', 'builtins'))
        if inherited or init is object.__init__:
            return None
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            return None
        use = keyword_use(init)
        looked = looked or use == 'looked'
        if use == 'read':  # takes some of them out: which, its code says
            return None
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return accepted_arguments(cls)
        if use == 'dropped':  # the keys one on the way looked at are taken, and not named
            return None if looked else accepted_arguments(cls)
    return None


def argument_problems(
    registry: Any, node: Any, key: str, supplied: tuple[str, ...] = (), base: bool = False
) -> list[str]:
    """A part ``registry`` builds from the config ``node`` at ``key``: each key its class does not
    take (:func:`class_arguments`; none checked for a class that takes any keyword), the closest
    valid name suggested, and the arguments it needs that are not given (``supplied``: those its
    builder passes itself; ``base``: as :func:`unknown_keys`), but for one a given key's
    suggestion names already (``ann_fil``: one message, "did you mean 'ann_file'?"); ``[]`` for a
    type ``registry`` does not know. A misspelt required argument would otherwise be a
    ``TypeError`` naming no key once the model is built."""
    from ...utils.build_errors import required_arguments  # noqa: PLC0415

    cls = type_class(registry, node.get('type')) if isinstance(node, dict) else None
    if cls is None:
        return []
    name = cls.__name__
    given = {k: v for k, v in node.items() if k != 'type' and not str(k).startswith('_')}  # _scope_
    valid = class_arguments(cls)
    merged = key if base else ''
    out = (
        unknown_keys(given, valid, key, f'an argument of {name}', merged=merged) if valid is not None else []
    )
    unknown = [str(k) for k in given if k not in valid] if valid is not None else []
    meant = {near for k in unknown for near in difflib.get_close_matches(k, valid, n=1)}  # as suggested
    missing = [a for a in required_arguments(cls) if a not in given and a not in supplied and a not in meant]
    if missing:
        out.append(f'{key} ({name}) needs {", ".join(repr(a) for a in missing)}')
    return out


def registered_names(registry: Any) -> list[str]:
    """The names ``registry`` and its parents build (MMEngine's lookup of a plain name)."""
    names: list[str] = []
    while registry is not None:
        try:
            registry.import_from_location()
        except ImportError:
            pass
        names += list(registry.module_dict)
        registry = registry.parent
    return list(dict.fromkeys(names))


def closest_name(name: str, valid: list[str]) -> str:
    """``did you mean 'X'?`` (the closest valid name), else the valid names."""
    near = difflib.get_close_matches(name, valid, n=1)
    return f'did you mean {near[0]!r}?' if near else f'registered: {", ".join(valid)}'


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def unknown_keys(
    node: dict, valid: list[str], key: str, what: str, listed: Optional[str] = None, merged: str = ''
) -> list[str]:
    """Each key ``k`` of ``node`` not in ``valid``: ``'{key}.{k} is not {what} (did you mean ...?
    valid: ...)'``, the closest valid name suggested (``listed``: the valid names as the message
    gives them; default ``valid``, comma-separated). ``merged``: the key of ``node`` where a base
    config's dict is merged into it (the config inherits one): a key with no close name is said to
    be perhaps the base's, and how to replace that dict whole."""
    out = []
    for k in node:
        if k not in valid:
            near = difflib.get_close_matches(str(k), valid, n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            kept = f"; kept from the base config's? give {merged} _delete_=True to replace it whole"
            kept = kept if merged and not near else ''
            out.append(f'{key}.{k} is not {what} ({hint}valid: {listed or ", ".join(valid)}{kept})')
    return out


def has_base(cfg: Config) -> bool:
    """Whether ``cfg`` was read from a file that inherits a base config (``_base_``), whose dicts
    mmengine merges into the child's: a child that names another ``type`` keeps the base's keys.
    A check asks it once per part (each loader, the evaluators, the hooks, the optimizer): the
    file is parsed once for its text (:func:`_inherits`), read again where it was rewritten."""
    filename = getattr(cfg, 'filename', None)
    if not filename:
        return False
    try:
        text = Path(filename).read_bytes()
    except OSError:  # a file no longer there
        return False
    return _inherits(str(filename), text)


@functools.lru_cache(maxsize=32)
def _inherits(filename: str, text: bytes) -> bool:
    """Whether the config file ``filename``, whose content is ``text`` (the key of the cache: it
    is not parsed again while it stays the same), names a ``_base_`` (mmengine's
    ``Config._get_base_files`` parses it)."""
    try:
        return bool(Config._get_base_files(filename))
    except (OSError, SyntaxError, RuntimeError, ValueError):  # a file no longer there, or not a config
        return False


def is_size(value: Any) -> bool:
    """``value`` is an int > 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def square_size(value: Any) -> Optional[int]:
    """A side of ``value`` (an int > 0, or a pair of equal ones); ``None`` otherwise."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and value[0] == value[1]:
        value = value[0]
    return value if is_size(value) else None
