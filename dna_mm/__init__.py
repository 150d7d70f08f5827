"""dna_mm: DnA (Denoising Attention) for video understanding and detection on OpenMMLab.

``import dna_mm`` registers the attention family in MMEngine's root ``MODELS`` registry (found
from the ``mmaction`` and ``mmdet`` scopes), the TimeSformer backbone in MMAction2's, the
``dna_vit_*`` timm models, and the runner, loops, hooks, datasets, transforms and metrics: every
``type`` that a config dna_mm ships, writes or saves names. It also makes every mmengine
checkpoint load a ``weights_only`` load (:mod:`dna_mm.checkpoint.sources`) and lets mmengine
read ``mmaction::`` bases and ``dna_mm::`` ones (the shipped configs)
(:mod:`dna_mm.utils.mim_compat`); ``docs/checkpoint_safety.md`` lists each change.
"""

# Order matters: mmcv checked first (it is not an install_requires: dna_mm/utils/mmcv_ops.py),
# then safe loading and the mmengine patch before anything is built.
# isort: off
from .utils.mmcv_ops import check_mmcv

check_mmcv()

from .checkpoint import install as install_safe_checkpoint_loading  # noqa: E402
from .utils.mim_compat import patch_mmengine  # noqa: E402

install_safe_checkpoint_loading()
patch_mmengine()

from . import converters, datasets, engine, evaluation, models  # noqa: E402

from importlib.util import find_spec as _find_spec  # noqa: E402

if _find_spec('mmdet') is not None:  # mmdet's OPTIM_WRAPPER_CONSTRUCTORS
    from .engine import layer_decay  # noqa: E402,F401  (LayerDecayOptimizerConstructor)

# last: the runner and the hooks that tools/train.py writes into a run's config (DnARunner,
# GlobalBatchHook), so that every type a dna_mm config names is registered by this one import
from . import apis  # noqa: E402
# isort: on

__version__ = '0.1.0'
__all__ = ["apis", "checkpoint", "converters", "datasets", "engine", "evaluation", "models", "__version__"]
