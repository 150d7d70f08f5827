"""``DnARunner``: mmengine's ``Runner`` with strict whole-model loads, plain resume messages,
exact resume and a terminal that starts with the run, not with the setup dump.

* **Strict loads.** ``load_from``, ``--resume`` and ``tools/test.py CHECKPOINT`` load the whole
  model with :func:`dna_mm.checkpoint.load_whole_model`; missing, unexpected or resized keys
  are a :class:`~dna_mm.errors.CheckpointMismatchError` naming the file and the keys (mmengine
  would load what matches and test random weights). ``load_partial = True`` (tools:
  ``--partial-load``) accepts a partial load and prints what was not loaded. Backbone
  initialisation (``pretrained``, ``init_cfg``) keeps its own non-strict load report.
* **Resume.** ``resume=True`` with no checkpoint in the work dir warns and trains from scratch;
  a file that is not a training checkpoint is an error naming it.
* **Exact resume, where the config asks for it.** A config that names
  :mod:`dna_mm.engine.loops`' train loops and :class:`~dna_mm.engine.rng_state.RNGStateHook`
  (``configs/_base_/``' schedules and runtimes do) resumes to the same losses as a run that was
  never stopped. The runner builds the loops and hooks the config names, nothing else; with
  others (a stock config: mmengine's loops) one log line says that exact resume is not
  guaranteed.
* **Quiet setup.** mmengine's environment, config, hook-order and parameter-option dumps go to
  the log file only, unless ``log_setup_to_console = True`` (tools: ``--verbose``).

Selected with ``runner_type = 'DnARunner'`` (``configs/_base_/default_runtime*.py``);
:func:`build_runner`, which dna_mm's tools call, uses it for configs without ``runner_type``
too. MMDetection's stock tools honour ``runner_type``; MMAction2 1.1.0's stock
``tools/train.py`` always builds mmengine's plain ``Runner``.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Union

from mmengine.config import Config
from mmengine.model import BaseTTAModel, is_model_wrapper
from mmengine.registry import RUNNERS
from mmengine.runner import BaseLoop, Runner
from mmengine.runner.checkpoint import find_latest_checkpoint

from ..checkpoint import load_whole_model
from ..converters.whole_model import LAYOUT_NAMES
from ..engine.loops import ResumableLoopMixin
from ..engine.rng_state import RNGStateHook
from ..errors import CheckpointMismatchError

# Start of each setup message that stays off the terminal (mmengine 0.10.7's wording).
SETUP_DUMP_MARKERS = (
    'System environment:',
    'Config:\n',
    'Hooks will be executed in the following',
    'paramwise_options -- ',
)


class SetupDumpFilter(logging.Filter):
    """A console-handler filter that drops mmengine's INFO setup dumps until the first loop
    starts (:attr:`active` is then cleared); warnings, errors and everything else pass."""

    def __init__(self, active: bool = True) -> None:
        super().__init__()
        self.active = active

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.active or record.levelno > logging.INFO:
            return True
        head = record.getMessage().lstrip('\n-')[:80]
        return not head.startswith(SETUP_DUMP_MARKERS)


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
        super().__init__(*args, **kwargs)

    def build_train_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """mmengine's; one log line when the loop or the hooks the config names cannot resume
        exactly (not :mod:`dna_mm.engine.loops`' loops with an ``RNGStateHook``)."""
        built = super().build_train_loop(loop)
        hooked = any(isinstance(h, RNGStateHook) for h in self.hooks)
        if not (isinstance(built, ResumableLoopMixin) and hooked):
            self.logger.info(
                f'exact resume not guaranteed: train_cfg.type is {type(built).__name__}; a resumed run '
                "repeats the interrupted one with dna_mm's ResumableEpochBasedTrainLoop / "
                'ResumableIterBasedTrainLoop and RNGStateHook (configs/_base_/ name them)'
            )
        return built

    def build_logger(
        self, log_level: Union[int, str] = 'INFO', log_file: Optional[str] = None, **kwargs: Any
    ):
        """mmengine's logger, with :class:`SetupDumpFilter` on its terminal handler."""
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
        """mmengine's, and the terminal shows everything from the first loop on."""
        if fn_name in ('before_train', 'before_val', 'before_test'):
            self._setup_filter.active = False
        super().call_hook(fn_name, **kwargs)

    def load_or_resume(self) -> None:
        """mmengine's, but ``resume`` with nothing to resume from says so plainly."""
        if self._resume and self._load_from is None and not self._has_loaded:
            if find_latest_checkpoint(self.work_dir) is None:
                self.logger.warning(
                    f'resume: no checkpoint found in {self.work_dir} (no '
                    f'last_checkpoint file); training starts from scratch'
                )
                return None
        return super().load_or_resume()

    def resume(self, filename: str, *args: Any, **kwargs: Any) -> None:
        """mmengine's, with an error naming the file when it is not a training checkpoint."""
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
            after_read=lambda checkpoint: self.call_hook('after_load_checkpoint', checkpoint=checkpoint),
        )
        self._loaded_layout = report.layout  # another code's file: resume says so
        self._has_loaded = True
        if not report.complete:
            self.logger.warning(
                f'partial load of {filename} (load_partial): {report.loaded} '
                f'weights loaded; not loaded, the model keeps its own values:\n'
                f'{report.describe()}'
            )
        self.logger.info(f'Load checkpoint from {filename}')
        return report.checkpoint


def build_runner(cfg: Config) -> Runner:
    """The config's ``runner_type`` (through ``RUNNERS``), else :class:`DnARunner`."""
    if 'runner_type' in cfg:
        return RUNNERS.build(cfg)
    return DnARunner.from_cfg(cfg)
