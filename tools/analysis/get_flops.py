#!/usr/bin/env python
"""Parameters and GFLOPs of a config's model or a timm model, attention counted.

    python tools/analysis/get_flops.py MODEL [--input-shape C [T] H W] [--cfg-options k=v ...]
        [--model-args k=v ...]

MODEL is a config file or a zoo config (``mmaction::recognition/...``; a recognizer: backbone +
head on one clip; a detector: backbone + neck, ``extract_feat``, on one image) or a timm model
name (``dna_vit_base_patch16_224``, ``vit_base_patch16_224``, ...: the whole model on one
image; ``--model-args attn_cfg.variant=qpm_v`` picks a DnA variant: dotted keys nest, as in
``--cfg-options``). The input shape defaults to the
model's own (``num_frames`` / ``img_size`` of the backbone, timm's ``input_size``).

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
) -> tuple[nn.Module, tuple[int, ...], str, Callable]:
    """The config's model (a file or a zoo config: mmaction::recognition/timesformer/...), its
    input shape, what is traced (in words) and how."""
    from dna_mm.config.build import model_from_config
    from dna_mm.errors import ConfigError

    cfg, model = model_from_config(path, options, clear_pretrained=True)  # no weights are needed to count
    backbone = getattr(model, 'backbone', model)
    if shape is None:  # the backbone's own input size, from the config or the module
        backbone_cfg = cfg.model.get('backbone', cfg.model)
        img_size = backbone_cfg.get('img_size', getattr(backbone, 'img_size', None))
        timm_model = getattr(backbone, 'timm_model', None)  # MMPretrain's TIMMBackbone: timm's own size
        if img_size is None and timm_model is not None:
            img_size = tuple(timm_model.pretrained_cfg['input_size'][1:])
        frames = backbone_cfg.get('num_frames', getattr(backbone, 'num_frames', None))
        if img_size is None:
            raise ConfigError(
                f'{path}: the backbone ({type(backbone).__name__}) sets no img_size; give --input-shape'
            )
        shape = [3, *([frames] if frames else []), *_size(img_size)]
    if hasattr(model, 'cls_head'):  # a recognizer: one clip (or image) through backbone + head
        return model, tuple(shape), 'backbone + head', lambda x: model.cls_head(model.backbone(x))
    if hasattr(model, 'head') and hasattr(model, 'extract_feat'):  # MMPretrain's image classifier
        return model, tuple(shape), 'backbone + neck + head', lambda x: model.head(model.extract_feat(x))
    if hasattr(model, 'extract_feat'):  # a detector: backbone + neck
        return model, tuple(shape), 'backbone + neck (extract_feat)', model.extract_feat
    return model, tuple(shape), 'the whole model', model


def from_timm(
    name: str, shape: list[int] | None, kwargs: dict
) -> tuple[nn.Module, tuple[int, ...], str, Callable]:
    """The timm model (random weights; ``kwargs``' dotted keys nested), its input shape, and the
    whole model traced."""
    from dna_mm.config.timm_models import create_timm_model

    model = create_timm_model(name, kwargs, flag='--model-args')
    return model, tuple(shape or model.pretrained_cfg['input_size']), 'the whole model', model


def count(args: argparse.Namespace) -> int:
    import torch

    import dna_mm  # noqa: F401  (registers the models and the dna_vit_* timm names)
    from dna_mm.analysis.complexity import model_complexity
    from dna_mm.config.timm_models import check_timm_name
    from dna_mm.tools.cli import cfg_options

    if osp.isfile(args.model) or '::' in args.model:
        model, shape, traced, forward = from_config(args.model, args.input_shape, args.cfg_options)
    elif args.model.endswith('.py'):
        raise FileNotFoundError(f'config {args.model} does not exist')
    else:
        check_timm_name(args.model, f'{args.model} is neither a config file nor a timm model')
        model_args = cfg_options(args.model_args) or {}  # 'attn_cfg.variant=qpm_v' -> a dict
        model, shape, traced, forward = from_timm(args.model, args.input_shape, model_args)
    result = model_complexity(model, torch.zeros(1, *shape), forward)
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
