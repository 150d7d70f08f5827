"""What an error raised while mmengine builds a part from a config means, in one line: the
argument the part does not take (with the closest valid names) or the package it needs.

mmengine's ``build_from_cfg`` frames on the traceback tell which part was being built, with
which arguments, from which registry (:func:`config_mistake`). Used by the tools' error wrapper
(:mod:`dna_mm.tools.cli`) and by the custom-dataset builder's pipeline check.
"""

from __future__ import annotations

import ast
import difflib
import dis
import functools
import inspect
import re
import textwrap
from types import TracebackType
from typing import Any, Optional

_UNEXPECTED_ARGUMENT = re.compile(r"got an unexpected keyword argument '(\w+)'")
_MISSING_ARGUMENTS = re.compile(
    r"(\w+)\.__init__\(\) missing \d+ required (?:positional|keyword-only) arguments?: (.+)"
)
# what MMAction2 / MMDetection steps say when an optional package is missing ('Install X to use Y')
_INSTALL_HINT = re.compile(r'\b[Ii]nstall ([\w\-.]+)')
#: what a part built from a config is called in a message, by its mmengine registry
_PART = {
    'model': 'model part',
    'transform': 'pipeline step',
    'loop': 'loop',
    'hook': 'hook',
    'dataset': 'dataset',
}


def accepted_arguments(obj: Any) -> list[str]:
    """The keyword arguments ``obj`` (a class or a function) takes: its ``__init__``'s, and up the
    MRO while an ``__init__`` passes ``**kwargs`` on (an ``__init__`` of torch's, such as
    ``Module``'s, ends the walk, as one that drops them does: :func:`keywords_dropped`; a class of
    torch's own, such as an optimizer, is read)."""
    if not inspect.isclass(obj):
        owners = [obj]
    else:
        owners = [k.__dict__['__init__'] for k in obj.__mro__ if '__init__' in k.__dict__]
    names: list[str] = []
    for i, fn in enumerate(owners):
        inherited = i > 0 and getattr(fn, '__module__', '').startswith(('torch.', 'builtins'))
        if inherited or fn is object.__init__:
            break
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            break
        keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        names += [p.name for p in params if p.kind in keyword and p.name not in ('self', 'cls')]
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params) or keywords_dropped(fn):
            break
    return list(dict.fromkeys(names))


def keywords_dropped(fn: Any) -> bool:
    """Whether ``fn`` takes ``**kwargs`` and never reads them (MMDetection's ``BaseBBoxCoder``,
    MMAction2's ``SampleFrames``): a key passed there is lost without a word
    (:func:`keyword_use`)."""
    return keyword_use(fn) == 'dropped'


#: what a function does next with its ``**kwargs`` dict: passes it on whole (``f(**kwargs)``), or
#: looks into it without taking a key out (``kwargs.get('rng')``, ``'x' in kwargs``)
_PASSES = ('DICT_MERGE', 'DICT_UPDATE', 'CALL_FUNCTION_EX')
_LOOKS = ('get', 'keys', 'items', 'values')


def keyword_use(fn: Any) -> Optional[str]:
    """What ``fn`` does with its ``**kwargs``, read from its bytecode: ``'dropped'`` (never read),
    ``'passed'`` (only passed on whole, ``f(**kwargs)``), ``'looked'`` (besides, only looked into:
    ``kwargs.get('rng')``, ``kwargs['x']``, ``'x' in kwargs``), ``'read'`` (anything else: a key
    taken out, ``locals()``); ``None`` without them (or without bytecode)."""
    code = getattr(inspect.unwrap(fn), '__code__', None)
    if code is None or not code.co_flags & inspect.CO_VARKEYWORDS:
        return None
    name = code.co_varnames[
        code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS)
    ]
    if name in code.co_cellvars or {'locals', 'vars'} & set(code.co_names):
        return 'read'
    ins = [i for i in dis.get_instructions(code) if i.opname not in ('CACHE', 'PRECALL', 'NOP')]
    uses = [
        (ins[i + 1] if i + 1 < len(ins) else None, ins[i + 2] if i + 2 < len(ins) else None)
        for i, at in enumerate(ins)
        if at.opname.startswith('LOAD')
        and name in (at.argval if isinstance(at.argval, tuple) else (at.argval,))
    ]  # 3.13's LOAD_FAST_LOAD_FAST holds two names
    kinds = {_use(after, then) for after, then in uses}
    if not kinds:
        return 'dropped'
    return 'read' if 'read' in kinds else 'looked' if 'looked' in kinds else 'passed'


def _use(after: Any, then: Any) -> str:
    """What the two instructions after a load of ``**kwargs`` do with it (:func:`keyword_use`)."""
    if after is None:
        return 'read'
    if after.opname in _PASSES:
        return 'passed'
    if (
        after.opname in ('LOAD_METHOD', 'LOAD_ATTR')
        and after.argval in _LOOKS
        or after.opname == 'CONTAINS_OP'
    ):
        return 'looked'
    looked_up = after.opname == 'LOAD_CONST' and then is not None and then.opname in ('BINARY_SUBSCR',)
    return 'looked' if looked_up else 'read'


def required_arguments(cls: type) -> list[str]:
    """The arguments a config of ``cls`` must give: those without a default of its ``__init__``,
    and, while an ``__init__`` takes ``*args`` and passes them on to the next one up the MRO
    (``super().__init__(x, 'lr', *args, **kwargs)``), that one's less those the call fills
    (mmengine's ``LRSchedulerMixin`` gives ``param_name``; dna_mm's list datasets pass MMAction2's
    ``ann_file`` on). An ``__init__`` without ``*args`` ends the walk: a parent's required ones may
    be given by the class itself, so only its own are read."""
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    required: list[str] = []
    call: tuple[int, frozenset[str]] = (0, frozenset())  # what the __init__ before fills of the next one's
    for init in [k.__dict__['__init__'] for k in cls.__mro__ if '__init__' in k.__dict__]:
        try:
            params = [p for p in inspect.signature(init).parameters.values() if p.name not in ('self', 'cls')]
        except (TypeError, ValueError):
            break
        named = [p for p in params if p.kind in keyword]
        filled = {p.name for p in named[: call[0]]} | call[1]
        required += [p.name for p in named if p.default is p.empty and p.name not in filled]
        passed = _parent_init_call(init) if any(p.kind is p.VAR_POSITIONAL for p in params) else None
        if passed is None:
            break
        call = passed
    return list(dict.fromkeys(required))


@functools.lru_cache(maxsize=None)
def _parent_init_call(init: Any) -> Optional[tuple[int, frozenset[str]]]:
    """``(the positional arguments before *args, the keyword names)`` of the parent ``__init__`` call
    in ``init``'s source (``super().__init__(x, 'lr', *args, k=v, **kwargs)``: ``(2, {'k'})``;
    ``Parent.__init__(self, ...)``: ``self`` not counted); ``None`` without source or such a call."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(init))))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != '__init__' or not any(isinstance(a, ast.Starred) for a in node.args):
            continue
        before = next(i for i, a in enumerate(node.args) if isinstance(a, ast.Starred))
        owner = node.func.value
        bound = isinstance(owner, ast.Call) and getattr(owner.func, 'id', '') == 'super'
        return before - (not bound), frozenset(k.arg for k in node.keywords if k.arg is not None)
    return None


def _builds(tb: Optional[TracebackType]) -> list[tuple[Any, dict, str]]:
    """``(class, arguments, registry name)`` of each mmengine ``build_from_cfg`` call on the
    traceback, outermost first: the parts being built from a config when the error was raised."""
    found = []
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == 'build_from_cfg' and 'obj_cls' in frame.f_locals:
            local = frame.f_locals
            found.append(
                (local['obj_cls'], local.get('args') or {}, getattr(local.get('registry'), 'name', ''))
            )
        tb = tb.tb_next
    return found


def _key_path(builds: list[tuple[Any, dict, str]]) -> str:
    """Where in the config the innermost part sits, as far as the builds tell: ``model.backbone``
    for a backbone built inside the model (the argument of each outer part that holds the next
    one), ``train_cfg`` for a train loop; ``''`` when it cannot be told."""
    cls, _, registry = builds[-1]
    name = getattr(cls, '__name__', '')
    if registry == 'loop':
        return next((f'{k}_cfg' for k in ('train', 'val', 'test') if k in name.lower()), '')
    if registry != 'model':
        return ''
    path = 'model'
    for (_, outer, _), (inner, _, _) in zip(builds, builds[1:], strict=False):
        held = [
            k for k, v in outer.items() if isinstance(v, dict) and v.get('type') in (inner.__name__, inner)
        ]
        if len(held) != 1:
            return ''
        path += f'.{held[0]}'
    return path


def config_mistake(err: BaseException) -> Optional[str]:
    """One line for a config that builds a part wrongly, else ``None``:

    * an argument the part needs and was not given (``TypeError: ... missing 1 required
      positional argument``, typically a misspelt one that a ``**kwargs`` took): the key, and the
      given key it was likely meant as;
    * an argument the part does not take (``TypeError: ... unexpected keyword argument``, raised
      where mmengine builds it from the config): the key, the part's type and the closest valid
      names (``did you mean 'embed_dims'?``); not one the part's ``__init__`` names, which its own
      code passed on wrongly (a bug in it, left to its traceback);
    * a part (a pipeline step, typically) that needs a package that is not installed
      (``ImportError``, or MMAction2's ``Install X to use Y``): the part and the package.
    """
    builds = _builds(err.__traceback__)
    if not builds:
        return None
    cls, args, registry = builds[-1]
    name = getattr(cls, '__name__', str(cls))
    what = f'{_PART.get(registry, registry or "part")} {name}'
    unexpected = _UNEXPECTED_ARGUMENT.search(str(err)) if isinstance(err, TypeError) else None
    valid = accepted_arguments(cls) if unexpected else []
    # a key the part does take: its own code passed it on wrongly (a bug, with its traceback)
    if unexpected and unexpected.group(1) in args and unexpected.group(1) not in valid:
        key = unexpected.group(1)
        close = difflib.get_close_matches(key, valid, n=3, cutoff=0.6)
        hint = (
            f"did you mean {' / '.join(repr(c) for c in close)}?" if close else f"it takes {', '.join(valid)}"
        )
        path = _key_path(builds)
        where = f'{path}.{key}: ' if path else ''
        return f'{where}the {what} takes no argument {key!r}; {hint}'
    missing = _MISSING_ARGUMENTS.search(str(err)) if isinstance(err, TypeError) else None
    if missing and missing.group(1) in [k.__name__ for k in getattr(cls, '__mro__', ())]:
        return _missing_arguments(re.findall(r"'(\w+)'", missing.group(2)), args, builds, what)
    install = _INSTALL_HINT.search(str(err))
    if isinstance(err, ImportError) or (isinstance(err, RuntimeError) and install):
        package = getattr(err, 'name', None) or (install.group(1) if install else None) or 'a package'
        return f'the {what} needs {package}, which is not installed: install it, or take the step out'
    return None


def _missing_arguments(
    names: list[str], args: dict, builds: list[tuple[Any, dict, str]], what: str
) -> Optional[str]:
    """``{path}: the {what} needs {names}``, each with the given key close to it, or ``None`` where
    a name was given (the part's own code called it wrongly: a bug, left to its traceback)."""
    if not names or any(n in args for n in names):
        return None
    path = _key_path(builds)
    given = [str(k) for k in args if k != 'type']
    needed = []
    for name in names:
        close = difflib.get_close_matches(name, given, n=1, cutoff=0.6)
        needed.append(f'{name!r} (written {close[0]!r}?)' if close else repr(name))
    return f'{path + ": " if path else ""}the {what} needs {", ".join(needed)}'
