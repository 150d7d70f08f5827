"""The tools run by other tools (the demos, the denoising study, the GPU check):
``python tools/<tool>.py`` in a subprocess as a user types it, its output shown as it comes,
and what a run of ``tools/test.py`` measured, read back from the file mmengine writes.

``tools/test.py --work-dir DIR`` leaves its metrics in ``DIR/<timestamp>/<timestamp>.json``
(mmengine's ``LoggerHook``: one JSON object, the evaluator's metrics as it returns them, e.g.
``acc/top1`` as a fraction, plus the mean ``time`` / ``data_time`` of a batch); a training run's
folder has no such file (its scalars are in ``vis_data/``). :func:`read_test_runs` reads them; the
line ``tools/test.py`` prints is ``dna_mm.config.format_metrics`` of the same metrics.

The tools pass the folder their runs work in as ``repo`` (:func:`runs_home`): a checkout's tools
their checkout, so that the paths in the configs resolve as they do for a user there and a
relative ``work_dir`` is relative to it; an installed dna_mm's tools (in
``site-packages/dna_mm/.mim``, which ``pip uninstall`` would leave their files in) the current
folder, with the installed tools (``python -m dna_mm.tools``) and configs (``dna_mm::``).

:func:`at_least` is the tools' one check of a count they are given (a demo's ``--epochs``, a
benchmark's ``--reps``): below its least, one line naming the flag, before any work (0 is not
"the default").
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from ..errors import ConfigError
from .parent_death import signal_on_parent_death

PathLike = Union[str, os.PathLike]
#: a count flag's value: a number, several (``--shape B N C``), or ``None`` (not given)
Count = Optional[Union[int, Sequence[int]]]
#: what mmengine adds to a test run's metrics: the mean seconds of a batch and of its loading
TIMING_KEYS = ('time', 'data_time')


def at_least(counts: Mapping[str, Count], least: int = 1) -> None:
    """Refuse a count below ``least``: ``counts`` maps each flag as the user writes it
    (``'--epochs'``) to its value (several for a flag of several numbers; ``None``, a flag not
    given, is skipped). A :class:`~dna_mm.errors.ConfigError` naming the first flag below
    ``least`` and what it got (the tool's one line, exit status 2), for a tool to raise before
    any work.

    Raises:
        ConfigError: ``'--epochs must be at least 1, got 0'``.
    """
    for flag, value in counts.items():
        if value is None:
            continue
        given = [value] if isinstance(value, int) else list(value)
        if min(given) < least:
            each = ' each' if len(given) > 1 else ''
            raise ConfigError(f'{flag} must be at least {least}{each}, got {" ".join(map(str, given))}')


def latest_log(work_dir: PathLike) -> Optional[Path]:
    """The newest mmengine log file (``<work_dir>/<timestamp>/<timestamp>.log``), if any."""
    logs = sorted(Path(work_dir).glob('*/*.log'), key=lambda p: p.stat().st_mtime)
    return logs[-1] if logs else None


def read_test_runs(work_dir: PathLike, since: float = 0.0) -> list[dict]:
    """The metrics of every run of ``tools/test.py`` in ``work_dir`` whose result was written at
    or after ``since`` (``time.time()``), oldest first: the numeric entries of each
    ``<timestamp>/<timestamp>.json`` but mmengine's :data:`TIMING_KEYS`."""
    found = [p for p in Path(work_dir).glob('*/*.json') if p.stem == p.parent.name]
    found = sorted((p.stat().st_mtime, p) for p in found)
    return [
        {
            key: value
            for key, value in json.loads(path.read_text()).items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in TIMING_KEYS
        }
        for mtime, path in found
        if mtime >= since
    ]


def read_test_metrics(work_dir: PathLike) -> dict:
    """The metrics of the last run of ``tools/test.py`` in ``work_dir`` (:func:`read_test_runs`)."""
    runs = read_test_runs(work_dir)
    if not runs:
        raise FileNotFoundError(f'{work_dir}: no test results (<timestamp>/<timestamp>.json) in it')
    return runs[-1]


def is_checkout(folder: PathLike) -> bool:
    """Whether ``folder`` is dna_mm's checkout (the package beside ``tools/`` and ``configs/``), not
    an installed dna_mm's ``.mim`` folder (its ``tools/`` and ``configs/`` only)."""
    return (Path(folder) / 'dna_mm' / '__init__.py').is_file()


def runs_home(tools_root: PathLike) -> Path:
    """The folder where the runs of a tool in ``tools_root`` (the folder above ``tools/``) work:
    their data, their work dirs (relative ``--data-root`` / ``--work-dir``) and their commands'
    working folder. A checkout's tools work in the checkout, from whatever folder they are run
    (``make demo``); an installed dna_mm's (``dna_mm demo``) in the current folder."""
    return Path(tools_root) if is_checkout(tools_root) else Path.cwd()


def tool_args(tool: str, repo: PathLike) -> list[str]:
    """The arguments of ``python`` that run dna_mm's tool ``tool`` (``'train'``, ``'test'``) in
    ``repo``: its script there (``tools/train.py``, a checkout's), else the installed one
    (``-m dna_mm.tools train``)."""
    script = f'tools/{tool}.py'
    return [script] if (Path(repo) / script).is_file() else ['-m', 'dna_mm.tools', tool]


def shipped_config(config: str, repo: PathLike) -> str:
    """How a run in ``repo`` names the shipped config ``config`` (``'configs/NAME'``): as it is
    where ``repo`` has it (a checkout), else as the installed one, ``dna_mm::NAME``."""
    return config if (Path(repo) / config).is_file() else 'dna_mm::' + config.removeprefix('configs/')


def run_script(
    args: list[str], repo: PathLike, name: str = 'demo', work_dir: Optional[PathLike] = None
) -> str:
    """``python <args>`` in ``repo``, the command echoed first and its output shown as it comes
    (mmengine's progress lines with their ETA); returns the output. A failure exits naming the
    newest log file of ``work_dir``. The tool gets ``SIGTERM`` if this process is killed
    (:func:`~dna_mm.utils.parent_death.signal_on_parent_death`): a training run saves and stops
    instead of training on unseen."""
    cmd = [sys.executable, *args]
    print('$ ' + shlex.join(cmd), flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    if env.get('PYTHONPATH'):  # the tool runs in repo: a folder named from here keeps its place
        env['PYTHONPATH'] = os.pathsep.join(
            os.path.abspath(p or os.curdir) for p in env['PYTHONPATH'].split(os.pathsep)
        )
    lines = []
    with subprocess.Popen(
        cmd,
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env=env,
        preexec_fn=partial(signal_on_parent_death, signal.SIGTERM),
    ) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    log = latest_log(Path(repo) / work_dir) if work_dir is not None else None
    if proc.returncode != 0:
        where = f'; full log: {log}' if log is not None else ''
        sys.exit(f'{name}: command failed with exit code {proc.returncode}{where}')
    if log is not None:
        print(f'full log: {log}', flush=True)
    return ''.join(lines)


def import_options(imports: Sequence[str]) -> list[str]:
    """``--cfg-options`` that make a run of a demo config (whose ``custom_imports`` is ``dna_mm``)
    import the modules ``imports`` too (a member of the user's own registers itself there; a file's
    folder is on ``PYTHONPATH``: :func:`dna_mm.tools.cli.import_modules`); none for none."""
    return [f'custom_imports.imports=[dna_mm,{",".join(imports)}]'] if imports else []


def attention_options(member: str, settings: Optional[Mapping[str, Any]] = None) -> list[str]:
    """``--cfg-options`` putting attention ``member`` in every attention of a demo's backbone
    (``model.backbone.attn_cfg``) with ``settings`` (:func:`~dna_mm.family.method_attention`'s:
    ``{'variant': 'apm', 'gated': True}`` → ``attn_cfg.variant=apm attn_cfg.gated=True``, merged
    into the dict ``member`` names: :func:`dna_mm.config.build.merge_options`)."""
    opts = [f'model.backbone.attn_cfg={member}']
    return opts + [f'model.backbone.attn_cfg.{key}={value}' for key, value in (settings or {}).items()]


def demo_options(
    attn: str,
    data_root: str,
    epochs: Optional[int] = None,
    imports: Sequence[str] = (),
    settings: Optional[Mapping[str, Any]] = None,
) -> list[str]:
    """``--cfg-options`` of a run of the video demo's config: ``attn`` in every attention with
    ``settings`` (:func:`attention_options`), the clips of
    ``data_root`` (``train.txt``; ``test.txt`` for validation and test) and their class names
    (``classes.txt``: the config's ``label_map``, which the saved config gives ``tools/infer.py``),
    ``epochs`` (the schedule's end, validation and checkpoint intervals move with it; ``None``:
    the config's), the modules ``imports`` imported (:func:`import_options`).

    Raises:
        ConfigError: ``epochs`` below 1 (:func:`at_least`).
    """
    at_least({'--epochs': epochs})
    opts = attention_options(attn, settings)
    opts += [f'label_map={data_root}/classes.txt', *import_options(imports)]
    for split, ann in (('train', 'train'), ('val', 'test'), ('test', 'test')):
        opts += [
            f'{split}_dataloader.dataset.ann_file={data_root}/{ann}.txt',
            f'{split}_dataloader.dataset.data_prefix.video={data_root}/videos',
        ]
    if epochs is not None:
        opts += [f'train_cfg.max_epochs={epochs}']
    return opts


def train_then_test(
    config: str,
    work_dir: str,
    opts: list[str],
    dump: str,
    repo: PathLike,
    name: str = 'demo',
    seed: int = 0,
    resume: bool = False,
) -> tuple[dict, float]:
    """``tools/train.py`` (``--seed seed``; ``--resume`` with ``resume``: a run stopped half-way
    continues from its checkpoint), then ``tools/test.py`` on its last checkpoint with ``--dump``,
    both in ``repo`` (:func:`tool_args`: ``repo``'s scripts, else the installed ones); the test's
    metrics (:func:`read_test_metrics`) and the seconds both took this time."""
    start = time.time()
    train = [config, '--work-dir', work_dir, '--seed', str(seed), *(['--resume'] * resume)]
    train += ['--cfg-options', *opts]
    run_script([*tool_args('train', repo), *train], repo, name, work_dir)
    ckpt = (Path(repo) / work_dir / 'last_checkpoint').read_text().strip()
    test = [config, ckpt, '--work-dir', work_dir, '--dump', dump, '--cfg-options', *opts]
    run_script([*tool_args('test', repo), *test], repo, name, work_dir)
    return read_test_metrics(Path(repo) / work_dir), time.time() - start
