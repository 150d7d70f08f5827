"""MMDetection's ``DumpDetResults`` (the predictions' pickle, masks as RLE) written whole or not at
all; imported by :func:`~dna_mm.evaluation.dump.dump_evaluator` for a detector (it imports mmdet)."""

from __future__ import annotations

from mmdet.evaluation import DumpDetResults
from mmengine.registry import METRICS

from .dump import WrittenWhole


@METRICS.register_module()
class DumpDetResultsWhole(WrittenWhole, DumpDetResults):
    """MMDetection's ``DumpDetResults``, written whole."""
