"""A denoising study's runs on disk (``DIR/runs/<method>_seed<s>/``): what each was made with,
and which a study started again may keep (``tools/analysis/study.py`` asks before any work).

* what a run was trained with: :func:`training_settings` (the study's), :func:`trained_with`
  (a run's, from ``result.json`` or its :data:`RUN_RECORD`), :func:`training_mismatch` (the
  first setting they differ in), :func:`training_refusal` (the line refusing the run);
* what it was evaluated on: :func:`set_signature` / :func:`clip_signature` (the held-out sets),
  :func:`kept_checkpoint` (the checkpoint to evaluate again on this study's sets);
* how long it took: :func:`begin_attempt` / :func:`end_attempt`, :func:`attempts_seconds` (every
  attempt of a run stopped and resumed, added).

Nothing here writes: the tool writes the records these functions return. ``config`` is the
config the runs are made from (its ``train_cfg.max_epochs``: a run's without ``--epochs``).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..config.build import read_config
from ..errors import ConfigError

if TYPE_CHECKING:
    from .study import ClipSet

#: a run's record in its folder, written when its training starts:
#: ``{settings: training_settings, attempts: [[start, end], ...]}`` (``end`` ``None`` while one runs)
RUN_RECORD = 'study_run.json'
#: the settings of a run's training (:func:`training_settings`) → the option that sets each
TRAINING_OPTIONS = {'epochs': '--epochs', 'cfg_options': '--cfg-options'}
#: a setting a run's record does not hold (an earlier study.py's)
UNRECORDED = object()
#: the line's end that says what to do with runs made otherwise (the study's ``runs/`` folder)
_TODO = 'use another --out, or remove the runs made otherwise from {runs}'

#: a training setting two runs differ in: ``(key, recorded value shown, wanted value shown)``
Mismatch = tuple[str, Optional[str], str]


# -- what a run was trained with ------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def config_epochs(config: str) -> int:
    """The epochs of ``config`` (``train_cfg.max_epochs``): a run's without ``--epochs``."""
    return int(read_config(config).train_cfg.max_epochs)


def training_settings(epochs: Optional[int], cfg_options: Sequence[str], config: str) -> dict:
    """What a study trains its runs with besides the method and seed: ``{epochs, cfg_options}``,
    the epochs as a number (``epochs``, else ``config``'s)."""
    return dict(epochs=epochs if epochs is not None else config_epochs(config), cfg_options=list(cfg_options))


def trained_with(record: dict) -> dict:
    """The training settings a run's ``record`` (``result.json``, ``test.json``) holds: those of
    :data:`TRAINING_OPTIONS` it has (none for a run of an earlier study.py)."""
    return {key: record[key] for key in TRAINING_OPTIONS if key in record}


def show_setting(key: str, value: Any, config: str) -> str:
    """A training setting as the option would say it (``epochs`` ``None``: ``config``'s, as
    earlier study.py recorded it)."""
    if key == 'cfg_options':
        return ' '.join(value) if value else '(none)'
    if key == 'epochs' and value is None:
        return f"{config_epochs(config)} (the config's)"
    return str(value)


def recorded_setting(recorded: dict, key: str, config: str) -> Any:
    """A training setting of a run's record: :data:`UNRECORDED`, or its value (``epochs``
    ``None``: ``config``'s, a number)."""
    if key not in recorded:
        return UNRECORDED
    return config_epochs(config) if key == 'epochs' and recorded[key] is None else recorded[key]


def training_mismatch(recorded: dict, wanted: dict, config: str) -> Optional[Mismatch]:
    """The first training setting in which a kept run's ``recorded`` settings (``result.json``,
    :data:`RUN_RECORD`) differ from ``wanted`` (:func:`training_settings`): ``(key, recorded
    value shown, wanted value shown)``, the recorded ``None`` for a setting it does not record
    (a run of an earlier study.py); ``None`` when they agree. A recorded ``epochs`` of ``None``
    is ``config``'s (as earlier study.py wrote it)."""
    for key in TRAINING_OPTIONS:
        value = recorded_setting(recorded, key, config)
        if value is UNRECORDED:
            return key, None, show_setting(key, wanted[key], config)
        if value != wanted[key]:
            if key == 'cfg_options' and set(value) != set(wanted[key]):
                return _options_mismatch(value, wanted[key], config)
            return key, show_setting(key, recorded[key], config), show_setting(key, wanted[key], config)
    return None


def _options_mismatch(ran: list[str], asked: list[str], config: str) -> Mismatch:
    """The ``cfg_options`` mismatch of a run made with ``ran``, a study asking for ``asked``: the
    options they differ in, and how many both have."""
    shared = [o for o in ran if o in asked]
    note = f' (besides the {len(shared)} both have)' if shared else ''
    only_ran, only_asked = ([o for o in a if o not in b] for a, b in ((ran, asked), (asked, ran)))
    return (
        'cfg_options',
        show_setting('cfg_options', only_ran, config) + note,
        show_setting('cfg_options', only_asked, config),
    )


def training_refusal(where: Path, mismatch: Mismatch, runs: Path, config: str, epochs_given: bool) -> str:
    """The line refusing the kept run at ``where`` (its ``result.json`` or record) whose training
    settings differ from the study's (:func:`training_mismatch`); ``runs``: the study's runs
    folder; ``epochs_given``: the study's ``--epochs`` was given (else it asks for the config's)."""
    key, recorded, wanted = mismatch
    option = TRAINING_OPTIONS[key]
    todo = _TODO.format(runs=runs)
    if recorded is None:
        return (
            f'{where}: made by an earlier study.py, which did not record its {option}: whether it '
            f"matches this study's ({wanted}) is unknown; {todo}"
        )
    if key == 'epochs' and not epochs_given:
        wanted = f"{config_epochs(config)} (the config's)"
    return f'{where}: made with {option} {recorded}, this study asks for {wanted}; {todo}'


def unrecorded_refusal(run_dir: Path) -> str:
    """The line refusing to continue a run begun by an earlier study.py (trained, or stopped
    half-way, without a :data:`RUN_RECORD`)."""
    return (
        f'{run_dir}: a run begun by an earlier study.py, which did not record its settings '
        f'(--epochs, --cfg-options); remove it to train it anew, or use another --out'
    )


def made_with(run_dir: Path, finished_only: bool) -> Optional[tuple[Path, dict]]:
    """``(where, settings)`` of a run a study would keep (its ``result.json``: every setting
    recorded) or continue (its :data:`RUN_RECORD`'s ``settings``; not when ``finished_only``);
    ``None`` for a run with neither."""
    done, record = run_dir / 'result.json', run_dir / RUN_RECORD
    if done.is_file():
        return done, json.loads(done.read_text())
    if not finished_only and record.is_file():
        return record, json.loads(record.read_text())['settings']
    return None


def check_together(first: tuple[Path, dict], run: tuple[Path, dict], runs: Path, config: str) -> None:
    """Two finished runs (``(where, result)`` of :func:`made_with`) summarised together were
    trained alike and evaluated on the same held-out sets; else a
    :class:`~dna_mm.errors.ConfigError` naming both and the setting (``runs``: the study's runs
    folder)."""
    (there, theirs), (where, ours) = first, run
    for key, option in TRAINING_OPTIONS.items():
        if theirs.get(key, UNRECORDED) != ours.get(key, UNRECORDED) and recorded_setting(
            theirs, key, config
        ) != recorded_setting(ours, key, config):
            said = [
                f'{option} unrecorded' if key not in r else f'{option} {show_setting(key, r[key], config)}'
                for r in (ours, theirs)
            ]
            raise ConfigError(
                f'{where}: made with {said[0]}, {there} with {said[1]}: runs trained otherwise '
                f'cannot be summarised together; remove the runs made otherwise from {runs}'
            )
    their_sets, our_sets = set_signature(theirs['sets']), set_signature(ours['sets'])
    if their_sets != our_sets:
        raise ConfigError(
            f'{where}: evaluated on the held-out sets {show_sets(our_sets)}, {there} on '
            f'{show_sets(their_sets)}; run the study without --report-only to evaluate every run on '
            f'its sets'
        )


# -- what a run was evaluated on --------------------------------------------------------------------
def set_signature(entries: list[dict]) -> set:
    """The clip sets a run was evaluated on (``result.json``'s ``sets``, or :func:`clip_signature`):
    ``{(name, num_distractors, likeness, heldout, num_clips)}``."""
    return {
        (
            e['name'],
            e['num_distractors'],
            e.get('likeness', 'demo'),
            e.get('heldout', True),
            e.get('num_clips'),
        )
        for e in entries
    }


def clip_signature(sets: Sequence[ClipSet]) -> set:
    """:func:`set_signature` of a study's clip sets (their clips counted in their lists)."""
    return set_signature(
        [
            dict(
                name=c.name,
                num_distractors=c.num_distractors,
                likeness=c.likeness,
                heldout=c.heldout,
                num_clips=sum(1 for ln in (c.root / c.ann).read_text().splitlines() if ln.strip()),
            )
            for c in sets
        ]
    )


def show_sets(signature: set) -> str:
    """The clip sets of a :func:`set_signature` as a line names them: ``demo_2 (4 clips), ...``."""
    return ', '.join(f'{name} ({"?" if n is None else n} clips)' for name, _, _, _, n in sorted(signature))


def kept_checkpoint(done: Path, signature: set, config_name: str) -> Optional[Path]:
    """The checkpoint of a finished run (``result.json``) evaluated on other held-out sets than
    ``signature`` (:func:`clip_signature`), to evaluate it again; ``None`` for a run evaluated on
    them. A :class:`~dna_mm.errors.ConfigError` where its checkpoint (or its config, the file
    ``config_name`` in its folder) is gone."""
    result = json.loads(done.read_text())
    if set_signature(result['sets']) == signature:
        return None
    run_dir = done.parent
    ckpt = Path(result['checkpoint'])
    if not ckpt.is_file() and (run_dir / ckpt.name).is_file():  # a study folder moved since
        ckpt = run_dir / ckpt.name
    if not ckpt.is_file() or not (run_dir / config_name).is_file():
        raise ConfigError(
            f'{done}: evaluated on the held-out sets {show_sets(set_signature(result["sets"]))}, this '
            f'study asks for {show_sets(signature)}, and its checkpoint {ckpt} is gone to evaluate '
            f'it again; give the --distractors, --likeness and --heldout-per-class it was made with, '
            f'use another --out, or remove the run'
        )
    return ckpt


# -- how long it took --------------------------------------------------------------------------------
def _latest_write(run_dir: Path) -> Optional[float]:
    """The time of the newest file in ``run_dir`` (``None``: no file)."""
    times = [f.stat().st_mtime for f in run_dir.rglob('*') if f.is_file()]
    return max(times) if times else None


def begin_attempt(run_dir: Path, settings: dict) -> dict:
    """The run's :data:`RUN_RECORD` with a new attempt begun (for the tool to write). An attempt
    that ended without a word (``SIGTERM``, ``SIGKILL``: the study killed with it) ends at the
    run's last write (its checkpoint, its log); a run begun without a record (an earlier
    study.py's) counts the time from its first file to its last as one attempt."""
    path = run_dir / RUN_RECORD
    if path.is_file():
        record = json.loads(path.read_text())
    else:
        record = dict(settings=settings, attempts=[])
        times = [f.stat().st_mtime for f in run_dir.rglob('*') if f.is_file()]
        if times:
            record['attempts'].append([min(times), max(times)])
    attempts = record['attempts']
    if attempts and attempts[-1][1] is None:
        attempts[-1][1] = max(attempts[-1][0], _latest_write(run_dir) or attempts[-1][0])
    attempts.append([time.time(), None])
    return record


def end_attempt(record: dict) -> dict:
    """``record`` (:func:`begin_attempt`) with its last attempt ended now."""
    record['attempts'][-1][1] = time.time()
    return record


def attempts_seconds(record: dict) -> float:
    """The seconds of every attempt of ``record`` (a run stopped and resumed: each added)."""
    return sum(end - start for start, end in record['attempts'])
