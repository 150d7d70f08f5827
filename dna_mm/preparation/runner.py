"""Run one preparation task per video over many processes: resumable, atomic, verified.

Per output (:func:`produce`): an output that exists and verifies is *skipped*; otherwise it is
written to ``<output>.part``, verified and only then renamed (:func:`dna_mm.utils.files.atomic_path`:
a killed run leaves at most a ``.part`` file, overwritten by the next run); any error makes it
*failed* with the reason while the other videos go on. :func:`prepare_all` says the summary
(``echo``, the tool's ``print``), writes the failures to ``OUT_DIR/failed.txt`` and returns exit
status 1 if any video failed.
"""

from __future__ import annotations

import functools
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence, TypeVar

from mmengine.utils import track_parallel_progress, track_progress

from ..utils.files import atomic_path

DONE, SKIPPED, FAILED, LEFT_OUT = 'done', 'skipped', 'failed', 'left out'
#: how a preparation says a line of its summary: the tool's ``print``
Echo = Callable[[str], object]
#: how many entries of a list the summary prints before pointing to the file
SHOW = 20

J = TypeVar('J')


@dataclass(frozen=True)
class Outcome:
    """What happened to one video: ``status`` (done / skipped / failed / left out); ``reason`` is
    why it failed or was left out, or why it carries its ``note``."""

    name: str
    status: str
    reason: str = ''
    note: str = ''


def produce(
    name: str,
    dst: Path,
    write: Callable[[Path], object],
    check: Callable[[Path], Optional[str]],
    note: str = '',
    why: str = '',
) -> Outcome:
    """Skip ``dst`` if ``check`` passes on it, else ``write`` it to a temporary file, check, rename.
    ``check(path)``: ``None`` for a good file, else why not; ``note`` / ``why`` tag the outcome
    (``full frame`` / ``no skeleton file``); a failure's reason replaces ``why``."""
    if dst.is_file() and check(dst) is None:
        return Outcome(name, SKIPPED, why, note)
    try:
        with atomic_path(dst) as tmp:
            write(tmp)
            problem = check(tmp)
            if problem is not None:
                raise _Rejected(problem)
    except _Rejected as problem:
        return Outcome(name, FAILED, f'output failed verification: {problem}', note)
    except Exception as err:  # any encoder / container / OS error fails this video only
        return Outcome(name, FAILED, describe(err), note)
    return Outcome(name, DONE, why, note)


class _Rejected(Exception):
    """An output that failed its check: not renamed into place."""


def describe(err: BaseException) -> str:
    """One line for an exception: its type and the first line of its message."""
    strerror = getattr(err, 'strerror', None)  # FFmpeg / OS errors: the message without the path
    text = [strerror] if isinstance(strerror, str) and strerror else str(err).strip().splitlines()
    return f'{type(err).__name__}: {text[0]}' if text else type(err).__name__


def _guarded(task: Callable[[J], Outcome], job: J) -> Outcome:
    try:
        return task(job)
    except Exception as err:  # a bug in a task must not stop the other videos
        return Outcome(getattr(job, 'name', str(job)), FAILED, describe(err))


def default_workers() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_jobs(task: Callable[[J], Outcome], jobs: Sequence[J], workers: int) -> list[Outcome]:
    """``task(job)`` for every job on ``workers`` processes (in this process if 1), with mmengine's
    progress bar (videos per second, ETA) on stderr; ``task`` must be a module-level function and
    the jobs picklable."""
    call = functools.partial(_guarded, task)
    if workers <= 1 or len(jobs) <= 1:
        return track_progress(call, jobs, file=sys.stderr)
    return track_parallel_progress(call, jobs, min(workers, len(jobs)), keep_order=False, file=sys.stderr)


def prepare_all(
    title: str,
    out_dir: Path,
    plan: Callable[[int], Sequence[J]],
    task: Callable[[J], Outcome],
    workers: int,
    what: str,
    echo: Echo,
    notes: Iterable[tuple[str, str, str]] = (),
) -> int:
    """``plan(threads)`` the jobs (one encoder thread each when several workers share the cores,
    else FFmpeg's choice), run them, ``echo`` the summary, and list under ``heading`` and in
    ``out_dir/file`` the failures (``failed.txt``) and the outcomes of each ``notes`` entry
    ``(note or status, file, heading)`` (an empty list removes its stale file). Returns the exit
    status: 1 if any video failed, else 0."""
    jobs = plan(1 if workers > 1 else 0)
    echo(f'{len(jobs)} {what}, {workers} workers')
    outcomes = sorted(run_jobs(task, jobs, workers), key=lambda o: o.name)
    c = Counter(o.status for o in outcomes)
    echo(
        f'{title}: {len(outcomes)} videos: {c[DONE]} done, {c[SKIPPED]} skipped '
        f'(already there and verified), {c[FAILED]} failed'
        + (f', {c[LEFT_OUT]} left out' if c[LEFT_OUT] else '')
    )
    for note, file_name, heading in [*notes, (FAILED, 'failed.txt', 'failed')]:
        path = out_dir / file_name
        lines = [
            f'{o.name}\t{o.reason}' if o.reason else o.name
            for o in outcomes
            if (o.status if note in (LEFT_OUT, FAILED) else o.note) == note
        ]
        if not lines:
            path.unlink(missing_ok=True)
            continue
        out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(''.join(line + '\n' for line in lines), encoding='utf-8')
        echo(f'{heading}: {len(lines)} (listed in {path})')
        for line in lines[:SHOW]:
            echo('  ' + line.replace('\t', ': '))
        if len(lines) > SHOW:
            echo(f'  ... ({len(lines) - SHOW} more in {path})')
    return 1 if c[FAILED] else 0
