"""The command-line tools of ``tools/``, from an installed dna_mm (a wheel, or a checkout's
editable install).

    python -m dna_mm.tools NAME [ARGS...]     (or the console script: dna_mm NAME [ARGS...])

The wheel carries the scripts of ``tools/`` in ``dna_mm/.mim/tools`` (beside its configs, as
OpenMMLab's packages ship theirs; in a checkout the folder links to the repo's ``tools/``).
``NAME`` is a script's path under ``tools/`` without ``.py`` (``train``, ``test``, ``infer``,
``extract_features``, ``data/build_custom_dataset``, ``analysis/get_flops``), or its basename
where no other script has it (``build_custom_dataset``); a shell script keeps its ``.sh``
(``dist_train.sh``). The script runs as ``python tools/NAME.py ARGS...`` would: as ``__main__``,
with ``sys.argv[0]`` its path, ``sys.path[0]`` its folder and the same flags; a shell script
takes this process's place, as ``bash tools/NAME.sh ARGS...`` (its signals and exit status
are the launcher's), its ranks run by this Python (``PYTHON``, unless set). An argument
``dna_mm::FILE`` names a shipped config (``dna_mm::timesformer_dna_demo.py``) and is passed on as
that file's path.
"""

from __future__ import annotations

import difflib
import os
import runpy
import sys
from pathlib import Path

from ..utils.mim_compat import PREFIX, mim_folder, packaged_config


def scripts() -> dict[str, Path]:
    """Every shipped tool by name: ``path/under/tools`` for a Python script (no ``.py``), with
    ``.sh`` for a shell script; files starting with ``_`` are helpers, not tools."""
    root = mim_folder('tools')
    found = {}
    for path in sorted(root.rglob('*')):
        if path.suffix not in ('.py', '.sh') or path.name.startswith('_') or '__pycache__' in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        found[rel[: -len('.py')] if path.suffix == '.py' else rel] = path
    return found


#: tools' paths before the tools moved by job (kept for one release, with a ``FutureWarning``);
#: a moved tool's basename (``demo``, ``convert_checkpoint``) finds it as before
MOVED = {
    'analysis/benchmark_attention': 'benchmarks/benchmark_attention',
    'analysis/benchmark_data': 'benchmarks/benchmark_data',
    'analysis/benchmark_onnx': 'benchmarks/benchmark_onnx',
    'analysis/benchmark_operators': 'benchmarks/benchmark_operators',
    'analysis/benchmark_train_step': 'benchmarks/benchmark_train_step',
    'analysis/triton_kernel_table': 'benchmarks/triton_kernel_table',
    'data/benchmark_preparation': 'benchmarks/benchmark_preparation',
}


def find(name: str) -> Path:
    """The script of a tool name: its path under ``tools/`` (``.py`` optional), or a basename
    that only one script has (a name from before the tools moved: the new one, with a
    ``FutureWarning``). Unknown or ambiguous: ``LookupError`` naming the candidates."""
    known = scripts()
    key = name.removeprefix('tools/').removesuffix('.py')
    if key in MOVED and key not in known:
        from .._moved import warn_moved

        warn_moved(f'tools/{key}.py', f'tools/{MOVED[key]}.py')
        key = MOVED[key]
    if key in known:
        return known[key]
    same = [n for n in known if n.rsplit('/', 1)[-1] == key]
    if len(same) == 1:
        return known[same[0]]
    if same:
        raise LookupError(f'tool {name!r} is ambiguous: {", ".join(same)}')
    near = difflib.get_close_matches(key, [*known, *(n.rsplit('/', 1)[-1] for n in known)], n=1)
    hint = f'did you mean {near[0]!r}? ' if near else ''
    raise LookupError(f'no tool {name!r} ({hint}dna_mm --list lists them)')


def _shipped(arg: str) -> str:
    """A ``dna_mm::FILE`` argument as the shipped config's path (``LookupError`` naming it when
    dna_mm ships no such config); any other argument as it is."""
    if not arg.startswith(PREFIX):
        return arg
    try:
        return packaged_config(arg)
    except FileNotFoundError as err:
        raise LookupError(str(err)) from None


def run(name: str, argv: list[str]) -> int:
    """Run tool ``name`` with ``argv`` as ``python tools/NAME.py ARGV...`` would; ``dna_mm::FILE``
    arguments become the shipped config's path (an unknown one: ``LookupError``, before the tool
    runs). A shell script replaces this process (``bash`` is ``exec``-ed, and the launchers ``exec``
    torchrun or ``srun``): a signal to the process the user started reaches the launcher itself,
    which has the ranks save (a ``SIGTERM`` to a Python that waited for it would end only the
    Python), and its exit status is the launcher's. A Python script's ``sys.exit`` propagates, its
    normal end is 0."""
    script = find(name)
    argv = [_shipped(a) for a in argv]
    if script.suffix == '.sh':
        sys.stdout.flush()
        sys.stderr.flush()
        os.environ.setdefault('PYTHON', sys.executable)  # the launchers' ranks: this dna_mm's Python
        os.execvp('bash', ['bash', str(script), *argv])
    sys.argv = [str(script), *argv]
    sys.path.insert(0, str(script.parent))
    runpy.run_path(str(script), run_name='__main__')
    return 0
