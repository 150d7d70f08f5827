"""Data-loader workers end with their run, whatever path the main process leaves by.

Python ends a process's daemonic children (loader workers are) at exit with ``SIGTERM`` and then
joins them without a time limit (``multiprocessing.util._exit_function``). The training loaders'
workers ignore ``SIGTERM`` / ``SIGUSR1`` / ``SIGINT`` (:mod:`dna_mm.engine.preemption`: SLURM and
a terminal signal every process of a job, and a worker that died would fail the iteration that is
to be saved), so that exit would wait for them forever: after an exception, at the normal end of
an iteration-based loop (its endless iterator still holds workers), after a preemption. So the
main process ends them itself:

* :func:`end_iterator_workers`: torch's own shutdown of one iterator's workers (the done event,
  ``None`` to each; an idle worker leaves at once, a busy one after its sample; 5 s at most a
  worker), then ``SIGKILL`` for any still alive. A loader worker only reads: killing it loses
  nothing.
* :func:`drop_persistent_workers`: a loader with ``persistent_workers`` keeps its first iterator,
  and ``iter(loader)`` hands it back with the workers it started (torch's ``DataLoader.__iter__``),
  forked with the loader's ``worker_init_fn`` and seed of that time. An iteration-based loop starts
  them when it is built, before the hooks' ``before_train``; workers that must ignore the
  preemption signals or take a resumed run's seed are started again: that iterator's workers
  ended, the loader forgets it.
* :func:`end_runner_workers`: every iterator a runner still holds (an iteration-based loop's,
  persistent workers', one left in a frame of the exception that ended the loop);
  :class:`~dna_mm.engine.runner.DnARunner` calls it when training or testing ends, however it ends.
* :func:`workers_die_with_parent`: a worker is killed the moment the process that started it
  ends, however it ends (``kill -9``, the OOM killer: no path of its own runs;
  :mod:`dna_mm.utils.parent_death`). Left alone, a worker checks every 5 s whether its parent
  lives, and ends some time after; until then it holds the copies of its process's sockets that
  ``fork`` gave it, so a distributed run's other ranks see no closed connection, and wait.
  :class:`~dna_mm.engine.runner.DnARunner` gives every loader it builds such workers.
* At interpreter exit, before multiprocessing's exit function (an ``atexit`` registered after
  it runs first): torch's worker-failure ``SIGCHLD`` handler is set back to the default (a worker
  ended here is not a failure), every live loader worker is ``SIGKILL``-ed and reaped, and any
  other daemonic child gets ``SIGTERM``, :data:`EXIT_GRACE_S` seconds, then ``SIGKILL``.

:func:`watch_worker_deaths` replaces torch's ``SIGCHLD`` handler, which raises a worker's death
in the main thread wherever it stands (in a checkpoint write, in mmengine's config formatting,
which turns it into a ``SyntaxError``), with one that records it, and raises it only where the
main thread waits for a batch (:func:`guard_fetches`): torch's loader then stops with
``DataLoader worker (pid(s) 4242) exited unexpectedly``, and :func:`describe_lost_worker` turns
that error into one line naming the worker (its index in its loader), its pid and, from the
record, the signal.

A worker killed while it writes a batch to the result pipe leaves half a message there; torch's
read of it would wait forever for the rest (the other workers hold the pipe open: no end of
file). So a fetch first checks that the loader's workers live (a dead one: the error, no read),
a ``SIGCHLD`` during a fetch interrupts the read with the error, and a watch thread sends the
main thread a ``SIGCHLD`` when a fetch has waited :data:`FETCH_WATCH_S` seconds with a worker
dead (the kernel may have given the signal to another thread, which does not interrupt it).
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util  # noqa: F401  (its exit function is registered before ours: ours runs first)
import re
import signal
import threading
import time
from functools import partial
from types import TracebackType
from typing import Any, Callable, Iterable, Iterator, Optional

import torch.utils.data  # noqa: F401  (torch's exit flag is registered before ours: ours runs first)
from torch.utils.data._utils import signal_handling
from torch.utils.data._utils.signal_handling import _error_if_any_worker_fails, _remove_worker_pids
from torch.utils.data._utils.worker import _worker_loop
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

from ..utils.parent_death import die_with_parent

#: the private names of torch (2.x) this module uses (``module[:class]`` → names; the iterator's
#: ``_workers`` and ``_worker_pids_set`` and the loader's ``_iterator`` are set per instance); a test
#: checks that they are there
TORCH_PRIVATE_NAMES = {
    'torch.utils.data.dataloader': ('_MultiProcessingDataLoaderIter',),
    'torch.utils.data.dataloader:_MultiProcessingDataLoaderIter': ('_shutdown_workers', '_try_get_data'),
    'torch.utils.data._utils.signal_handling': (
        '_error_if_any_worker_fails',
        '_remove_worker_pids',
        '_SIGCHLD_handler_set',
    ),
    'torch.utils.data._utils.worker': ('_worker_loop',),
}
#: seconds a daemonic child that is not a loader worker has to end on ``SIGTERM`` at exit
EXIT_GRACE_S = 5.0
#: pid -> torch's message for each loader worker that died under this process (:func:`watch_worker_deaths`)
DEATHS: dict[int, str] = {}
#: seconds a fetch waits with a worker dead before the watch thread interrupts it
FETCH_WATCH_S = 5.0


class _Fetch:
    """The loader iterator the main thread is reading a batch from (``None``: none), since when."""

    iterator: Optional[_MultiProcessingDataLoaderIter] = None
    since = 0.0


_KILLED = re.compile(r'DataLoader worker \(pid (\d+)\) is killed by signal: ([^.]+)\.')
_EXITED = re.compile(r'DataLoader worker \(pid (\d+)\) exited unexpectedly with exit code (-?\d+)')
_GONE = re.compile(r'DataLoader worker \(pid\(s\) ([\d, ]+)\) exited unexpectedly')


def _worker_start(
    worker_id: int, *, init_fn: Optional[Callable] = None, ignore: tuple[int, ...] = (), **kwargs: Any
) -> None:
    """A data-loader worker's start: it dies with its parent
    (:func:`~dna_mm.utils.parent_death.die_with_parent`), ignores
    the signals ``ignore``, then runs the loader's own ``init_fn(worker_id, **kwargs)``."""
    die_with_parent()
    for sig in ignore:
        signal.signal(sig, signal.SIG_IGN)
    if init_fn is not None:
        init_fn(worker_id, **kwargs)


def workers_die_with_parent(loader: Any, ignore: Optional[tuple[int, ...]] = None) -> None:
    """Start ``loader``'s workers with :func:`_worker_start` (idempotent), ignoring the signals
    ``ignore`` when given. The loader's own ``worker_init_fn`` runs after; its ``seed`` stays a
    keyword of the new one, where :func:`dna_mm.engine.loops.restore_data_seed` reads and
    replaces it. Workers already started keep what they started with."""
    init_fn = loader.worker_init_fn
    if isinstance(init_fn, partial) and init_fn.func is _worker_start:
        if ignore is not None:
            loader.worker_init_fn = partial(init_fn, ignore=tuple(ignore))
        return
    seed = (
        {'seed': init_fn.keywords['seed']}
        if isinstance(init_fn, partial) and 'seed' in init_fn.keywords
        else {}
    )
    loader.worker_init_fn = partial(_worker_start, init_fn=init_fn, ignore=tuple(ignore or ()), **seed)


def _record_death(signum: int, frame: Any) -> None:
    """``SIGCHLD``: torch's check of the watched workers, its error recorded, not raised; raised
    where the main thread waits for a batch from a loader one of whose workers is dead."""
    try:
        _error_if_any_worker_fails()
    except RuntimeError as err:
        if m := _KILLED.search(str(err)) or _EXITED.search(str(err)):
            DEATHS.setdefault(int(m.group(1)), str(err).strip())
    if _Fetch.iterator is not None and (pid := _dead_worker(_Fetch.iterator)) is not None:
        raise _lost(pid)  # out of the read of a message its writer will never end


def _dead_worker(iterator: _MultiProcessingDataLoaderIter) -> Optional[int]:
    """The pid of a worker of ``iterator`` that torch counts on and that no longer lives."""
    status = getattr(iterator, '_workers_status', ())
    for i, worker in enumerate(getattr(iterator, '_workers', ())):
        if (i >= len(status) or status[i]) and not worker.is_alive():
            return worker.pid
    return None


def _lost(pid: int) -> RuntimeError:
    """torch's own error for a worker gone (:func:`describe_lost_worker` reads it)."""
    return RuntimeError(f'DataLoader worker (pid(s) {pid}) exited unexpectedly')


def _guarded(fetch: Callable[..., Any]) -> Callable[..., Any]:
    """torch's ``_try_get_data``, in the main thread: not begun with a worker dead, and known to
    :func:`_record_death` and the watch thread while it waits."""

    def guarded_fetch(self: _MultiProcessingDataLoaderIter, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return fetch(self, *args, **kwargs)
        pid = _dead_worker(self)
        if pid is not None:
            raise _lost(pid)  # its last message may be cut: a read would wait forever
        _Fetch.iterator, _Fetch.since = self, time.monotonic()
        try:
            return fetch(self, *args, **kwargs)
        finally:
            _Fetch.iterator = None

    guarded_fetch.guarded = fetch  # type: ignore[attr-defined]
    return guarded_fetch


def _watch_fetches() -> None:
    """The watch thread (module docstring): a ``SIGCHLD`` to the main thread while a fetch has
    waited :data:`FETCH_WATCH_S` seconds with a worker dead."""
    main = threading.main_thread()
    while main.is_alive():
        time.sleep(FETCH_WATCH_S / 2)
        iterator, since = _Fetch.iterator, _Fetch.since
        if iterator is not None and time.monotonic() - since > FETCH_WATCH_S and _dead_worker(iterator):
            signal.pthread_kill(main.ident, signal.SIGCHLD)


def guard_fetches() -> None:
    """Guard every multi-process loader's fetch in this process (module docstring), once."""
    if not hasattr(_MultiProcessingDataLoaderIter._try_get_data, 'guarded'):
        _MultiProcessingDataLoaderIter._try_get_data = _guarded(_MultiProcessingDataLoaderIter._try_get_data)
        threading.Thread(target=_watch_fetches, name='dna_mm-fetch-watch', daemon=True).start()


def watch_worker_deaths() -> None:
    """Record loader workers' deaths instead of raising them anywhere, and raise them where the
    main thread waits for a batch (module docstring); from the main thread, once per process
    (torch then sets no handler of its own)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGCHLD) is not _record_death:
        signal.signal(signal.SIGCHLD, _record_death)
    signal_handling._SIGCHLD_handler_set = True  # torch's flag: its handler is not set over ours
    guard_fetches()


def _unwatch(iterator: _MultiProcessingDataLoaderIter) -> None:
    """Take ``iterator``'s workers off torch's ``SIGCHLD`` watch: their end is not a failure now
    (a dead worker torch already reported would be reported again at each later ``SIGCHLD``)."""
    if getattr(iterator, '_worker_pids_set', False):
        _remove_worker_pids(id(iterator))
        iterator._worker_pids_set = False


def end_iterator_workers(iterator: Any) -> None:
    """End the workers of one multi-process loader iterator (module docstring); nothing for
    any other object or an iterator already shut down."""
    if not isinstance(iterator, _MultiProcessingDataLoaderIter):
        return
    _unwatch(iterator)
    workers = list(getattr(iterator, '_workers', ()))
    try:
        iterator._shutdown_workers()
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
                worker.join(timeout=EXIT_GRACE_S)


def drop_persistent_workers(loader: Any) -> None:
    """End the workers ``loader`` keeps for ``persistent_workers`` and forget their iterator
    (module docstring): the next ``iter(loader)`` starts new ones with its ``worker_init_fn`` as
    it is now. Nothing for a loader without kept workers."""
    held = getattr(loader, '_iterator', None)
    if getattr(loader, 'persistent_workers', False) and held is not None:
        end_iterator_workers(held)
        loader._iterator = None


def _held_iterators(roots: list[Any]) -> Iterator[Any]:
    """The loader iterators ``roots`` (loops, loaders, mmengine's endless iterator, dna_mm's
    resumed one) hold."""
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        item = todo.pop()
        if item is None or isinstance(item, dict) or id(item) in seen:  # dict: a loop not built
            continue
        seen.add(id(item))
        if isinstance(item, _MultiProcessingDataLoaderIter):
            yield item
            continue
        # an IterBasedTrainLoop's iterator, dna_mm's resumed iterator (.iterator), mmengine's
        # endless iterator (._iterator, ._dataloader), a loader with persistent workers (._iterator)
        for name in ('dataloader_iterator', 'iterator', '_iterator', 'dataloader', '_dataloader'):
            todo.append(getattr(item, name, None))


def _traceback_iterators(tb: Optional[TracebackType]) -> Iterator[Any]:
    """The loader iterators in the frames of a traceback (an epoch's ``for`` loop holds its own)."""
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, _MultiProcessingDataLoaderIter):
                yield value
        tb = tb.tb_next


def runner_iterators(runner: Any, tb: Optional[TracebackType] = None) -> list[Any]:
    """The loader iterators ``runner``'s built loops hold, and those in the frames of ``tb`` (the
    traceback of the exception that ended the run, if any)."""
    held = [getattr(runner, name, None) for name in ('_train_loop', '_val_loop', '_test_loop')]
    return list({id(i): i for i in [*_traceback_iterators(tb), *_held_iterators(held)]}.values())


def end_runner_workers(runner: Any, tb: Optional[TracebackType] = None) -> None:
    """End the workers of every iterator of :func:`runner_iterators` (all off torch's watch
    first: one iterator's workers ending must not raise while another's are ended)."""
    iterators = runner_iterators(runner, tb)
    for iterator in iterators:
        _unwatch(iterator)
    for iterator in iterators:
        end_iterator_workers(iterator)


def _is_loader_worker(process: multiprocessing.process.BaseProcess) -> bool:
    return getattr(process, '_target', None) is _worker_loop


def _end_children_at_exit() -> None:
    """Before multiprocessing's exit function (module docstring): no daemonic child of this
    process survives it, and none is waited for without a limit."""
    children = [p for p in multiprocessing.active_children() if p.daemon]
    if not children:
        return
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # torch's handler would raise for our kills
    workers = [p for p in children if _is_loader_worker(p)]
    others = [p for p in children if not _is_loader_worker(p)]
    for p in workers:
        p.kill()
    for p in others:
        p.terminate()
    deadline = time.monotonic() + EXIT_GRACE_S
    for p in others:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
    for p in [*workers, *others]:
        p.join(timeout=EXIT_GRACE_S)


atexit.register(_end_children_at_exit)


def _signal_name(text: str) -> str:
    """``'Killed'`` (strsignal) → ``'SIGKILL'``; a name it cannot match as it is."""
    for sig in signal.Signals:
        if signal.strsignal(sig) == text.strip():
            return sig.name
    return text.strip()


def _worker_index(pid: int, iterators: Iterable[Any]) -> Optional[tuple[int, int]]:
    """``(index, count)`` of the worker ``pid`` among the workers of one of ``iterators``."""
    for iterator in iterators:
        pids = [w.pid for w in iterator._workers]
        if pid in pids:
            return pids.index(pid), len(pids)
    return None


def describe_lost_worker(err: BaseException, iterators: Iterable[Any] = ()) -> Optional[str]:
    """One line for torch's error about a loader worker that died under the main process
    (killed by a signal, or ended with an exit code: not an exception it raised, which torch
    re-raises as that exception), ``None`` for any other error. The worker's index is looked
    up in the iterators on the error's traceback and in ``iterators``."""
    text = str(err)
    if not isinstance(err, RuntimeError) or 'DataLoader worker' not in text:
        return None
    if m := _KILLED.search(text):
        pid, how = int(m.group(1)), f'was killed by {_signal_name(m.group(2))}'
    elif m := _EXITED.search(text):
        pid, how = int(m.group(1)), f'ended with exit code {m.group(2)}'
    elif m := _GONE.search(text):
        pid = int(m.group(1).split(',')[0])
        recorded = DEATHS.get(pid, '')
        if r := _KILLED.search(recorded):
            how = f'was killed by {_signal_name(r.group(2))}'
        elif r := _EXITED.search(recorded):
            how = f'ended with exit code {r.group(2)}'
        else:
            how = 'ended unexpectedly'
    else:
        return None
    if how == 'was killed by SIGKILL':
        how += " (kill -9, or the kernel's out-of-memory killer: `dmesg` says which)"
    where = _worker_index(pid, [*_traceback_iterators(err.__traceback__), *iterators])
    name = f'worker {where[0]} of {where[1]}' if where else 'worker'
    return f'a data-loader {name} (pid {pid}) {how}'
