#!/usr/bin/env python
"""Parameters and GFLOPs of a config's model or a timm model, attention counted.

    python tools/analysis/get_flops.py MODEL [--input-shape C [T] H W] [--cfg-options k=v ...]
        [--model-args k=v ...]

MODEL is a config file or a zoo config (``mmaction::recognition/...``; a recognizer: backbone +
head on one clip; a detector: backbone + neck, ``extract_feat``, on one image) or a timm model
name (``dna_vit_base_patch16_224``, ``vit_base_patch16_224``, ...: the whole model on one
image; ``--model-args attn_cfg.variant=qpm_v`` picks a DnA variant: dotted keys nest, as in
``--cfg-options``). The input shape defaults to the
model's own (``num_frames`` / ``img_size`` of the backbone, timm's ``input_size``); one the model
does not take (``C H W`` to a video model, a size its position embeddings or patches do not fit)
is one line naming the model's own.

Counting (fvcore's, through MMEngine's ``FlopAnalyzer``): one multiply-add = one FLOP;
matmuls, convolutions and norms count, softmax and element-wise ops do not; every
``scaled_dot_product_attention`` call counts ``M·N·(d + dv)`` per head
(:mod:`dna_mm.analysis.complexity`). Ops the tracer met but cannot count are listed.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import torch.nn as nn

    from dna_mm.errors import ConfigError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='Parameters and GFLOPs (dna_mm)')
    p.add_argument('model', help='a config file or a timm model name')
    p.add_argument(
        '--input-shape',
        type=int,
        nargs='+',
        metavar='N',
        help='one input without the batch: C H W (images) or C T H W (clips)',
    )
    p.add_argument(
        '--cfg-options', nargs='+', metavar='KEY=VALUE', help='config: override settings, key=value'
    )
    p.add_argument(
        '--model-args',
        nargs='+',
        metavar='KEY=VALUE',
        default={},
        help='timm: create_model keyword arguments (dotted keys nest), e.g. attn_cfg.variant=qpm_v',
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if args.input_shape is not None and len(args.input_shape) not in (3, 4):
        p.error(f'--input-shape takes C H W or C T H W, got {args.input_shape}')
    return args


def _size(value: Any) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


def from_config(
    path: str, shape: list[int] | None, options: dict | None
) -> tuple[nn.Module, tuple[int, ...], str, Callable, tuple[int, ...] | None]:
    """The config's model (a file or a zoo config: mmaction::recognition/timesformer/...), its
    input shape, what is traced (in words) and how, and the model's own input shape (``None``
    where the config and the module name no ``img_size``)."""
    from dna_mm.config.model import model_from_config
    from dna_mm.errors import ConfigError

    cfg, model = model_from_config(path, options, clear_pretrained=True)  # no weights are needed to count
    backbone = getattr(model, 'backbone', model)
    # the backbone's own input size, from the config or the module
    backbone_cfg = cfg.model.get('backbone', cfg.model)
    img_size = backbone_cfg.get('img_size', getattr(backbone, 'img_size', None))
    timm_model = getattr(backbone, 'timm_model', None)  # MMPretrain's TIMMBackbone: timm's own size
    if img_size is None and timm_model is not None:
        img_size = tuple(timm_model.pretrained_cfg['input_size'][1:])
    frames = backbone_cfg.get('num_frames', getattr(backbone, 'num_frames', None))
    channels = backbone_cfg.get('in_channels', 3)
    own = None
    if img_size is not None:
        own = (channels if isinstance(channels, int) else 3, *([frames] if frames else []), *_size(img_size))
    elif shape is None:
        raise ConfigError(
            f'{path}: the backbone ({type(backbone).__name__}) sets no img_size; give --input-shape'
        )
    shape = tuple(shape or own)
    if hasattr(model, 'cls_head'):  # a recognizer: one clip (or image) through backbone + head
        return model, shape, 'backbone + head', lambda x: model.cls_head(model.backbone(x)), own
    if hasattr(model, 'head') and hasattr(model, 'extract_feat'):  # MMPretrain's image classifier
        return model, shape, 'backbone + neck + head', lambda x: model.head(model.extract_feat(x)), own
    if hasattr(model, 'extract_feat'):  # a detector: backbone + neck
        return model, shape, 'backbone + neck (extract_feat)', model.extract_feat, own
    return model, shape, 'the whole model', model, own


def from_timm(
    name: str, shape: list[int] | None, kwargs: dict
) -> tuple[nn.Module, tuple[int, ...], str, Callable, tuple[int, ...]]:
    """The timm model (random weights; ``kwargs``' dotted keys nested), its input shape, the
    whole model traced, and its own input shape (timm's ``input_size``)."""
    from dna_mm.config.timm_models import create_timm_model

    model = create_timm_model(name, kwargs, flag='--model-args')
    own = tuple(model.pretrained_cfg['input_size'])
    return model, tuple(shape or own), 'the whole model', model, own


def _axes(shape: tuple[int, ...]) -> str:
    """``'C H W = 3 224 224'`` or ``'C T H W = 3 8 224 224'``."""
    return f'{"C T H W" if len(shape) == 4 else "C H W"} = {" ".join(map(str, shape))}'


def shape_mistake(
    shape: tuple[int, ...], own: tuple[int, ...] | None, err: Exception | None = None
) -> ConfigError | None:
    """The :class:`~dna_mm.errors.ConfigError` of an ``--input-shape`` the model does not take,
    naming the model's own shape ``own``; ``None`` where it is not the shape's mistake (``own``
    unknown, or ``shape`` is ``own``). Without ``err`` (before the trace), a shape with other axes
    or channels than ``own``; with ``err`` (what the trace of ``shape`` raised), any other shape
    (a size or frame count the model's position embeddings or patch grid do not fit), the
    error's first line added."""
    from dna_mm.errors import ConfigError

    if own is None or tuple(shape) == tuple(own):
        return None
    if err is None and len(shape) == len(own) and shape[0] == own[0]:
        return None
    why = f' ({type(err).__name__}: {str(err).strip().splitlines()[0][:200]})' if err is not None else ''
    given = ' '.join(map(str, shape))
    return ConfigError(f'--input-shape {given}: this model takes {_axes(own)}{why}')


def count(args: argparse.Namespace) -> int:
    """Print the counts of ``args.model``. An ``--input-shape`` below 1 is one line before any
    model is built; one the model does not take (other axes or channels than its own, or a size
    or frame count its trace refuses) is one line naming the model's own shape
    (:func:`shape_mistake`)."""
    import torch

    import dna_mm  # noqa: F401  (registers the models and the dna_vit_* timm names)
    from dna_mm.analysis.complexity import model_complexity
    from dna_mm.config.timm_models import check_timm_name
    from dna_mm.errors import UserError
    from dna_mm.tools.cli import cfg_options
    from dna_mm.utils.tool_runs import at_least

    at_least({'--input-shape': args.input_shape})
    if osp.isfile(args.model) or '::' in args.model:
        model, shape, traced, forward, own = from_config(args.model, args.input_shape, args.cfg_options)
    elif args.model.endswith('.py'):
        raise FileNotFoundError(f'config {args.model} does not exist')
    else:
        check_timm_name(args.model, f'{args.model} is neither a config file nor a timm model')
        model_args = cfg_options(args.model_args) or {}  # 'attn_cfg.variant=qpm_v' -> a dict
        model, shape, traced, forward, own = from_timm(args.model, args.input_shape, model_args)
    mistake = shape_mistake(shape, own)
    if mistake is not None:
        raise mistake
    try:
        result = model_complexity(model, torch.zeros(1, *shape), forward)
    except (
        AssertionError,
        RuntimeError,
        ValueError,
    ) as err:  # a size its layers refuse (einops: a RuntimeError)
        mistake = None if isinstance(err, UserError) else shape_mistake(shape, own, err)
        if mistake is None:
            raise
        raise mistake from err
    print(f'input shape: {list(shape)} (batch 1); FLOPs of {traced}, parameters of the whole model')
    print(result.summary())
    if result.unsupported:
        ops = ', '.join(f'{op} ×{n}' for op, n in sorted(result.unsupported.items()))
        print(f'not counted (no handle, as in fvcore): {ops}')
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('get_flops.py', count, args)


if __name__ == '__main__':
    sys.exit(main())
