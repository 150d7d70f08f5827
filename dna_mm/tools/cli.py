"""The one wrapper every dna_mm tool runs its ``main`` in (``@cli_main('train.py')``): a user's
mistake is one line on stderr and exit status 2, a programming error keeps its traceback.

A user's mistake is any :class:`dna_mm.errors.UserError` (the checkpoint errors of
:mod:`dna_mm.checkpoint` included), a missing file (``FileNotFoundError``: a ``load_from`` path, a
config file), a ``type`` that is not registered (mmengine's ``KeyError: 'X is not in the ...
registry'``), a failed download (offline: the file to put in place is named), a value that
mmengine cannot merge into a config (``--cfg-options`` or a child config: a dict over a string,
an index past a list's end), and a config that builds a part with an argument it does not take
or a step that needs a package that is not installed
(:func:`~dna_mm.utils.build_errors.config_mistake`: the key, the type and the closest valid
names). ``--debug`` anywhere on the command line re-raises it with the traceback.

A ``KeyboardInterrupt`` (a second Ctrl-C in training, the first elsewhere) is one line and exit
status 130 (``128 + SIGINT``, what a shell reports for a process that Ctrl-C ended).

A run stopped by a loss outside its code (a data-loader worker or a rank that died:
:class:`dna_mm.errors.RunStopped`) is one line too, with exit status 1 (a crash, not the user's
mistake).

A tool parses its command line before it imports anything heavy (``--help`` answers at once):
``main`` parses with :mod:`argparse` alone, then hands its work to :func:`run_tool`::

    def main(argv=None):
        args = parse_args(argv)  # argparse only
        from dna_mm.tools.cli import run_tool
        return run_tool('train.py', train, args)

A tool declares ``--cfg-options`` with ``nargs='+'`` (plain ``key=value`` strings at parse time);
:func:`run_tool` turns them into mmengine's ``DictAction`` dict before the work starts.

A tool that takes an attention member by name (the demos, the study, the benchmarks) takes any
registered one, a member of the user's own too, and declares :data:`IMPORT_FLAG` to import its
module first (``dest='imports'``, ``nargs='+'``, :data:`IMPORT_HELP` written out in the tool);
:func:`run_tool` imports them (:func:`import_modules`) before the work starts, and a name the
registry does not know is one line (:func:`known_names`; a method name with its settings,
``dna:apm+gated``: :func:`known_methods`)::

    p.add_argument('--import', dest='imports', nargs='+', default=[], metavar='MODULE', help=IMPORT_HELP)
"""

from __future__ import annotations

import argparse
import errno
import functools
import importlib
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Sequence
from urllib.error import URLError

from ..errors import ConfigError, MissingFileError, RunStopped, SettingError, UserError, error_line
from ..utils.build_errors import config_mistake
from ..utils.files import not_an_input  # noqa: F401  (the tools' check of an output, where they import it)
from ..utils.mmcv_ops import missing_ops_line
from ..utils.notices import quiet_library_notices
from ..utils.parent_death import follow_torchrun_agent
from .rank_errors import hand_to_agent

DEBUG_FLAG = '--debug'
#: the ``--debug`` help of every tool (written out in each: a tool parses before it imports dna_mm)
DEBUG_HELP = 'print the traceback of an input error'
#: the option of the tools that take an attention member by name: modules to import first
IMPORT_FLAG = '--import'
#: its help (written out in each tool, a test keeps them equal)
IMPORT_HELP = (
    'import these first: a module on the Python path (dotted name) or a .py file; what they '
    'register (an attention member of your own) can then be named'
)
# mmengine's registry prefixes a build error with the class it was building
_NOT_REGISTERED = re.compile(r'is not in the [\w:]+ registry')
USER_ERRORS = (
    UserError,
    FileNotFoundError,
    FileExistsError,  # a work dir that is a file
    PermissionError,  # a folder that cannot be written
    IsADirectoryError,
    NotADirectoryError,
    URLError,
)


def user_file(path: str, what: str) -> str:
    """``path`` if it is an existing file or a URL / mmengine prefix (``scheme://``), else a
    :class:`~dna_mm.errors.MissingFileError` naming ``what`` (``'config'``, ``'load_from'``, ...)."""
    if '://' in str(path) or os.path.isfile(path):
        return path
    where = 'is a folder, not a file' if os.path.isdir(path) else 'does not exist'
    raise MissingFileError(f'{what} {path} {where}')


def output_file(path: Optional[str], flag: str) -> None:
    """Refuse, before any work, an output file a tool could not write at its end: ``path`` (its
    ``flag``) a folder, under a file, or in a folder that cannot be written. A missing folder is
    fine (the write creates it: :func:`~dna_mm.utils.files.write_text_atomic`). ``None``: nothing
    asked. A :class:`~dna_mm.errors.UserError`."""
    if path is None:
        return
    if os.path.isdir(path):
        raise UserError(f'{flag} {path} is a folder: give the path of the file to write')
    folder = Path(path).absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f'{flag} {path}: {folder} is a file, not a folder')
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f'{flag} {path}: the folder {folder} cannot be written')


def output_folder(path: str, flag: str) -> None:
    """Make the output folder ``path`` (the tool's ``flag``) now, before any work: a path that
    cannot be one (a file, under a file, in a folder that cannot be written) is a
    :class:`~dna_mm.errors.UserError` naming it and why."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f'{flag} {path} is a file, not a folder')
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise UserError(f'{flag} {path} cannot be made: {err.strerror}: {err.filename!r}') from None


def parse_size(text: str) -> tuple[int, int]:
    """A ``WIDTHxHEIGHT`` argument: ``'1920x1080'`` → ``(1920, 1080)``; a clear ``ValueError``
    otherwise (both sides at least 16)."""
    try:
        w, h = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise ValueError(f'size {text!r}: expected WIDTHxHEIGHT, e.g. 1920x1080') from None
    if w < 16 or h < 16:
        raise ValueError(f'size {text!r}: width and height must be at least 16')
    return w, h


def import_modules(specs: Optional[Sequence[str]]) -> list[str]:
    """Import each of ``specs`` (a tool's :data:`IMPORT_FLAG`), so that what it registers (an
    attention member of your own, in mmengine's ``MODELS``) can be named: a module on the Python
    path by its dotted name (``my_lab.attention``) or a Python file (``path/to/scaled.py``).
    Returns the names they are imported by (``['my_lab.attention', 'scaled']``): what a config's
    ``custom_imports`` and a fresh process import again.

    A file is imported by its name (``scaled``), its folder put first on ``sys.path`` and on
    ``PYTHONPATH``, so that the processes the tool starts (``tools/train.py``, a benchmark's fresh
    process) find it by that name too. (mmengine's ``import_modules_from_strings`` takes dotted
    names only and says no more than which one failed.)

    Raises:
        MissingFileError: a file that does not exist.
        ConfigError: no module of that name, a file whose name another module has, or a module
            whose own code fails (a syntax error, a module it imports that is not installed, an
            error while it runs: :func:`code_error`; a :class:`~dna_mm.errors.UserError` it
            raises, a member refused at registration, stays as it is).
    """
    names = []
    for spec in specs or ():
        is_file = spec.endswith('.py') or '/' in spec or os.sep in spec
        name = _file_module(spec) if is_file else spec
        try:
            module = importlib.import_module(name)
        except UserError:
            raise
        except ModuleNotFoundError as err:
            if err.name is None or not (name == err.name or name.startswith(f'{err.name}.')):
                raise ConfigError(f'{IMPORT_FLAG} {spec}: {code_error(err)}') from None
            raise ConfigError(
                f'{IMPORT_FLAG} {spec}: no module named {err.name!r} '
                '(a module on the Python path, or a .py file)'
            ) from None
        except Exception as err:  # noqa: BLE001  (the user's module: its error, where it is)
            raise ConfigError(f'{IMPORT_FLAG} {spec}: {code_error(err)}') from None
        if is_file and Path(module.__file__ or '').resolve() != Path(spec).resolve():
            raise ConfigError(
                f'{IMPORT_FLAG} {spec}: the module {name!r} is another file ({module.__file__}); rename yours'
            )
        names.append(name)
    return names


def code_error(err: BaseException) -> str:
    """What went wrong in a module's own code, and where: ``'SyntaxError: expected ':' (attn.py,
    line 3)'``, ``'ModuleNotFoundError: No module named 'x' (attn.py, line 1)'``: the error and
    the innermost line of its traceback (a syntax error: the line it names)."""
    if isinstance(err, SyntaxError):
        return f'SyntaxError: {err.msg} ({err.filename}, line {err.lineno})'
    tb, where = err.__traceback__, ''
    while tb is not None:
        where = f' ({tb.tb_frame.f_code.co_filename}, line {tb.tb_lineno})'
        tb = tb.tb_next
    return f'{type(err).__name__}: {err}{where}'


def _file_module(spec: str) -> str:
    """The name a Python file is imported by (its stem), its folder put first on ``sys.path`` and
    ``PYTHONPATH``."""
    if not os.path.isfile(spec):
        where = 'is a folder, not a file' if os.path.isdir(spec) else 'does not exist'
        raise MissingFileError(f'{IMPORT_FLAG} {spec} {where}')
    path = Path(spec).resolve()
    name = path.stem
    if path.suffix != '.py' or not name.isidentifier():
        raise ConfigError(f'{IMPORT_FLAG} {spec}: not a Python file with a module name (name.py)')
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, '__file__', None) or '').resolve() != path:
        raise ConfigError(
            f'{IMPORT_FLAG} {spec}: a module named {name!r} is imported already '
            f'({getattr(loaded, "__file__", None) or "built in"}); rename the file'
        )
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    paths = [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]
    if folder not in paths:
        os.environ['PYTHONPATH'] = os.pathsep.join([folder, *paths])
    return name


def known_names(flag: str, names: Sequence[str], lookup: Callable[[str], Any]) -> list:
    """``[lookup(name) for name in names]``: the names of a tool's ``flag`` (attention members)
    looked up; a ``ValueError`` or ``KeyError`` of ``lookup`` (a name it does not know: its message
    names what it knows) is a :class:`~dna_mm.errors.ConfigError` naming ``flag`` and the value,
    with the hint that :data:`IMPORT_FLAG` imports a member of your own."""
    found = []
    for name in names:
        try:
            found.append(lookup(name))
        except (ValueError, KeyError) as err:
            # a member's setting (a variant, +gated) is no name a module of your own would register
            own = '' if isinstance(err, SettingError) else f'; a member of your own: {IMPORT_FLAG} its module'
            raise ConfigError(f'{flag} {name}: {error_line(err)}{own}') from None
    return found


class KnownMethod(NamedTuple):
    """A method of a tool's flag (:func:`known_methods`): ``'A±+gated'`` →
    ``KnownMethod('A±+gated', 'dna', {'variant': 'apm', 'gated': True}, DnAAttention)``."""

    given: str  # as the user wrote it (a run's label)
    member: str  # the member's name (dna)
    settings: dict  # what the name adds to its config (variant, gated)
    cls: type  # the member's self-attention class


def known_methods(flag: str, names: Sequence[str]) -> dict[str, KnownMethod]:
    """``{canonical name: KnownMethod}`` for the methods a tool's ``flag`` names (the demos'
    ``--attn``, the study's ``--methods``: :func:`~dna_mm.family.method_attention`'s ``dna:apm``,
    ``A±``, ``NAME+gated``), each model once (:func:`~dna_mm.family.distinct_methods`: ``A±`` and
    ``dna:apm`` run once), read before any work: a member that is not registered, a cross form,
    or a setting its member does not take (``softmax:apm``:
    :func:`~dna_mm.models.attention.builder.check_settings`) is one
    :class:`~dna_mm.errors.ConfigError` naming ``flag`` and the value (:func:`known_names`)."""
    from ..family import distinct_methods, method_attention
    from ..models.attention.builder import check_settings, self_attention_class

    def lookup(name: str) -> KnownMethod:
        member, settings = method_attention(name)  # 'dna+gated': ('dna', {'gated': True})
        cls = self_attention_class(member)
        check_settings(member, settings)
        return KnownMethod(name, member, settings, cls)

    given = distinct_methods(flag, names)  # {canonical: as given}
    return dict(zip(given, known_names(flag, list(given.values()), lookup), strict=True))


#: what the machine's storage refuses, not a fault of the code: a full disk, a quota, a read-only
#: file system, a file-size limit (``ulimit -f``)
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


def _storage_line(err: OSError) -> str:
    name = errno.errorcode.get(err.errno, '')
    where = f'writing {err.filename}' if err.filename else 'a write (a log, the config or a result file)'
    return (
        f'the storage refused {where}: {err.strerror} ({name}); free space (or write elsewhere) and run '
        'again (a training run goes on from its last checkpoint with --resume)'
    )


def _user_message(err: BaseException) -> Optional[str]:
    """The one line for a user's mistake (or the machine's storage refusing a write:
    :data:`STORAGE_ERRNOS`), or ``None`` for a programming error. A missing file or folder is the
    user's when the error names it: the system's ``[Errno 2] No such file or directory`` naming
    none (a socket of a process that went away) is not, and its traceback says where it came
    from."""
    if isinstance(err, OSError) and err.errno in STORAGE_ERRNOS and not isinstance(err, USER_ERRORS):
        return _storage_line(err)
    if isinstance(err, OSError) and err.errno is not None and err.filename is None:
        return None  # the system's error naming no file (a message of ours has no errno)
    if isinstance(err, USER_ERRORS):
        return error_line(err)
    if isinstance(err, ImportError) and err.name == 'mmcv._ext':  # mmcv without its ops
        return missing_ops_line()
    if isinstance(err, KeyError) and _NOT_REGISTERED.search(str(err)):
        return error_line(err)
    if isinstance(err, SyntaxError) and _raised_in(err, 'import_modules_from_strings'):
        return f'custom_imports: a module of your own does not parse: {code_error(err)}'
    failed = _custom_import_failure(err)
    if failed is not None:
        why = failed.__cause__ or failed.__context__  # mmengine raises it while handling the reason
        wanted = _FAILED_IMPORT.search(str(failed))
        name = getattr(why, 'name', None)
        if why is None or (wanted and name and f'{wanted.group(1)}.'.startswith(f'{name}.')):
            cause = f' ({why})' if why is not None else ''
            return (
                f'custom_imports: {failed}{cause}; a module of your own (an attention member) is imported '
                'by name: put the folder of its file on PYTHONPATH'
            )
        return f'custom_imports: {failed}: {code_error(why)}'  # found, and failed inside
    if _raised_in(err, 'import_modules_from_strings'):  # a module of one's own that raised as imported
        return f'custom_imports: a module of your own failed as it was imported: {code_error(err)}'
    if isinstance(err, (TypeError, KeyError)) and _raised_in(err, '_merge_a_into_b'):
        return error_line(err)  # mmengine merging --cfg-options or a child config into its base
    if isinstance(err, (TypeError, ImportError, RuntimeError)):
        return config_mistake(err)
    return None


#: mmengine's ``import_modules_from_strings`` failure: the module a config's ``custom_imports`` names
_FAILED_IMPORT = re.compile(r'Failed to import (\S+)')


def _custom_import_failure(err: BaseException) -> Optional[BaseException]:
    """The ``ImportError`` of mmengine's ``import_modules_from_strings`` (a config's
    ``custom_imports``) in ``err``'s chain of causes (``Config.fromfile`` raises it again), or
    ``None``."""
    while err is not None:
        if isinstance(err, ImportError) and _raised_in(err, 'import_modules_from_strings'):
            return err
        err = err.__cause__
    return None


def _raised_in(err: BaseException, function: str) -> bool:
    """Whether ``function`` is on the traceback of ``err``."""
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == function:
            return True
        tb = tb.tb_next
    return False


class UserExit(SystemExit):
    """``SystemExit`` whose ``str()`` is the error message (what the tool printed): status 2 for
    a user's mistake, 1 for a :class:`~dna_mm.errors.RunStopped`."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(status)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _report(prog: str, err: BaseException, debug: bool) -> None:
    """Re-raise ``err`` unless it is a user's mistake and not ``debug``; else print its line and
    raise :class:`UserExit`."""
    if isinstance(err, RunStopped) and not debug:
        print(f'{prog}: stopped: {err}\n{prog}: ({DEBUG_FLAG} prints the traceback)', file=sys.stderr)
        raise UserExit(str(err), status=1) from None
    message = None if debug else _user_message(err)
    if message is None:
        raise err
    lines = f'{prog}: error: {message}\n{prog}: ({DEBUG_FLAG} prints the traceback)'
    if not hand_to_agent(lines):  # under dna_mm's torchrun, its agent prints it once for all ranks
        print(lines, file=sys.stderr)
    raise UserExit(message) from None


def cfg_options(values: Optional[list[str]]) -> Optional[dict]:
    """``--cfg-options`` strings (``['a.b=1', 'c=[1,2]']``) as mmengine's ``DictAction`` reads
    them (``{'a.b': 1, 'c': [1, 2]}``); ``None`` for none.

    Raises:
        ConfigError: an option that mmengine cannot read, named: no ``=``; a ``dict(...)`` value
            (what a config file says; ``DictAction`` would recurse until Python stops it, or take
            it as a string), with the keys to set one by one instead, and one inside a list or
            tuple (which ``DictAction`` keeps as text: mmengine fails on it later); brackets that do not pair
            up around a list or tuple (``DictAction`` asserts, or recurses, on them).
    """
    if not values or isinstance(values, dict):
        return values or None
    from mmengine.config import DictAction

    options: dict = {}
    for text in values:
        key, sep, value = text.partition('=')
        if not sep or not key:
            raise ConfigError(f'--cfg-options {text}: expected KEY=VALUE (e.g. train_cfg.max_epochs=1)')
        if re.fullmatch(r'\s*dict\s*\(.*\)\s*', value, re.DOTALL):
            raise ConfigError(f'--cfg-options {text}: {_dict_value(key, value)}')
        if re.search(r'\bdict\s*\(', value):  # in a list or tuple: DictAction keeps it as text, or asserts
            raise ConfigError(
                f'--cfg-options {text}: a dict inside a list cannot be an option; write it in a '
                f'config file (a child config: _base_ = [...], {key} = [*_base_.{key}, dict(...)], which '
                'keeps what the base config lists)'
            )
        namespace = argparse.Namespace()
        try:
            DictAction(option_strings=['--cfg-options'], dest='cfg_options')(None, namespace, [text])
        except (AssertionError, RecursionError):  # its bracket matching, which has no message of its own
            raise ConfigError(
                f'--cfg-options {text}: mmengine cannot read this value: a list or tuple is a whole value '
                'or item in brackets that pair up ([1,2], (1,2), [(1,2),(3,4)]), and a string cannot '
                'hold a comma'
            ) from None
        options.update(namespace.cfg_options)
    return options


def _dict_value(key: str, value: str) -> str:
    """Why ``key=dict(...)`` cannot be an option, and the options that set the same keys (a
    ``dict(...)`` in a config file is merged key by key too): ``key.type=DnAAttention key.variant=apm``."""
    import ast

    why = (
        "--cfg-options does not read dict(...) (mmengine's DictAction reads numbers, strings, lists, tuples)"
    )
    try:
        items = _dict_items(ast.parse(value.strip(), mode='eval').body, key, value.strip())
    except (SyntaxError, ValueError):
        return f'{why}; set its keys one by one: {key}.<name>=<value> ...'
    return f'{why}; set its keys one by one: {" ".join(items)}'


def _dict_items(node: Any, key: str, source: str) -> list[str]:
    """``key.name=value`` for each keyword of the ``dict(...)`` call ``node`` (nested calls
    flattened); a ``ValueError`` for anything but a call of ``dict`` with literal keywords."""
    import ast

    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == 'dict'):
        raise ValueError('not a dict(...) call')
    if node.args or any(kw.arg is None for kw in node.keywords):
        raise ValueError('positional arguments or **')
    items = []
    for kw in node.keywords:
        if isinstance(kw.value, ast.Call):
            items += _dict_items(kw.value, f'{key}.{kw.arg}', source)
            continue
        if isinstance(kw.value, ast.Name):  # type=DnAAttention: a string to mmengine's DictAction
            text = kw.value.id
        else:
            literal = ast.literal_eval(kw.value)  # ValueError for an expression
            text = literal if isinstance(literal, str) else ast.get_source_segment(source, kw.value)
        items.append(f'{key}.{kw.arg}={"".join(str(text).split())}')
    return items


def run_tool(prog: str, work: Callable[[argparse.Namespace], Any], args: argparse.Namespace) -> Any:
    """``work(args)``, a user's mistake as one line on stderr and :class:`UserExit` (status 2),
    anything else (or anything with ``args.debug``) with its traceback, mmengine's notices about
    code the user does not write off the terminal (:mod:`dna_mm.utils.notices`).
    ``args.cfg_options``, if present, is turned into a dict first (:func:`cfg_options`);
    ``args.imports`` (:data:`IMPORT_FLAG`), if present, is imported first and replaced by the
    names its modules are imported by (:func:`import_modules`). Started by torchrun, the tool
    stops with its agent (:func:`~dna_mm.utils.parent_death.follow_torchrun_agent`)."""
    debug = bool(getattr(args, 'debug', False))
    follow_torchrun_agent()  # a rank of torchrun stops (saved) when its agent is killed
    try:
        quiet_library_notices()
        if hasattr(args, 'cfg_options'):
            args.cfg_options = cfg_options(args.cfg_options)
        if hasattr(args, 'imports'):
            args.imports = import_modules(args.imports)
        return work(args)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f'{prog}: interrupted (Ctrl-C): stopped at once', file=sys.stderr)
        raise UserExit('interrupted', status=128 + signal.SIGINT) from None
    except Exception as err:  # noqa: BLE001 (sorted by _report: only the user's mistakes are caught)
        _report(prog, err, debug)


def cli_main(prog: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a ``main(argv=None)`` that parses its own arguments: what :func:`run_tool` does,
    with ``--debug`` read from the arguments."""

    def decorate(main: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(main)
        def wrapped(argv: Optional[list[str]] = None, *args: Any, **kwargs: Any) -> Any:
            try:
                return main(argv, *args, **kwargs)
            except Exception as err:  # noqa: BLE001 (sorted by _report)
                _report(prog, err, DEBUG_FLAG in (sys.argv[1:] if argv is None else argv))

        return wrapped

    return decorate
