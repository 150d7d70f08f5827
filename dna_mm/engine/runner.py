"""``DnARunner``: mmengine's ``Runner`` with strict whole-model loads, plain resume messages,
exact resume and a terminal that starts with the run, not with the setup dump.

* **Strict loads.** ``load_from``, ``--resume`` and ``tools/test.py CHECKPOINT`` load the whole
  model with :func:`dna_mm.checkpoint.load_whole_model`; missing, unexpected or resized keys
  are a :class:`~dna_mm.errors.CheckpointMismatchError` naming the file and the keys (mmengine
  would load what matches and test random weights). ``load_partial = True`` (tools:
  ``--partial-load``) accepts a partial load and prints what was not loaded (a file of which
  nothing fits is refused either way). Backbone
  initialisation (``pretrained``, ``init_cfg``) keeps its own non-strict load report.
* **Resume.** ``resume=True`` with no checkpoint in the work dir warns and trains from scratch;
  a file that is not a training checkpoint is an error naming it. The resumed run keeps its
  config's optimizer options and schedule, not the checkpoint's, and one line names what the
  config changes (:mod:`dna_mm.engine.resume_settings`).
* **Exact resume, where the config asks for it.** A config that names
  :mod:`dna_mm.engine.loops`' train loops and :class:`~dna_mm.engine.rng_state.RNGStateHook`
  (``configs/_base_/``' schedules and runtimes do) resumes to the same losses as a run that was
  never stopped. The runner builds the loops and hooks the config names, nothing else; with
  others (a stock config: mmengine's loops) one log line says that exact resume is not
  guaranteed.
* **One optimizer call per set of options.** The optimizers built for training step once per
  set of equal param-group options, not once per group (of which ``paramwise_cfg`` makes one a
  parameter): :mod:`dna_mm.engine.step_by_options`; the groups, the checkpoints and the
  schedulers are as mmengine builds them.
* **Accumulated steps on the schedule of the global batch.** With gradient accumulation each
  optimizer step takes the schedule's values (lr, momentum, ...) at the first data iteration of
  its window, as the run on the global batch does (:mod:`dna_mm.engine.accumulated_schedule`,
  whose hook every training run gets).
* **Missing data.** A file a dataset does not find while its loader is built (an ImageNet or
  COCO folder or annotation file not prepared) is a :class:`~dna_mm.errors.MissingFileError`
  naming the dataset's type and ``data_root`` beside the file, and an image folder without the
  class folders or images it should hold (ImageNet extracted in part) a
  :class:`~dna_mm.errors.DataError` (:func:`missing_data`). A list with a label beyond the
  model's classifying head is a :class:`~dna_mm.errors.ConfigError` naming its line and the head,
  as its loop is built (:mod:`dna_mm.engine.label_bounds`).
* **Quiet setup.** mmengine's environment, config, hook-order and parameter-option dumps, and
  its deprecation notices about MMAction2's own file reading, go to the log file only, unless
  ``log_setup_to_console = True`` (tools: ``--verbose``).
* **Every run ends** (``docs/training.md``, "When the machine misbehaves"). When ``train``,
  ``val`` or ``test`` ends, however it ends, the preemption handlers go back and the data-loader
  workers the loops still hold are ended (:mod:`dna_mm.engine.loader_workers`). Every loader's
  workers die with their process, so a rank killed outright leaves no worker that keeps its
  connections open to the other ranks. A worker or a rank that died under the run is a
  :class:`~dna_mm.errors.RunStopped` whose one line names it and says where to go on from.
* **Faults**. Checkpoints are written whole
  or not at all (:mod:`dna_mm.engine.atomic_files`; a failed write is a
  :class:`~dna_mm.engine.atomic_files.CheckpointWriteError` naming the file and the cause);
  ``resume=True`` skips a checkpoint that does not load and takes the one before
  (:func:`~dna_mm.engine.checkpoint_hook.resume_candidates`); ``train()`` holds the work dir
  (:mod:`dna_mm.engine.work_dir_lock`) and refuses one that a live run holds. mmengine's
  ``CheckpointHook`` is built as :class:`~dna_mm.engine.checkpoint_hook.AtomicCheckpointHook`
  (the same arguments and files; the old checkpoint goes only once the new one is written).
* **One run's checkpoints per work dir.** A new training run (no ``resume``) into a work dir
  that holds an earlier run's checkpoints moves them, its ``last_checkpoint`` and config copy
  into ``earlier_run_<time>/`` first (:mod:`dna_mm.engine.earlier_run`); the config copy is
  written once the run's parts are built and its weights loaded (:meth:`DnARunner.dump_config`).
* **Nothing in the current folder.** On several ranks, a metric that collects the ranks' results
  through files (mmengine's ``collect_device='cpu'``, the default) does so in the run's log
  folder, ``<work_dir>/<timestamp>/dist_collect/``, removed after each collection
  (:meth:`DnARunner.build_evaluator`): mmengine's ``collect_results`` would leave an empty
  ``.dist_test/`` in the folder the run was started from.

Selected with ``runner_type = 'DnARunner'`` (``configs/_base_/default_runtime*.py``);
:func:`build_runner`, which dna_mm's tools call, uses it for configs without ``runner_type``
too. MMDetection's stock tools honour ``runner_type``; MMAction2 1.1.0's stock
``tools/train.py`` always builds mmengine's plain ``Runner``.
"""

from __future__ import annotations

import logging
import os.path as osp
import re
from typing import Any, Callable, Optional, Union

from mmengine.config import Config
from mmengine.dist import broadcast_object_list, get_world_size, is_main_process
from mmengine.evaluator import Evaluator
from mmengine.fileio import LocalBackend, get_file_backend
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import MMLogger
from mmengine.model import BaseTTAModel, is_model_wrapper
from mmengine.optim import OptimWrapper
from mmengine.registry import RUNNERS, DefaultScope
from mmengine.runner import BaseLoop, Runner
from torch.optim import Optimizer
from torch.utils.data import DataLoader

from ..checkpoint import load_whole_model
from ..converters.whole_model import LAYOUT_NAMES
from ..errors import (
    CheckpointMismatchError,
    ConfigError,
    CorruptCheckpointError,
    DataError,
    MissingFileError,
    RunStopped,
    UnreadableCheckpointError,
    UserError,
    error_line,
)
from ..models.fitting import abbreviate
from ..utils.default_hooks import MMENGINE_DEFAULT_HOOKS
from ..utils.files import atomic_path
from ..utils.notices import is_library_notice
from .accumulated_schedule import AccumulatedScheduleHook, fit_to_accumulation
from .atomic_files import CheckpointWriteError, describe_os_error, remove_partial_files
from .checkpoint_hook import (
    LAST_CHECKPOINT,
    AtomicCheckpointHook,
    checkpoint_folder,
    named_checkpoint,
    resume_candidates,
)
from .distributed import answer_peers, describe_lost_rank, note_rank_end
from .earlier_run import set_aside_earlier_run
from .global_batch import (
    LAYOUT_KEY,
    BatchLayout,
    LayoutConversion,
    changed_layout,
    ema_accumulation_note,
    wrapper_accumulation,
)
from .label_bounds import refuse_labels_beyond_head
from .loader_workers import (
    describe_lost_worker,
    drop_persistent_workers,
    end_iterator_workers,
    end_runner_workers,
    runner_iterators,
    watch_worker_deaths,
    workers_die_with_parent,
)
from .loops import RESUMABLE_TWINS, ResumableLoopMixin, refuse_uneven_epochs
from .non_finite import non_finite_optimizer_state
from .optim_wrappers import optim_wrappers
from .param_groups import paramwise_notes
from .pending_grads import PENDING_KEY, PendingGradsHook
from .preemption import PreemptionHook
from .resume_settings import (
    apply_config_settings,
    config_settings,
    drop_scheduler_functions,
    missing_state,
    scheduled_values,
    trained_weights_back,
)
from .rng_state import RNGStateHook
from .step_by_options import wrapper_steps_by_options
from .work_dir_lock import WorkDirBusyError, WorkDirLock, holder_text, in_use, refuse_if_in_use

#: how a config names mmengine's ``CheckpointHook`` (built as ``AtomicCheckpointHook``)
STOCK_CHECKPOINT_HOOK = ('CheckpointHook', 'mmengine.CheckpointHook', CheckpointHook)
#: the folder of the run's log folder where the ranks' results are collected (mmengine: ./.dist_test)
COLLECT_DIR = 'dist_collect'

# Start of each setup message that stays off the terminal (mmengine 0.10.7's wording).
SETUP_DUMP_MARKERS = (
    'System environment:',
    'Config:\n',
    'Hooks will be executed in the following',
    'paramwise_options -- ',
)


class SetupDumpFilter(logging.Filter):
    """A console-handler filter that drops mmengine's INFO setup dumps until the first loop
    starts (:attr:`active` is then cleared) and mmengine's notices about code a config's user does
    not write throughout (:mod:`dna_mm.utils.notices`; in the log file as ever; both shown with
    ``log_setup_to_console``); other warnings, errors and everything else pass."""

    def __init__(self, active: bool = True) -> None:
        super().__init__()
        self.active = active
        self.quiet_notices = active

    def filter(self, record: logging.LogRecord) -> bool:
        if self.quiet_notices and is_library_notice(record):
            return False
        head = record.getMessage().lstrip('\n-')[:80]
        if not self.active or record.levelno > logging.INFO:
            return True
        return not head.startswith(SETUP_DUMP_MARKERS)


#: MMPretrain's ``CustomDataset`` (ImageNet's too) on a folder not laid out as it expects: an
#: assertion and a ``RuntimeError`` of its own, not a user's error type
_FOLDER_NOT_PREPARED = re.compile(
    r"The number of subfolders \(\d+\) doesn't match|Found 0 files in subfolders"
)


def missing_data(dataloader: Any, err: Exception) -> Optional[UserError]:
    """The dataset whose loader ``dataloader`` (a config dict) was being built, its type and
    ``data_root``, with ``err`` and what to do, for data not prepared: a file ``err`` names
    (a :class:`~dna_mm.errors.MissingFileError`), or an image folder without the class
    folders or images MMPretrain's dataset expects (a :class:`~dna_mm.errors.DataError`:
    ImageNet extracted in part). ``None`` for another error, or a ``FileNotFoundError`` that
    names no file (dna_mm's video datasets say which list is missing themselves)."""
    dataset = dataloader.get('dataset') if isinstance(dataloader, dict) else None
    if not isinstance(dataset, dict):
        return None
    root = dataset.get('data_root')
    where = f'{dataset.get("type", "the dataset")}{f" (data_root {root!r})" if root else ""}'
    if isinstance(err, FileNotFoundError) and err.filename is not None:
        return MissingFileError(
            f'{where}: {err.filename} does not exist; prepare the '
            "data (docs/datasets/) or set the dataset's data_root / ann_file"
        )
    if isinstance(err, (AssertionError, RuntimeError)) and _FOLDER_NOT_PREPARED.search(str(err)):
        classes = ' or give its classes (metainfo) for a subset of them' if 'subfolders (' in str(err) else ''
        said = error_line(err).replace(' Please check the data folder.', '').rstrip('.')
        return DataError(f'{where}: {said}; prepare the data (docs/datasets/){classes}')
    return None


@RUNNERS.register_module()
class DnARunner(Runner):
    """mmengine ``Runner`` with strict whole-model loads, plain resume messages and a quiet
    setup log (see the module docstring).

    Config keys read besides mmengine's (both default ``False``):
        load_partial: accept a checkpoint that does not match the model; the keys not loaded
            are printed.
        log_setup_to_console: print the environment / config / hook dumps on the terminal too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cfg = kwargs.get('cfg') or {}
        self.load_partial = bool(cfg.get('load_partial', False))
        self._setup_filter = SetupDumpFilter(active=not cfg.get('log_setup_to_console', False))
        self._scope_name = kwargs.get('default_scope', cfg.get('default_scope', 'mmengine'))
        self._config_pending, self._training = False, False
        self._resume_extras: Optional[dict] = None  # a loaded checkpoint's meta, rng_state, pending grads
        self._train_loop_cfg: dict = {}  # train_cfg, as the loop was built from it
        #: the resume's conversion from the checkpoint's layout (None: none; the checkpoint hook reads it)
        self.resumed_layout: Optional[LayoutConversion] = None
        super().__init__(*args, **kwargs)

    @staticmethod
    def build_dataloader(dataloader: Union[DataLoader, dict], *args: Any, **kwargs: Any) -> DataLoader:
        """mmengine's, for every loop; its workers die with the process that starts them
        (:func:`~dna_mm.engine.loader_workers.workers_die_with_parent`); a file its dataset does
        not find, or an image folder not laid out as it expects, is named with the dataset
        (:func:`missing_data`)."""
        try:
            loader = Runner.build_dataloader(dataloader, *args, **kwargs)
        except (FileNotFoundError, AssertionError, RuntimeError) as err:
            named = missing_data(dataloader, err)
            if named is None:
                raise
            raise named from err
        if getattr(loader, 'num_workers', 0):
            workers_die_with_parent(loader)
        return loader

    def build_evaluator(self, evaluator: Union[dict, list, Evaluator]) -> Evaluator:
        """mmengine's (for validation and testing); each metric that collects the ranks' results
        through files (``collect_device='cpu'``) without a ``collect_dir`` of its own collects them
        in :data:`COLLECT_DIR` of this run's log folder, the same on every rank (mmengine broadcasts
        the timestamp), which mmengine's ``collect_results`` removes after each collection. Left
        to itself it makes ``.dist_test/`` in the current folder, a folder of its own inside for
        each collection, and removes only the latter: every test or validation on several ranks
        left an empty ``.dist_test/`` where the user ran it. On several machines the work dir is
        then the folder the ranks share (as ``--resume`` needs it), not the current one."""
        built = super().build_evaluator(evaluator)
        for metric in built.metrics:
            by_files = getattr(metric, 'collect_device', None) == 'cpu'
            if by_files and getattr(metric, 'collect_dir', '') is None:  # ('': a metric without the option)
                metric.collect_dir = osp.join(self.log_dir, COLLECT_DIR)
        return built

    def build_optim_wrapper(self, optim_wrapper: Union[Optimizer, OptimWrapper, dict]) -> OptimWrapper:
        """mmengine's; its optimizers step once per set of options
        (:func:`~dna_mm.engine.step_by_options.wrapper_steps_by_options`); one warning for each
        ``paramwise_cfg.custom_keys`` key that gives no parameter its settings
        (:func:`~dna_mm.engine.param_groups.paramwise_notes`: a typo, or a key a longer one
        takes the place of)."""
        built = wrapper_steps_by_options(super().build_optim_wrapper(optim_wrapper))
        if isinstance(optim_wrapper, dict) and is_main_process():
            for note in paramwise_notes(self.model, optim_wrapper):
                self.logger.warning(note)
        return built

    def build_train_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """mmengine's; one log line when the loop or the hooks the config names cannot resume
        exactly (not :mod:`dna_mm.engine.loops`' loops with an ``RNGStateHook`` and a
        ``PendingGradsHook``). An epoch-based loop whose ranks' epochs differ in length, which
        would hang, is a :class:`~dna_mm.errors.ConfigError`
        (:func:`~dna_mm.engine.loops.refuse_uneven_epochs`), as is data with a label beyond the
        model's head (:func:`~dna_mm.engine.label_bounds.refuse_labels_beyond_head`)."""
        if isinstance(loop, dict):
            self._train_loop_cfg = dict(loop)  # (a resume may build its resumable twin)
        built = super().build_train_loop(loop)
        refuse_uneven_epochs(built, self.world_size)
        self._held_to_head(built, 'train_dataloader', train=True)
        missing = [
            kind.__name__
            for kind in (RNGStateHook, PendingGradsHook)
            if not any(isinstance(h, kind) for h in self.hooks)
        ]
        lacks = []
        if not isinstance(built, ResumableLoopMixin):
            lacks.append(
                f'train_cfg.type is {type(built).__name__}, not ResumableEpochBasedTrainLoop / '
                'ResumableIterBasedTrainLoop'
            )
        filename = self.cfg.filename  # a new-style config (with read_base()) names classes it imports
        new_style = filename is not None and osp.isfile(filename) and Config._is_lazy_import(filename)
        if missing and new_style:
            lacks.append(
                f'custom_hooks has no {" and no ".join(missing)} (a new-style config: from dna_mm.engine '
                f'import {", ".join(missing)}, and list {", ".join(f"dict(type={m})" for m in missing)} in '
                'custom_hooks)'
            )
        elif missing:
            lacks.append(
                f'custom_hooks has no {" and no ".join(missing)} (a list of its own replaces the '
                "runtime's: custom_hooks = [*_base_.custom_hooks, ...] keeps them)"
            )
        if lacks:
            self.logger.info(
                f'exact resume not guaranteed: {"; ".join(lacks)}; a resumed run repeats the interrupted '
                "one with dna_mm's resumable loop, RNGStateHook and PendingGradsHook "
                '(configs/_base_/ name them)'
            )
        return built

    def build_val_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """mmengine's, its data's labels held against the model's head (:meth:`_held_to_head`)."""
        return self._held_to_head(super().build_val_loop(loop), 'val_dataloader')

    def build_test_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """mmengine's, its data's labels held against the model's head (:meth:`_held_to_head`)."""
        return self._held_to_head(super().build_test_loop(loop), 'test_dataloader')

    def _held_to_head(self, built: BaseLoop, key: str, train: bool = False) -> BaseLoop:
        """``built``, once its data (the config's ``key``) is known to hold no label beyond the
        model's head (else a :class:`~dna_mm.errors.ConfigError`:
        :func:`~dna_mm.engine.label_bounds.refuse_labels_beyond_head`)."""
        refuse_labels_beyond_head(self.model, getattr(built, 'dataloader', None), key, train)
        return built

    def build_logger(
        self, log_level: Union[int, str] = 'INFO', log_file: Optional[str] = None, **kwargs: Any
    ):
        """mmengine's logger, with :class:`SetupDumpFilter` on its terminal handler. A second run
        started in the same process within the same second (a notebook, a test, the study's
        seeds) would get the first run's logger by name, and its log file: it takes the next free
        name (``<config>_<timestamp>_1``), which its default scope, message hub and visualizer
        then use too (the scope mmengine made under the shared name is the first run's: an
        MMDetection run after an MMAction2 one would build from MMAction2's registries)."""
        base, n = self._experiment_name, 0
        while MMLogger.check_instance_created(self._experiment_name):
            n += 1
            self._experiment_name = f'{base}_{n}'
        if n and self.default_scope is not None:
            self.default_scope = DefaultScope.get_instance(self._experiment_name, scope_name=self._scope_name)
        logger = super().build_logger(log_level=log_level, log_file=log_file, **kwargs)
        files = [h.baseFilename for h in logger.handlers if isinstance(h, logging.FileHandler)]
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                # a logger reused by name (same experiment name) has the last run's filter
                handler.filters = [f for f in handler.filters if not isinstance(f, SetupDumpFilter)]
                handler.addFilter(self._setup_filter)
        if self._setup_filter.active and files:
            logger.info(
                f'environment, config and hook order: see {files[0]} '
                f'(--verbose / log_setup_to_console=True prints them here)'
            )
        return logger

    def call_hook(self, fn_name: str, **kwargs: Any) -> None:
        """mmengine's, and the terminal shows everything from the first loop on; a checkpoint
        leaves out its schedulers' functions
        (:func:`~dna_mm.engine.resume_settings.drop_scheduler_functions`)."""
        if fn_name in ('before_train', 'before_val', 'before_test'):
            self._setup_filter.active = False
        if fn_name == 'before_save_checkpoint':  # a file that a weights-only load reads
            drop_scheduler_functions(kwargs['checkpoint'])
        super().call_hook(fn_name, **kwargs)
        if fn_name == 'before_train':
            note = ema_accumulation_note(self.hooks, self.optim_wrapper)
            if note is not None:
                self.logger.warning(note)

    def scale_lr(self, optim_wrapper: Any, auto_scale_lr: Optional[dict] = None) -> None:
        """mmengine's (``auto_scale_lr``: the lr times the batch over ``base_batch_size``), by
        the batch of an optimizer step: with gradient accumulation (``accumulative_counts = K``)
        a step sees ``W · b · K`` samples, not mmengine's ``W · b`` (which scaled the lr ``K`` times
        too little); mmengine scales against ``base_batch_size / K`` then, and one line says so.
        The ``base_lr`` of a wrapper with several parameter groups (what the log shows beside
        ``lr``, and what the schedulers move with them) is scaled with its groups: mmengine left it
        at the config's."""
        wrappers = optim_wrappers(optim_wrapper).values()
        before = [w.optimizer.param_groups[0]['lr'] for w in wrappers]
        k = wrapper_accumulation(optim_wrapper)
        if k == 1 or not (auto_scale_lr or {}).get('enable', False) or 'base_batch_size' not in auto_scale_lr:
            super().scale_lr(optim_wrapper, auto_scale_lr)
        else:
            base = auto_scale_lr['base_batch_size']
            super().scale_lr(optim_wrapper, dict(auto_scale_lr, base_batch_size=base / k))
            self.logger.info(
                f'auto_scale_lr: an optimizer step sees {k} accumulation steps of that batch, so the lr '
                f'made for base_batch_size={base} is scaled by {k} x the batch / {base} (the line above '
                f"counts one step's batch against {base / k:g})"
            )
        for wrapper, lr in zip(wrappers, before, strict=True):
            settings = getattr(wrapper, 'base_param_settings', None)
            if settings is not None and lr:
                settings['lr'] *= wrapper.optimizer.param_groups[0]['lr'] / lr

    def build_param_scheduler(self, scheduler: Any) -> Any:
        """mmengine's; with gradient accumulation a linear, polynomial or constant scheduler by
        iteration moves over the iterations of the global batch's schedule
        (:func:`~dna_mm.engine.accumulated_schedule.fit_to_accumulation`)."""
        built = super().build_param_scheduler(scheduler)
        fit_to_accumulation(built, self.optim_wrapper)
        return built

    def register_default_hooks(self, hooks: Optional[dict] = None) -> None:
        """mmengine's; ``None`` also turns off a default hook that mmengine does not know
        (``default_hooks.preemption=None``; mmengine accepts ``None`` only for its own names)."""
        if hooks is not None:
            hooks = {k: h for k, h in hooks.items() if h is not None or k in MMENGINE_DEFAULT_HOOKS}
        super().register_default_hooks(hooks)

    def register_hook(self, hook: Union[Hook, dict], priority: Any = None) -> None:
        """mmengine's; mmengine's ``CheckpointHook`` is built as
        :class:`~dna_mm.engine.checkpoint_hook.AtomicCheckpointHook` (the same arguments and
        files; a failed write cannot leave the run without a checkpoint that loads). A hook given
        as text (``--cfg-options "custom_hooks=[dict(type=...)]"``, which mmengine's option parser
        keeps as a string) is a :class:`~dna_mm.errors.ConfigError` saying where to write it."""
        if isinstance(hook, str):
            raise ConfigError(
                f'custom_hooks: {hook!r} is text, not a hook: --cfg-options cannot write a dict inside a '
                'list; name the hook in a config file (a child config: _base_ = [...], custom_hooks = '
                '[*_base_.custom_hooks, dict(type=...)], which keeps the hooks the base config has)'
            )
        if isinstance(hook, dict) and hook.get('type') in STOCK_CHECKPOINT_HOOK:
            hook = {**hook, 'type': AtomicCheckpointHook}
        super().register_hook(hook, priority)

    def load_or_resume(self) -> None:
        """mmengine's, but ``resume`` with nothing to resume from says so plainly, and one that
        does not load (cut short, damaged, gone) is skipped with one line for the one before it
        (:func:`~dna_mm.engine.checkpoint_hook.resume_candidates`). Then, the run's parts built
        and its weights loaded, the run takes its work dir (:meth:`_take_work_dir`)."""
        self._load_or_resume()
        self._take_work_dir()

    def _take_work_dir(self) -> None:
        """A training run that does not resume moves an earlier run's checkpoints and config
        aside (:mod:`dna_mm.engine.earlier_run`: one log line); then the config is written
        there, once (:meth:`dump_config`: deferred until now, so that a run that fails on its
        config leaves the work dir's copy as it was), with the seed in effect as its
        ``randomness.seed``: the one drawn for a config that gives none, the checkpoint's on a
        resume (mmengine's), so that the saved config repeats the run."""
        if not self._config_pending:
            return
        self._config_pending = False
        if self._training and not self._resume and is_main_process():
            for where in dict.fromkeys(f for f in (self.work_dir, self._checkpoint_folder()) if f):
                moved = set_aside_earlier_run(where)
                if moved is not None:
                    folder, names = moved
                    self.logger.warning(
                        f'{where} held an earlier run ({abbreviate(names, 4)}): moved to {folder}; '
                        'this run starts anew (--resume continues a run)'
                    )
        # the seed in effect (drawn where the config gives none, the checkpoint's on a resume):
        # the saved config repeats the run
        self.cfg.randomness = {**(self.cfg.get('randomness') or {}), 'seed': self.seed}
        super().dump_config()

    def _load_or_resume(self) -> None:
        """The load or resume of :meth:`load_or_resume`."""
        if not (self._resume and self._load_from is None) or self._has_loaded:
            return super().load_or_resume()
        checkpoints = self._checkpoint_folder()
        candidates = resume_candidates(self.work_dir, checkpoints)
        if not candidates:
            also = f' nor in {checkpoints}' if checkpoints else ''
            self.logger.warning(
                f'resume: no checkpoint found in {self.work_dir} (no last_checkpoint file){also}; '
                'training starts from scratch'
            )
            return None
        for i, path in enumerate(candidates):
            try:
                self.resume(path)
            except (UnreadableCheckpointError, FileNotFoundError) as err:
                after = (
                    f'trying the one before, {candidates[i + 1]}' if candidates[i + 1 :] else 'none before it'
                )
                self.logger.warning(
                    f'resume: skipping {path}, which does not load ({error_line(err)}); {after}'
                )
                continue
            self._has_loaded = True
            self.logger.info(f'resume: continuing from {path}')
            return None
        raise UnreadableCheckpointError(
            f'resume: none of the {len(candidates)} checkpoint(s) in {self.work_dir} loads (the lines '
            f'above say why); move them away to train from scratch'
        )

    def _checkpoint_folder(self) -> Optional[str]:
        """The folder the checkpoint hook will write to when it is not the work dir
        (``default_hooks.checkpoint.out_dir``: :func:`~dna_mm.engine.checkpoint_hook.checkpoint_folder`;
        read before the hook's ``before_train`` joins the work dir's name to its ``out_dir``)."""
        hook = next((h for h in self.hooks if isinstance(h, CheckpointHook)), None)
        return checkpoint_folder(self.work_dir, getattr(hook, 'out_dir', None)) if hook else None

    def train(self) -> Any:
        """mmengine's, holding the work dir (:mod:`dna_mm.engine.work_dir_lock`): a work dir that
        a live run holds is a :class:`~dna_mm.engine.work_dir_lock.WorkDirBusyError`. Ends as
        the module docstring says (``Every run ends``)."""
        if not any(isinstance(h, AccumulatedScheduleHook) for h in self.hooks):
            self.register_hook(AccumulatedScheduleHook())
        lock = self._hold_work_dir()
        self._training = True
        try:
            return self._ending(super().train, 'train')
        finally:
            lock.release()

    def val(self) -> dict:
        """mmengine's; ends as the module docstring says (``Every run ends``)."""
        return self._ending(super().val, 'val')

    def test(self) -> dict:
        """mmengine's; ends as the module docstring says (``Every run ends``)."""
        return self._ending(super().test, 'test')

    def _ending(self, run: Callable[[], Any], what: str) -> Any:
        """``run()``; then, on every path, the signal handlers back and the loaders' workers
        ended; a lost worker or rank as a :class:`~dna_mm.errors.RunStopped`."""
        tb = None
        watch_worker_deaths()
        answer_peers()  # the other ranks can tell whether this one lives (a no-op alone)
        try:
            return run()
        except BaseException as err:
            tb = err.__traceback__  # an epoch's loader iterator is in one of its frames
            lost = None
            if isinstance(err, Exception):
                lost = describe_lost_worker(err, runner_iterators(self)) or describe_lost_rank(err)
            # for the ranks that find this one gone (the first note counts: after describe_lost_rank)
            note_rank_end(lost or f'{type(err).__name__}: {error_line(err)}')
            if lost is None:
                raise
            raise RunStopped(f'{lost}; {self._going_on(what)}') from err
        finally:
            for hook in self.hooks:
                if isinstance(hook, PreemptionHook):
                    hook.release()
            end_runner_workers(self, tb)

    def _going_on(self, what: str) -> str:
        """How to go on after a run that stopped on a loss outside its code."""
        if what != 'train':
            return f'the {what} run stopped (exit status 1); run it again'
        pointer = osp.join(self.work_dir, LAST_CHECKPOINT)
        last = open(pointer).read().strip() if osp.isfile(pointer) else ''
        if last:
            return f'training stopped (exit status 1); --resume continues from {last}'
        return 'training stopped (exit status 1) before its first checkpoint; run it again'

    def _hold_work_dir(self) -> WorkDirLock:
        """Lock the work dir on rank 0 and give every rank its answer; clear the partial files a
        killed run left."""
        lock, refused = WorkDirLock(self.work_dir), None
        if is_main_process():
            try:
                locked, previous = lock.acquire()
            except WorkDirBusyError as err:
                refused = str(err)
            else:
                if not locked:
                    self.logger.warning(
                        f'{self.work_dir}: the file system has no file locks; a second run into this '
                        f'work dir would not be refused'
                    )
                if previous:
                    self.logger.info(
                        f'work dir {self.work_dir}: taking it over from a run that ended without '
                        f'releasing it ({holder_text(previous)})'
                    )
                removed = remove_partial_files(self.work_dir)
                if removed:
                    self.logger.info(f'removed partial files a killed run left: {", ".join(removed)}')
        _refuse_on_every_rank(refused)
        return lock

    def dump_config(self) -> None:
        """mmengine's (called as the runner is made), deferred to :meth:`load_or_resume`, once
        the run's parts are built and its weights loaded (:meth:`_take_work_dir`); never into
        the work dir of a live training run (that run's copy stays; a training run is then
        refused by :meth:`train`), nor for a test (``cfg.test_only``, set by ``tools/test.py``):
        the work dir's config stays the training run's, which every tool takes as it is; the
        test's own, with the evaluators it added, is its log folder's
        (``<timestamp>/vis_data/config.py``)."""
        # rank 0 alone writes it (mmengine's dump_config is master_only), and alone probes the lock:
        # a probe holds it for an instant, which the others' would spend while rank 0 takes it
        self._config_pending = (
            is_main_process() and not self.cfg.get('test_only') and not in_use(self.work_dir)
        )

    def save_checkpoint(
        self,
        out_dir: str,
        filename: str,
        file_client_args: Optional[dict] = None,
        save_optimizer: bool = True,
        save_param_scheduler: bool = True,
        meta: Optional[dict] = None,
        by_epoch: bool = True,
        backend_args: Optional[dict] = None,
    ) -> None:
        """mmengine's (rank 0 writes), to a local folder whole or not at all
        (:func:`~dna_mm.utils.files.atomic_path`, durable); a failed write is a
        :class:`~dna_mm.engine.atomic_files.CheckpointWriteError` naming the file and the cause.
        Other storage (``backend_args``, ``s3://``) is written by mmengine as it is. Every rank
        calls it (mmengine's hooks do); the hooks' ``before_save_on_every_rank`` run first, on
        every rank (``RNGStateHook`` gathers the ranks' random states there). A training run's
        checkpoint records its layout in ``meta['batch_layout']`` (processes, batch per process,
        accumulation steps: :class:`~dna_mm.engine.global_batch.BatchLayout`)."""
        self.call_hook('before_save_on_every_rank')
        if isinstance(self._train_loop, BaseLoop):  # a training run's layout: a resume in another converts
            meta = dict(meta or {}, **{LAYOUT_KEY: BatchLayout.of(self).as_meta()})
        args = (file_client_args, save_optimizer, save_param_scheduler, meta, by_epoch, backend_args)
        backend = get_file_backend(out_dir, backend_args=backend_args)
        if not is_main_process() or file_client_args is not None or not isinstance(backend, LocalBackend):
            return super().save_checkpoint(out_dir, filename, *args)
        path = osp.join(out_dir, filename)
        try:
            with atomic_path(path, durable=True) as part:
                super().save_checkpoint(out_dir, part.name, *args)
        except CheckpointWriteError:
            raise
        except OSError as err:
            kept = named_checkpoint(self.work_dir)
            kept = f'; last_checkpoint still names {kept}' if kept else ''
            raise CheckpointWriteError(
                f'could not write the checkpoint {path}: {describe_os_error(err)}; nothing was written '
                f'under that name{kept}'
            ) from err

    def resume(self, filename: str, *args: Any, **kwargs: Any) -> None:
        """mmengine's, with an error naming the file when it is not a training checkpoint; the
        optimizer options and the schedule are the config's, not the checkpoint's (one log line
        names what the config changes: :mod:`dna_mm.engine.resume_settings`). A checkpoint saved
        on another number of processes (or per-process batch) goes on where it stopped in samples
        seen: its iteration and schedule converted (:meth:`_resume_in_layout`); one saved on
        another number of processes that records no layout is a
        :class:`~dna_mm.errors.CheckpointMismatchError` (:func:`unconvertible_resume`)."""
        config = config_settings(self.optim_wrapper, self.param_schedulers)
        try:
            super().resume(filename, *args, **kwargs)
        except KeyError as err:
            layout = getattr(self, '_loaded_layout', None)  # set by load_checkpoint
            if layout in (None, 'mmengine', 'state_dict'):
                message = (
                    f'cannot resume from {filename}: it has no {err} entry, so it is not a training '
                    f'checkpoint saved by mmengine (to start from its weights use load_from)'
                )
            else:  # another code's file (dna_mm.converters.whole_model.LAYOUT_NAMES)
                message = (
                    f'cannot resume from {filename}: it is {LAYOUT_NAMES[layout]}, not a dna_mm '
                    f"training checkpoint; --resume / resume=True continues dna_mm's own runs only. "
                    f'Its weights load whole with load_from={filename} (training starts at epoch 0 '
                    f'with a fresh optimizer), and tools/test.py CONFIG {filename} evaluates it'
                )
            raise CheckpointMismatchError(message) from err
        except ValueError as err:  # torch's Optimizer.load_state_dict: 'loaded state dict ... group'
            if 'parameter group' not in str(err):
                raise
            raise CheckpointMismatchError(
                f'cannot resume from {filename}: its optimizer state groups the parameters otherwise '
                f"than the config's optimizer ({_group_count(self.optim_wrapper)} parameter groups): "
                'optim_wrapper.paramwise_cfg (custom_keys, layer decay) or the trainable parameters '
                "changed since it was saved; resume with the checkpoint's settings, or start from its "
                f'weights with a fresh optimizer: load_from={filename}'
            ) from err
        model = self.model.module if is_model_wrapper(self.model) else self.model
        bad = non_finite_optimizer_state(self.optim_wrapper, model)
        if bad is not None:
            raise CorruptCheckpointError(
                f'cannot resume from {filename}: {bad} holds NaN or inf values (a damaged file); '
                f'resume from an earlier checkpoint, or start from its weights with a fresh optimizer: '
                f'load_from={filename}'
            )
        convert = self._resume_in_layout(filename)
        changes = apply_config_settings(self.optim_wrapper, self.param_schedulers, config, convert)
        if convert is not None:
            self._log_layout(convert)
        if changes:
            self.logger.warning(
                f"resume: the config's settings replace the checkpoint's: {'; '.join(changes)}"
            )
        entries = (self._resume_extras or {}).get('entries', ())
        missing = missing_state(
            filename, entries, self.optim_wrapper, self.param_schedulers, config, self.epoch, self.iter
        )
        if missing:
            self.logger.warning(missing)
        self._resume_as_saved()

    def _resume_in_layout(self, filename: str) -> Optional[LayoutConversion]:
        """For a checkpoint saved in another layout (``meta['batch_layout']``,
        :func:`~dna_mm.engine.global_batch.changed_layout`): the loop set to the iteration here
        where the run stopped; returns the conversion (``None``: the same layout, or a checkpoint
        that records none), also kept as :attr:`resumed_layout`. A checkpoint that records no
        layout, saved on another number of processes, cannot be converted: refused
        (:func:`unconvertible_resume`) before anything trains; so is one whose ranks' passes over
        the data differ in length on either side (``DefaultSampler(round_up=False)``:
        :func:`~dna_mm.engine.global_batch.uneven_refusal`)."""
        extras = self._resume_extras or {}
        meta, rng_state = extras.get('meta'), extras.get('rng_state')
        refused = unconvertible_resume(filename, meta, rng_state, get_world_size())
        if refused is not None:
            raise CheckpointMismatchError(refused)
        conversion = changed_layout(self, extras.get('meta', {}), filename)
        if conversion is not None:
            self.train_loop._iter = conversion.iter
        self.resumed_layout = conversion
        return conversion

    def _log_layout(self, conversion: LayoutConversion) -> None:
        """One line: the layouts with the length of the pass they convert by (an epoch, or a
        pass over the data of an iteration-based run: the whole ones convert whole), the iteration
        converted, the schedule replayed; a warning when samples already trained are trained
        again."""
        saved, now, it, again = conversion.saved, conversion.now, conversion.saved_iter, conversion.again
        scheduled = scheduled_values(self.optim_wrapper, self.param_schedulers)
        per = dict(by_epoch=conversion.by_epoch, by_pass=conversion.by_pass)
        line = (
            f'resume: saved on {saved.describe(**per)}, going on on {now.describe(**per)}: iteration {it} is '
            f'iteration {self.iter} here'
            + (f' (epoch {self.epoch + 1})' if conversion.by_epoch else '')
            + (f'; the schedule by iteration goes on from there ({scheduled})' if scheduled else '')
        )
        if again:
            line += (
                f'. The {again} sample{"s" if again > 1 else ""} trained last before the stop '
                f'{"are" if again > 1 else "is"} not a whole batch of {now.per_iter} here and '
                f'{"are" if again > 1 else "is"} trained again'
            )
        self.logger.log(logging.WARNING if again else logging.INFO, line)

    def _resume_as_saved(self) -> None:
        """A checkpoint written by a run of dna_mm's resumable loop and ``RNGStateHook`` (it holds
        ``rng_state``), resumed with a config that names mmengine's loop and not the hook: a
        config saved by dna_mm 0.1.0 before its runner stopped putting them in itself. The run
        goes on as the checkpoint's run went (mid-epoch, its random state back), with one warning
        naming what to add to the config; kept for one release. mmengine's loop would train the
        interrupted epoch again from its start, past the schedule's end."""
        extras, self._resume_extras = self._resume_extras or {}, None
        stock = self._train_loop
        twin = RESUMABLE_TWINS.get(type(stock))
        if twin is None or 'rng_state' not in extras or any(isinstance(h, RNGStateHook) for h in self.hooks):
            return
        end_iterator_workers(getattr(getattr(stock, 'dataloader_iterator', None), '_iterator', None))
        drop_persistent_workers(stock.dataloader)
        loop_cfg = {k: v for k, v in self._train_loop_cfg.items() if k not in ('type', 'by_epoch')}
        loop = Runner.build_train_loop(self, dict(loop_cfg, type=twin))
        loop._epoch, loop._iter = stock._epoch, stock._iter
        loop.resume_rng_state = extras['rng_state']
        self._train_loop = loop
        added = ['RNGStateHook']
        self.register_hook(dict(type='RNGStateHook'))
        if PENDING_KEY in extras and not any(isinstance(h, PendingGradsHook) for h in self.hooks):
            pending = PendingGradsHook()
            self.register_hook(pending)
            pending.after_load_checkpoint(self, extras)
            added.append('PendingGradsHook')
        self.logger.warning(
            f'resume: the checkpoint was written by {twin} and RNGStateHook (dna_mm 0.1.0 put them in '
            f'itself) and the config names {type(stock).__name__}, which would train the interrupted '
            f'epoch again: the run goes on with {twin} and {" and ".join(added)}; name them in the '
            f"config (train_cfg.type, custom_hooks: configs/_base_/ do) for a later dna_mm"
        )

    def load_checkpoint(
        self,
        filename: str,
        map_location: Union[str, Callable] = 'cpu',
        strict: Optional[bool] = None,
        revise_keys: list = [(r'^module.', '')],  # noqa: B006 (mmengine's signature; only read)
    ) -> dict:
        """Load a whole-model checkpoint (``load_from``, resume, ``tools/test.py``) with
        :func:`~dna_mm.checkpoint.load_whole_model` (``weights_only`` from every source); ``strict``
        (default: not ``load_partial``) refuses a mismatch with a ``CheckpointMismatchError``."""
        model = self.model.module if is_model_wrapper(self.model) else self.model
        if isinstance(model, BaseTTAModel):
            model = model.module
        report = load_whole_model(
            model,
            filename,
            strict=not self.load_partial if strict is None else strict,
            map_location=map_location,
            revise_keys=revise_keys,
            after_read=lambda checkpoint: self._after_read(filename, checkpoint),
        )
        self._loaded_layout = report.layout  # another code's file: resume says so
        extras = ('meta', 'rng_state', PENDING_KEY)  # what a resume of a run saved as it was reads
        self._resume_extras = {k: report.checkpoint[k] for k in extras if k in report.checkpoint}
        self._resume_extras['entries'] = tuple(report.checkpoint)  # the optimizer's state, ...: resume
        self._has_loaded = True
        if not report.complete:
            self.logger.warning(
                f'partial load of {filename} (load_partial): {report.loaded} '
                f'weights loaded; not loaded, the model keeps its own values:\n'
                f'{report.describe()}'
            )
        self.logger.info(f'Load checkpoint from {filename}')
        return report.checkpoint

    def _after_read(self, filename: str, checkpoint: dict) -> None:
        """The hooks' ``after_load_checkpoint``; on a resume without ``EMAHook`` from a checkpoint
        saved with it, the trained weights back in its ``state_dict``
        (:func:`~dna_mm.engine.resume_settings.trained_weights_back`)."""
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        if self._resume:
            line = trained_weights_back(filename, checkpoint, self.hooks)
            if line is not None:
                self.logger.warning(line)


def _group_count(optim_wrapper: Any) -> int:
    """The parameter groups of a wrapper's optimizer (of all of them, for a multi-optimizer one)."""
    wrappers = optim_wrapper.values() if hasattr(optim_wrapper, 'values') else [optim_wrapper]
    return sum(len(w.optimizer.param_groups) for w in wrappers)


def _processes(n: int) -> str:
    return f'{n} process{"es" if n != 1 else ""}'


def unconvertible_resume(filename: str, meta: Any, rng_state: Any, world_size: int) -> Optional[str]:
    """Why ``filename`` cannot be resumed by ``world_size`` processes, or ``None``: it records no
    layout (``meta['batch_layout']``: dna_mm wrote none before it converted iterations) and its
    ``rng_state`` says that another number of processes saved it. Its iteration counts batches of
    that many processes: resumed as saved it would skip or train again part of the run (and its
    schedule by iteration would be replayed wrong). A checkpoint with no ``rng_state`` (no record
    of its processes) is not refused."""
    saved = rng_state.get('world_size') if isinstance(rng_state, dict) else None
    if BatchLayout.saved(meta) is not None or not isinstance(saved, int) or saved == world_size:
        return None
    how = 'tools/train.py CONFIG --resume' if saved == 1 else f'tools/dist_train.sh CONFIG {saved} --resume'
    return (
        f'cannot resume {filename}: it was saved by {_processes(saved)}, is resumed by '
        f"{_processes(world_size)} and records no batch layout (meta['batch_layout'], which dna_mm "
        f'writes since it converts iterations between layouts), so its iteration cannot be '
        f'converted; resume it on {_processes(saved)} ({how}), or start from its weights with '
        f'load_from={filename} (training starts at iteration 0 with a fresh optimizer)'
    )


def _refuse_on_every_rank(refused: Optional[str]) -> None:
    """Rank 0's refusal of the work dir (``None``: none), raised on every rank."""
    if get_world_size() > 1:
        box = [refused]
        broadcast_object_list(box)
        refused = box[0]
    if refused:
        raise WorkDirBusyError(refused)


def refuse_busy_work_dir(work_dir: str) -> None:
    """Before a training run is built: a :class:`~dna_mm.engine.work_dir_lock.WorkDirBusyError`
    on every rank when a live run holds ``work_dir`` (rank 0 looks), so that a refused run writes
    nothing there, not even its timestamped log folder. (``train`` still takes the lock: the
    answer here is only an early one.)"""
    refused = None
    if is_main_process():
        try:
            refuse_if_in_use(work_dir)
        except WorkDirBusyError as err:
            refused = str(err)
    _refuse_on_every_rank(refused)


def build_runner(cfg: Config) -> Runner:
    """The config's ``runner_type`` (through ``RUNNERS``), else :class:`DnARunner`."""
    if 'runner_type' in cfg:
        return RUNNERS.build(cfg)
    return DnARunner.from_cfg(cfg)
