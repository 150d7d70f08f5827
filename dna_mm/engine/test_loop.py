"""A test loop that finds every unreadable test video in one run.

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

Datasets of other types are tested exactly as by ``TestLoop``. A config names it,
``test_cfg = dict(type='UnreadableVideosTestLoop')`` (``configs/_base_/default_runtime*.py``);
``tools/test.py --skip-unreadable`` needs it.
"""

from __future__ import annotations

from typing import Any, Union

from mmengine.dataset import pseudo_collate
from mmengine.dist import all_gather_object
from mmengine.registry import LOOPS
from mmengine.runner.loops import TestLoop, _parse_losses

from ..errors import DataError

UNREADABLE = 'unreadable'
SHOW = 20


def collate_readable(batch: list[dict]) -> dict:
    """``pseudo_collate`` of the samples that were read; the ``(path, reason)`` of the others under
    ``'unreadable'``."""
    unreadable = [s[UNREADABLE] for s in batch if UNREADABLE in s]
    data = pseudo_collate([s for s in batch if UNREADABLE not in s]) if len(unreadable) < len(batch) else {}
    data[UNREADABLE] = unreadable
    return data


@LOOPS.register_module()
class UnreadableVideosTestLoop(TestLoop):
    """``TestLoop`` that lists every unreadable test video (module docstring);
    ``skip_unreadable=True`` computes the metrics over the readable videos instead of failing."""

    def __init__(
        self, runner, dataloader: Union[Any, dict], *args: Any, skip_unreadable: bool = False, **kwargs
    ):
        from ..datasets.video_dataset import RobustVideoDataset  # noqa: PLC0415

        # a RobustVideoDataset can report unreadable videos
        dataset = dataloader.get('dataset') if isinstance(dataloader, dict) else None
        kind = dataset.get('type') if isinstance(dataset, dict) else None
        reporting = kind == 'RobustVideoDataset' or (
            isinstance(kind, type) and issubclass(kind, RobustVideoDataset)
        )
        if reporting:
            dataloader = dict(dataloader, collate_fn=dict(type=collate_readable))
        super().__init__(runner, dataloader, *args, **kwargs)
        self.skip_unreadable = skip_unreadable
        self.unreadable: list[tuple[str, str]] = []
        if reporting:
            self.dataloader.dataset.report_unreadable = True  # set before the workers start

    def run(self) -> dict:
        """mmengine's ``TestLoop.run`` over the readable videos, then the list or the metrics."""
        self.runner.call_hook('before_test')
        self.runner.call_hook('before_test_epoch')
        self.runner.model.eval()
        self.test_loss.clear()
        found: list[tuple[str, str]] = []
        for idx, data_batch in enumerate(self.dataloader):
            if isinstance(data_batch, dict) and UNREADABLE in data_batch:
                found += data_batch.pop(UNREADABLE)
                if not data_batch:
                    continue  # the whole batch was unreadable
            self.run_iter(idx, data_batch)
        self.unreadable = [item for part in all_gather_object(found) for item in part]
        total = len(self.dataloader.dataset)
        if self.unreadable and not self.skip_unreadable:
            shown = '\n  '.join(f'{path}: {reason}' for path, reason in self.unreadable[:SHOW])
            more = f'\n  ... ({len(self.unreadable) - SHOW} more)' if len(self.unreadable) > SHOW else ''
            raise DataError(
                f'{len(self.unreadable)} of the {total} test videos cannot be read; no metric computed '
                f'(fix or remove them, or pass --skip-unreadable to test the others):\n  {shown}{more}'
            )
        metrics = self.evaluator.evaluate(total - len(self.unreadable))
        if self.test_loss:
            metrics.update(_parse_losses(self.test_loss, 'test'))
        self.runner.call_hook('after_test_epoch', metrics=metrics)
        self.runner.call_hook('after_test')
        return metrics
