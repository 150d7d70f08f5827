"""A user's config → its model, checked first: what the tools that build a model without training
it (inference, the ONNX export, the analyses, FLOPs) read a config through.

    cfg, model = model_from_config('my_child.py', {'model.backbone.attn_cfg': 'dna:apm'})

A value the model cannot take is one :class:`~dna_mm.errors.ConfigError` naming its key, as
``tools/train.py`` names it (:func:`~dna_mm.config.check.model_problems`, the model's part of the
check a run makes): ``model.backbone.attn_cfg.variant: SoftmaxAttention takes no argument
'variant'``, where the build alone would name the class but not the key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..errors import ConfigError
from .build import ConfigSource, build_part, read_config
from .check import model_problems

if TYPE_CHECKING:
    from mmengine.config import Config
    from torch import nn


def model_from_config(
    config: ConfigSource,
    cfg_options: Optional[dict] = None,
    *,
    part: str = 'model',
    clear_pretrained: bool = False,
) -> tuple[Config, nn.Module]:
    """``(config, its model or part)``: :func:`~.build.read_config`, the model's values checked
    (:func:`~.check.model_problems` for a model that is not trained here), then
    :func:`~.build.build_part` (see both for the arguments).

    Raises:
        ConfigError: the model's wrong values, one message each, joined by ``'; '``.
    """
    cfg = read_config(config, cfg_options, clear_pretrained=clear_pretrained)
    problems = model_problems(cfg, train=False)
    if problems:
        raise ConfigError('; '.join(problems))
    return cfg, build_part(cfg, part)
