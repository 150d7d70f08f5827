"""dna_mm: DnA (Denoising Attention) for video understanding and detection on OpenMMLab.

``import dna_mm`` registers the attention family in MMEngine's root ``MODELS`` registry (found
from the ``mmaction`` and ``mmdet`` scopes), the TimeSformer backbone in MMAction2's, the
``dna_vit_*`` timm models, and the runner, loops, hooks, datasets, transforms and metrics: every
``type`` that a config dna_mm ships, writes or saves names. It also makes every mmengine
checkpoint load a ``weights_only`` load (:mod:`dna_mm.checkpoint.sources`) and lets mmengine
read ``mmaction::`` bases and ``dna_mm::`` ones (the shipped configs)
(:mod:`dna_mm.utils.mim_compat`) and merge a child config's keys into an attention its base gives
by name (:mod:`dna_mm.config.inheritance`); ``docs/checkpoint_safety.md`` lists each change.
"""

# Order matters: mmcv checked first (it is not an install_requires: dna_mm/utils/mmcv_ops.py) and
# its missing-ops warning quieted before mmcv's bricks are imported, then safe loading and the
# mmengine patch before anything is built.
# isort: off
from .utils.mmcv_ops import check_mmcv, quiet_missing_ops_warning

check_mmcv()
quiet_missing_ops_warning()

from .checkpoint import install as install_safe_checkpoint_loading  # noqa: E402
from .utils.mim_compat import patch_mmengine  # noqa: E402

install_safe_checkpoint_loading()
patch_mmengine()

from . import converters, datasets, engine, evaluation, models  # noqa: E402

from importlib.util import find_spec as _find_spec  # noqa: E402

if _find_spec('mmdet') is not None:  # mmdet's OPTIM_WRAPPER_CONSTRUCTORS
    from .engine import layer_decay  # noqa: E402,F401  (LayerDecayOptimizerConstructor)

from . import config  # noqa: E402
from .config.inheritance import install as _attention_names_in_bases  # noqa: E402

_attention_names_in_bases()  # a child config sets keys of an attention its base names by name
from ._moved import install as _keep_old_import_paths  # noqa: E402

_keep_old_import_paths()  # dna_mm.apis.runner and the other paths of 0.1.0, for one release
# isort: on

__version__ = '0.1.0'


def __getattr__(name: str):
    """``dna_mm.apis`` (inference) imported when first used: a training run does not load it."""
    if name == 'apis':
        from importlib import import_module

        return import_module('.apis', __name__)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = [
    "apis",
    "checkpoint",
    "config",
    "converters",
    "datasets",
    "engine",
    "evaluation",
    "models",
    "__version__",
]
