"""Check a COCO instance annotation file against its images: :func:`check_coco`, which lives in
:mod:`dna_mm.datasets.coco_report` since the detection dataset runs it when it loads a file
(``tools/data/coco/check_annotations.py`` prints its whole report)."""

from __future__ import annotations

from ..datasets.coco_report import TOLERANCE, CocoReport, check_coco

__all__ = ['TOLERANCE', 'CocoReport', 'check_coco']
