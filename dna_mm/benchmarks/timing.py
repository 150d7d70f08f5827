"""The benchmarks' one timing loop: the compared calls take turns, call by call, so that load
drifting on a shared machine (another job, the CPU's clock, a cache another call left) hits
them alike, and each call is timed on its own.

    samples = time_in_turns({'softmax': step_a, 'dna': step_b}, rounds=15, warmup=2)
    ms = {name: median_ms(s) for name, s in samples.items()}

A call's :class:`Sample` holds its wall time (``time.perf_counter``), this process's CPU time
(``time.process_time``: decoding threads count, worker processes do not), what the call
returned and, with ``cuda=True``, the peak CUDA memory allocated during it (the device is
synchronised before and after the call, inside the timed span: kernels are asynchronous).
:func:`in_fresh_process` runs a measurement in a new interpreter, where a memory peak
(``ru_maxrss``) is the measurement's own.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
import statistics
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, Optional, Sequence, TypeVar

from ..errors import UserError, error_line

K = TypeVar('K', bound=Hashable)


@dataclass
class Sample:
    """One timed call."""

    wall: float  #: seconds
    cpu: float  #: seconds of this process's CPU time
    value: Any = None  #: what the call returned
    peak_bytes: Optional[int] = None  #: CUDA: the peak allocated during the call


def rotated(r: int, keys: Sequence[K]) -> list[K]:
    """``keys`` rotated by ``r``: round ``r`` starts with the ``r``-th (mod ``len(keys)``), so that
    each call takes each place in turn."""
    k = r % len(keys)
    return [*keys[k:], *keys[:k]]


def in_order(r: int, keys: Sequence[K]) -> list[K]:
    """``keys`` as given, every round."""
    return list(keys)


def time_call(fn: Callable[[], Any], cuda: bool = False) -> Sample:
    """``fn()`` timed; ``cuda``: the device synchronised before and after it (inside the timed
    span) and its peak allocated memory recorded."""
    if cuda:
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    if cuda:
        torch.cuda.synchronize()
    sample = Sample(time.perf_counter() - wall, time.process_time() - cpu, value)
    if cuda:
        sample.peak_bytes = torch.cuda.max_memory_allocated()
    return sample


def time_in_turns(
    calls: Mapping[K, Callable[[], Any]],
    rounds: int,
    warmup: int = 0,
    order: Callable[[int, Sequence[K]], Sequence[K]] = rotated,
    cuda: bool = False,
) -> dict[K, list[Sample]]:
    """Each of ``calls`` once per round, ``warmup`` rounds first (not kept), then ``rounds``;
    returns each call's :class:`Sample` per kept round (:func:`time_call`).

    Args:
        calls: Name → a call without arguments.
        rounds: The rounds kept.
        warmup: Rounds run before them, not kept (compilation, caches, allocator).
        order: ``order(r, names)`` → the names in the order round ``r`` calls them; the warm-up
            rounds are ``r = -warmup … -1``, the kept ones ``0 … rounds − 1``. It runs before the
            round's calls, so it may also prepare what they read (the round's input).
        cuda: Synchronise the device around each call and record its peak memory.
    """
    keys = list(calls)
    samples: dict[K, list[Sample]] = {k: [] for k in keys}
    for r in range(-warmup, rounds):
        for k in order(r, keys):
            sample = time_call(calls[k], cuda)
            if r >= 0:
                samples[k].append(sample)
    return samples


def median_ms(samples: Sequence[Sample], clock: str = 'wall') -> float:
    """The median of the samples' ``clock`` (``'wall'`` or ``'cpu'``), in milliseconds."""
    return 1000 * statistics.median(getattr(s, clock) for s in samples)


def in_fresh_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a new interpreter (``spawn``), its result sent back: a peak of the
    process's memory (``ru_maxrss``) measured there is the call's own. ``fn`` and its arguments
    must pickle (a module-level function); what the process prints is kept out of the caller's
    output. A failure is a ``RuntimeError`` with the process's traceback and the end of its output;
    a user's mistake there (a :class:`~dna_mm.errors.UserError`: a member's ``attend`` of the wrong
    shape) is raised again as it is, one line for the tools."""
    ctx = multiprocessing.get_context('spawn')
    results = ctx.Queue()
    with tempfile.NamedTemporaryFile('w+', suffix='.log') as log:
        proc = ctx.Process(target=_child, args=(results, log.name, fn, args))
        proc.start()
        while True:
            try:
                ok, value = results.get(timeout=1)
                break
            except queues.Empty:
                if not proc.is_alive():  # killed (out of memory) before it could answer
                    ok, value = False, f'the process ended with status {proc.exitcode}'
                    break
        proc.join()
        if isinstance(value, UsersMistake):
            raise value.error()
        if not ok:
            raise RuntimeError(f'{fn.__name__}{args} failed:\n{value}\n{log.read()[-2000:]}')
    return value


def _child(results: Any, log: str, fn: Callable[..., Any], args: tuple) -> None:
    """The fresh process of :func:`in_fresh_process`: its output to ``log``, ``(ok, value)`` to
    ``results``."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        results.put((True, fn(*args)))
    except UserError as err:  # the caller raises it again: its class and its line
        results.put((False, UsersMistake(type(err).__module__, type(err).__qualname__, error_line(err))))
    except BaseException:  # noqa: BLE001 (sent back whole: the caller raises it)
        results.put((False, traceback.format_exc()))


@dataclass(frozen=True)
class UsersMistake:
    """A :class:`~dna_mm.errors.UserError` raised in the fresh process, sent back as plain data
    (its class by name, its line): :meth:`error` makes it again, that class if it is one of
    :mod:`dna_mm.errors`' (they take the line), else a plain ``UserError``."""

    module: str
    name: str
    line: str

    def error(self) -> UserError:
        from .. import errors

        cls = getattr(errors, self.name, None) if self.module == errors.__name__ else None
        return (cls if isinstance(cls, type) and issubclass(cls, UserError) else UserError)(self.line)
