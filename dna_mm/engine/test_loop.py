"""Test loops: one whose stopped test goes on where it stood (:class:`ResumableTestLoop`, with
:mod:`dna_mm.engine.test_progress`), and one that also finds every unreadable test video in one
run (:class:`UnreadableVideosTestLoop`); and the validation loop that skips unreadable videos
(:class:`UnreadableVideosValLoop`).

mmengine's ``TestLoop`` stops at the first video that cannot be decoded, so a test set with
several broken files fails once per file. :class:`UnreadableVideosTestLoop` asks the test
dataset (:class:`~dna_mm.datasets.RobustVideoDataset`) to hand back ``(path, reason)`` in place of
a sample that cannot be loaded, tests the others, and at the end

* with ``skip_unreadable=False`` (the default) raises one :class:`~dna_mm.errors.DataError`
  listing every unreadable video and why, before any metric is computed (a metric over part of
  the test set must not pass for the test set's);
* with ``skip_unreadable=True`` computes the metrics over the readable videos and keeps the
  list in :attr:`unreadable` (``tools/test.py --skip-unreadable`` prints the count beside the
  metric).

On several ranks each rank tests its share (mmengine's ``DefaultSampler`` deals the list out
``rank::world``, padded with the list's first videos to a multiple of the ranks), and mmengine's
``collect_results`` puts the ranks' results back in list order by interleaving them and cutting
the padding off at a given length: it needs one result per sample on every rank. So a rank puts a
placeholder (``None``, which the collection drops) in each metric's results where a video could
not be read, and each unreadable video's place in the list is known from its place in the rank's
share: the metrics, ``--dump`` and the list of unreadable videos (each once, in list order, the
padding's repeats left out) are the same on any number of ranks.

When no test video at all can be read, the error asks whether the test pipeline is one for
these videos (a decoder step that does not match the opening one fails on every file), with or
without ``skip_unreadable``: there is nothing to compute a metric over.

Datasets of other types are tested exactly as by ``TestLoop``. A config names it,
``test_cfg = dict(type='UnreadableVideosTestLoop')`` (``configs/_base_/default_runtime*.py``);
``tools/test.py --skip-unreadable`` needs it. A stopped test goes on where it stood when the same
command runs again (``progress_every_s``: :mod:`dna_mm.engine.test_progress`).

Validation during training (:class:`UnreadableVideosValLoop`, ``val_cfg`` of dna_mm's runtime)
skips an unreadable validation video, as training does and ``tools/test.py --skip-unreadable``
does: one warning naming each, the metrics over the readable ones, and a warning with the count
skipped. A training run does not die at its first validation for one broken file. When none
can be read it is an error, as in a test (the pipeline, more likely than every file).
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple, Union

from mmengine.dataset import pseudo_collate
from mmengine.dist import all_gather_object, get_world_size, is_main_process
from mmengine.logging import print_log
from mmengine.registry import LOOPS
from mmengine.runner.loops import TestLoop, ValLoop, _parse_losses

from ..datasets.skipped_samples import within
from ..errors import ConfigError, DataError
from .test_progress import EVERY_S, RankProgress

UNREADABLE = 'unreadable'
SHOW = 20


class BatchReport(NamedTuple):
    """What :func:`collate_readable` tells of a batch: its number of samples, and the
    ``(place in the batch, path, reason)`` of each that could not be read."""

    size: int
    unreadable: list[tuple[int, str, str]]


def collate_readable(batch: list[dict]) -> dict:
    """``pseudo_collate`` of the samples that were read; under ``'unreadable'`` a
    :class:`BatchReport` of the others (their places, so that the loop can keep them in the
    metrics' results)."""
    unreadable = [(place, *s[UNREADABLE]) for place, s in enumerate(batch) if UNREADABLE in s]
    data = pseudo_collate([s for s in batch if UNREADABLE not in s]) if len(unreadable) < len(batch) else {}
    data[UNREADABLE] = BatchReport(len(batch), unreadable)
    return data


def reporting_dataloader(dataloader: Union[Any, dict]) -> tuple[Union[Any, dict], bool]:
    """``dataloader`` (a config) collating with :func:`collate_readable` when its dataset can
    report unreadable samples (a :class:`~dna_mm.datasets.robust_samples.RobustSamples`:
    ``RobustVideoDataset``, ``RobustRawframeDataset``; or a dataset wrapper of one: ``ConcatDataset``,
    ``RepeatDataset``, ...), and whether it can."""
    from mmaction.registry import DATASETS  # noqa: PLC0415

    from ..datasets.robust_samples import RobustSamples  # noqa: PLC0415

    def kinds(dataset: Any) -> Iterator[Any]:  # the config's dataset and those it wraps
        if isinstance(dataset, dict):
            kind = dataset.get('type')
            yield DATASETS.get(kind) if isinstance(kind, str) else kind
            for inner in [*(dataset.get('datasets') or []), dataset.get('dataset')]:
                yield from kinds(inner)

    dataset = dataloader.get('dataset') if isinstance(dataloader, dict) else None
    reporting = any(isinstance(k, type) and issubclass(k, RobustSamples) for k in kinds(dataset))
    if reporting:
        dataloader = dict(dataloader, collate_fn=dict(type=collate_readable))
    return dataloader, reporting


def report_unreadable(dataset: Any) -> None:
    """Have ``dataset`` and the datasets it wraps report an unreadable sample in its place
    (``dict(unreadable=(path, reason))``) rather than raise; set before the workers start."""
    from ..datasets.robust_samples import RobustSamples  # noqa: PLC0415

    for each in within(dataset):
        if isinstance(each, RobustSamples):
            each.report_unreadable = True


def none_read_error(
    unreadable: list[tuple[str, str]], total: int, what: str, noun: str = 'video'
) -> DataError:
    """The error when none of ``total`` ``what`` samples (``noun``: ``'video'``, ``'frame folder'``)
    can be read."""
    same = len({reason.replace(path, '') for path, reason in unreadable}) == 1
    shown = '\n  '.join(f'{path}: {reason}' for path, reason in unreadable[:SHOW])
    more = f'\n  ... ({len(unreadable) - SHOW} more)' if len(unreadable) > SHOW else ''
    return DataError(
        f'none of the {total} {what} {noun}s can be read{", all for one reason" if same else ""}: '
        f"is the config's {what} pipeline one for these {noun}s? (no metric computed):\n  {shown}{more}"
    )


class SkipsUnreadable:
    """What the two loops below share: a batch's readable videos run through ``run_iter`` and its
    unreadable ones kept in place (module docstring), and the list of the unreadable videos of
    all the ranks. :attr:`found` and :attr:`seen` are this rank's: each unreadable video's
    ``(place in the rank's share, path, reason)`` and the number of its samples so far."""

    evaluator: Any
    dataloader: Any
    found: list[tuple[int, str, str]]
    seen: int

    @property
    def noun(self) -> str:
        """What the dataset's samples are, for the messages: ``'video'``, ``'frame folder'``."""
        return next((d.noun for d in within(self.dataloader.dataset) if hasattr(d, 'noun')), 'video')

    def run_readable(self, idx: int, data_batch: Any) -> None:
        """``run_iter`` on the batch's readable samples (none: not run); on several ranks a
        ``None`` in each metric's results at the place of each unreadable one, since mmengine's
        collection orders the results by their places in the ranks' shares."""
        report = data_batch.pop(UNREADABLE, None) if isinstance(data_batch, dict) else None
        if report is None:  # a dataset that does not report unreadable videos
            self.run_iter(idx, data_batch)
            return
        metrics = self.evaluator.metrics
        before = [len(metric.results) for metric in metrics]
        if data_batch:
            self.run_iter(idx, data_batch)
        if report.unreadable and get_world_size() > 1:
            places = {place for place, _, _ in report.unreadable}
            for metric, start in zip(metrics, before, strict=True):
                added = metric.results[start:]
                if len(added) != report.size - len(places):
                    raise RuntimeError(
                        f'{type(metric).__name__} collected {len(added)} results for '
                        f'{report.size - len(places)} samples: on several ranks mmengine collects one '
                        'result per sample, and the unreadable videos cannot be kept in their places'
                    )
                read = iter(added)
                metric.results[start:] = [None if p in places else next(read) for p in range(report.size)]
        self.found += [(self.seen + place, path, reason) for place, path, reason in report.unreadable]
        self.seen += report.size

    def all_unreadable(self) -> list[tuple[str, str]]:
        """The ``(path, reason)`` of every rank's unreadable videos, each once, in list order: the
        ``k``-th sample of rank ``r`` of ``w`` is the list's ``k * w + r``-th (``DefaultSampler``),
        and one at ``len(dataset)`` or after is the padding's repeat of one at its start."""
        total, world = len(self.dataloader.dataset), get_world_size()
        at: dict[int, tuple[str, str]] = {}
        for rank, part in enumerate(all_gather_object(self.found)):
            for k, path, reason in part:
                if k * world + rank < total:
                    at[k * world + rank] = (path, reason)
        return [at[place] for place in sorted(at)]


@LOOPS.register_module()
class ResumableTestLoop(TestLoop):
    """mmengine's ``TestLoop`` whose stopped test goes on where it stood when the same command runs
    again (:mod:`dna_mm.engine.test_progress`). Same arguments, and ``progress_every_s``: seconds
    between two writes of each rank's progress, ``0``: none (a signal then stops the test
    unsaved)."""

    def __init__(
        self, runner, dataloader: Union[Any, dict], *args: Any, progress_every_s: float = EVERY_S, **kwargs
    ):
        if isinstance(progress_every_s, bool) or not isinstance(progress_every_s, (int, float)):
            raise ConfigError(
                f'test_cfg.progress_every_s must be a number of seconds (0: no progress kept), '
                f'got {progress_every_s!r}'
            )
        super().__init__(runner, dataloader, *args, **kwargs)
        self.progress_every_s = progress_every_s

    def run(self) -> dict:
        """mmengine's ``TestLoop.run``, from the batch where a stopped run of the same test stood."""
        self.runner.call_hook('before_test')
        self.runner.call_hook('before_test_epoch')
        self.runner.model.eval()
        self.test_loss.clear()
        progress = RankProgress(self, self.progress_every_s)
        done, kept = progress.restore()
        self.take_back(kept)
        own_batches = self.dataloader.batch_sampler
        progress.skip(done)
        progress.start()
        try:
            for idx, data_batch in enumerate(self.dataloader, start=done):
                self.test_batch(idx, data_batch)
                progress.after_batch(idx + 1, self.kept())
                done = idx + 1
            progress.tested(done, self.kept())
        finally:
            progress.end(own_batches)
        metrics = self.final_metrics(progress)
        self.runner.call_hook('after_test_epoch', metrics=metrics)
        self.runner.call_hook('after_test')
        return metrics

    def test_batch(self, idx: int, data_batch: Any) -> None:
        """Test one batch: mmengine's ``run_iter``."""
        self.run_iter(idx, data_batch)

    def kept(self) -> dict:
        """What the loop itself gathers over the batches (the losses of models that give them),
        stored with each rank's progress."""
        return dict(test_loss=self.test_loss)

    def take_back(self, kept: dict) -> None:
        """:meth:`kept` of a stopped run (empty: none)."""
        self.test_loss.update(kept.get('test_loss', {}))

    def final_metrics(self, progress: RankProgress) -> dict:
        """The metrics over the whole test set (:meth:`metrics_over`)."""
        return self.metrics_over(len(self.dataloader.dataset), progress)

    def metrics_over(self, size: int, progress: RankProgress) -> dict:
        """The metrics over ``size`` samples and the losses; the progress file goes once they are
        computed."""
        metrics = self.evaluator.evaluate(size)
        if self.test_loss:
            metrics.update(_parse_losses(self.test_loss, 'test'))
        progress.remove()
        return metrics


@LOOPS.register_module()
class UnreadableVideosTestLoop(SkipsUnreadable, ResumableTestLoop):
    """``TestLoop`` that lists every unreadable test video (module docstring);
    ``skip_unreadable=True`` computes the metrics over the readable videos instead of failing;
    a stopped test goes on where it stood (:class:`ResumableTestLoop`)."""

    def __init__(
        self, runner, dataloader: Union[Any, dict], *args: Any, skip_unreadable: bool = False, **kwargs
    ):
        dataloader, reporting = reporting_dataloader(dataloader)
        super().__init__(runner, dataloader, *args, **kwargs)
        self.skip_unreadable = skip_unreadable
        self.unreadable: list[tuple[str, str]] = []
        self.found, self.seen = [], 0
        if reporting:
            report_unreadable(self.dataloader.dataset)

    def test_batch(self, idx: int, data_batch: Any) -> None:
        """The batch's readable videos tested, the others noted (:meth:`run_readable`)."""
        self.run_readable(idx, data_batch)

    def kept(self) -> dict:
        return dict(super().kept(), unreadable=self.found, seen=self.seen)

    def take_back(self, kept: dict) -> None:
        super().take_back(kept)
        self.found = [tuple(item) for item in kept.get('unreadable', [])]
        self.seen = kept.get('seen', 0)

    def final_metrics(self, progress: RankProgress) -> dict:
        """The list of unreadable videos, or the metrics over the readable ones."""
        self.unreadable = self.all_unreadable()
        total = len(self.dataloader.dataset)
        none_read = len(self.unreadable) == total
        if self.unreadable and (none_read or not self.skip_unreadable):
            progress.remove()  # the list is the result: run again, the videos are read again
            if none_read:  # every video failing is the pipeline's doing more often than the files'
                raise none_read_error(self.unreadable, total, 'test', self.noun)
            shown = '\n  '.join(f'{path}: {reason}' for path, reason in self.unreadable[:SHOW])
            more = f'\n  ... ({len(self.unreadable) - SHOW} more)' if len(self.unreadable) > SHOW else ''
            raise DataError(
                f'{len(self.unreadable)} of the {total} test {self.noun}s cannot be read; no metric computed '
                f'(fix or remove them, or pass --skip-unreadable to test the others):\n  {shown}{more}'
            )
        return self.metrics_over(total - len(self.unreadable), progress)


@LOOPS.register_module()
class UnreadableVideosValLoop(SkipsUnreadable, ValLoop):
    """mmengine's ``ValLoop`` that skips unreadable validation videos (module docstring): one
    warning naming each, the metrics over the others with a warning giving the count, the list in
    :attr:`unreadable`. Same arguments as ``ValLoop``; a dataset other than a
    ``RobustVideoDataset`` is validated as by it."""

    def __init__(self, runner, dataloader: Union[Any, dict], *args: Any, **kwargs):
        dataloader, reporting = reporting_dataloader(dataloader)
        super().__init__(runner, dataloader, *args, **kwargs)
        self.unreadable: list[tuple[str, str]] = []
        self.found, self.seen = [], 0
        if reporting:
            report_unreadable(self.dataloader.dataset)

    def run(self) -> dict:
        """mmengine's ``ValLoop.run``, the unreadable videos skipped."""
        self.runner.call_hook('before_val')
        self.runner.call_hook('before_val_epoch')
        self.runner.model.eval()
        self.val_loss.clear()
        self.found, self.seen = [], 0
        for idx, data_batch in enumerate(self.dataloader):
            self.run_readable(idx, data_batch)
        self.unreadable = self.all_unreadable()
        total = len(self.dataloader.dataset)
        if self.unreadable and len(self.unreadable) == total:
            raise none_read_error(self.unreadable, total, 'validation', self.noun)
        if is_main_process():  # every rank's, once
            for path, reason in self.unreadable:
                print_log(
                    f'validation: skipped unreadable {self.noun} {path} ({reason})',
                    logger='current',
                    level=30,
                )
        metrics = self.evaluator.evaluate(total - len(self.unreadable))
        if self.unreadable:
            print_log(  # the epoch and iteration: mmengine drops a warning repeated word for word
                f'validation at epoch {self.runner.epoch}, iteration {self.runner.iter}: metrics over '
                f'{total - len(self.unreadable)} of {total} {self.noun}s; {len(self.unreadable)} unreadable '
                f'{self.noun}(s) skipped (named in the warnings above, each the first time)',
                logger='current',
                level=30,
            )
        if self.val_loss:
            metrics.update(_parse_losses(self.val_loss, 'val'))
        self.runner.call_hook('after_val_epoch', metrics=metrics)
        self.runner.call_hook('after_val')
        return metrics
