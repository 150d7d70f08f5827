"""mmcv with or without its compiled ops.

Video recognition (TimeSformer, ``with_attention``, timm, the ImageNet ViT, the tools and the
analyses) runs on mmcv without its compiled ops: mmcv-lite, or mmcv built with
``MMCV_WITH_OPS=0`` (what ``make demo`` installs, in seconds). MMDetection's detectors import
``mmcv.ops`` (RoIAlign, nms) and need the ops compiled (``make install``). mmcv is therefore not
an ``install_requires`` of dna_mm (``requirements/mmcv.txt``): ``import dna_mm`` checks it here.
"""

from __future__ import annotations

import warnings
from importlib import metadata
from importlib.util import find_spec

#: the mmcv releases dna_mm runs with (MMAction2 1.1 takes mmcv < 2.1)
MMCV_RANGE = ('2.0.1', '2.1')
#: what builds mmcv's compiled ops into the project's environment
BUILD_OPS = "'make install' (or pip install mmcv==2.0.1 built from its sdist: docs/installation.md)"


def has_ops() -> bool:
    """Whether mmcv's compiled extension is installed (without importing it)."""
    return find_spec('mmcv') is not None and find_spec('mmcv._ext') is not None


def missing_ops_line(what: str = "MMDetection's detectors") -> str:
    """One line for a part that needs mmcv's compiled ops where mmcv has none."""
    return (
        f"{what}: mmcv's compiled ops are needed (RoIAlign, nms), and this environment's mmcv has "
        f'none (mmcv-lite, or mmcv built with MMCV_WITH_OPS=0): build them with {BUILD_OPS}'
    )


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split('+')[0].split('.')[:3] if p.isdigit())


def check_mmcv() -> None:
    """Raise an ``ImportError`` of one line unless mmcv (either distribution) is installed in
    :data:`MMCV_RANGE`."""
    low, high = MMCV_RANGE
    if find_spec('mmcv') is None:
        raise ImportError(
            f'dna_mm needs mmcv >= {low}, < {high}: `pip install mmcv-lite==2.0.1` runs video '
            f'recognition; MMDetection needs mmcv with its compiled ops, {BUILD_OPS}'
        )
    for dist in ('mmcv', 'mmcv-lite'):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        if not _version(low) <= _version(version) < _version(high):
            raise ImportError(f'dna_mm needs mmcv >= {low}, < {high}; this environment has {dist} {version}')
        return


def quiet_missing_ops_warning() -> None:
    """Without the ops, mmcv warns at every import of its transformer bricks (every process:
    the tools, each loader worker) that ``MultiScaleDeformableAttention`` could not be imported.
    Nothing dna_mm runs uses it, and what needs the ops stops with :func:`missing_ops_line`; so
    that warning, and only it, is not shown."""
    if not has_ops():
        warnings.filterwarnings(
            'ignore',
            message=r'Fail to import ``MultiScaleDeformableAttention``',
            category=UserWarning,
            module=r'mmcv\.cnn\.bricks\.transformer',
        )
