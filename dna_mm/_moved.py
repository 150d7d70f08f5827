"""Old import paths, kept for one release: ``import dna_mm.apis.runner`` still gives the runner
module (now :mod:`dna_mm.engine.runner`), with a ``FutureWarning`` naming the new path.

One table, :data:`MOVED` (old dotted prefix → new); a meta-path finder answers an old name with
the new module itself (one module object under both names, so registrations, ``isinstance`` and
pickles are unchanged). Removed in the next release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Optional, Sequence

MOVED: dict[str, str] = {
    'dna_mm.build': 'dna_mm.config.build',
    'dna_mm.apis.check': 'dna_mm.config.check',
    'dna_mm.apis.config': 'dna_mm.config.prepare',
    'dna_mm.apis.runner': 'dna_mm.engine.runner',
    'dna_mm.apis.global_batch': 'dna_mm.engine.global_batch',
    'dna_mm.apis.distributed': 'dna_mm.engine.distributed',
    'dna_mm.apis.cli': 'dna_mm.tools.cli',
    'dna_mm.apis.over_time': 'dna_mm.over_time.predictor',
    'dna_mm.apis.windows': 'dna_mm.over_time.windows',
    'dna_mm.apis.segments': 'dna_mm.over_time.segments',
    'dna_mm.apis.timeline_files': 'dna_mm.over_time.timeline_files',
    'dna_mm.apis.video_timeline': 'dna_mm.over_time.video_timeline',
    'dna_mm.apis.annotated_video': 'dna_mm.over_time.annotated_video',
    'dna_mm.apis.overlay': 'dna_mm.over_time.overlay',
    'dna_mm.apis.relevance_overlay': 'dna_mm.over_time.relevance_overlay',
    'dna_mm.datasets.frame_stream': 'dna_mm.over_time.frame_stream',
    'dna_mm.datasets.motion_video': 'dna_mm.over_time.motion_video',
    'dna_mm.datasets.preparation': 'dna_mm.preparation',
    'dna_mm.datasets.custom': 'dna_mm.preparation.custom',
    'dna_mm.datasets.coco_check': 'dna_mm.preparation.coco_check',
    'dna_mm.datasets.imagenet': 'dna_mm.preparation.imagenet',
    'dna_mm.datasets.decoding_check': 'dna_mm.preparation.decoding_check',
    'dna_mm.datasets.synthetic': 'dna_mm.synthetic.motion_clips',
    'dna_mm.datasets.synthetic_video': 'dna_mm.synthetic.videos',
    'dna_mm.datasets.synthetic_coco': 'dna_mm.synthetic.coco_shapes',
}


def warn_moved(old: str, new: str) -> None:
    """The one ``FutureWarning`` of an old name, pointing at the caller's import."""
    warnings.warn(f'{old} moved to {new}; the old name goes in the next release', FutureWarning, stacklevel=3)


def new_name(old: str) -> Optional[str]:
    """``old``'s new dotted name (a moved module or a module under a moved package), else None."""
    parts = old.split('.')
    for n in range(len(parts), 1, -1):
        new = MOVED.get('.'.join(parts[:n]))
        if new is not None:
            return '.'.join([new, *parts[n:]])
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warn_moved(spec.name, self.new)
        module = importlib.import_module(self.new)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the new module ran when it was imported); the import system has just
        given it the old name's spec, and it gets its own back."""
        module.__spec__ = self.own_spec


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds an old module name and loads it as the new module."""

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]] = None, target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new), is_package=True)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once): before the path finder, which would
    otherwise load a second copy of a moved file under its old name from the new folder."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
