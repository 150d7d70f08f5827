#!/usr/bin/env python
"""Convert attention checkpoints between softmax, the authors' DnA layouts and dna_mm.

    python tools/model_converters/convert_checkpoint.py softmax-to-dna IN OUT (--config CFG | --num-heads H)
        [--variant qpm_vpm] [--q-neg-scale=1e-4] [--v-neg-scale=-1e-4]
    python tools/model_converters/convert_checkpoint.py dna-to-softmax IN OUT [--layout {timm,mha}]
    python tools/model_converters/convert_checkpoint.py official-to-dna-mm IN OUT [--combine {add,sub}]

``python tools/model_converters/convert_checkpoint.py SUBCOMMAND --help`` lists each one's options.
IN is a local file, a URL or an mmengine prefix (``open-mmlab://...``), always read as a
``weights_only`` load; ``.pth`` and ``.safetensors`` in and out (by suffix). The weights are found
where the code that wrote IN put them: ``state_dict`` (mmengine), ``model`` (+ ``model_ema``:
the authors' ImageNet ``vit/main.py``, DeiT), ``model_state`` (the authors' TimeSformer, PySlowFast),
``module``, or the file itself; each of those is converted, keys keep their prefixes
(``module.``, ``model.``, ...), and everything else in the file (optimizer, epoch, args, ...) is
written back unchanged. A conversion that finds nothing to convert is an error (exit status 2)
that names the layouts it looked for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional

#: where checkpoints keep weights: the model's (mmengine, the authors' vit/main.py, PySlowFast,
#: DeepSpeed-style: ``dna_mm.converters.timesformer.WRAPPER_KEYS``) and the EMA copies DeiT /
#: vit/main.py add; all of them are converted
WRAPPER_KEYS = ('state_dict', 'model', 'module', 'model_state', 'model_ema', 'state_dict_ema')
#: what ``dna_mm.family`` defines, for the command line (a test keeps them equal): the negative
#: branch's initial scales (``NEGATIVE_INIT``) and the combine signs (``COMBINE_SIGNS``); the
#: variants are checked against the family's after parsing (``canonical_variant``)
Q_NEG_SCALE, V_NEG_SCALE = 1e-4, -1e-4
COMBINES = ('add', 'sub')
COMBINE_HELP = (
    "how the authors' code that wrote IN combines the branches: 'add' (pos + α·neg: "
    "their vit/dna_models.py, the ViT their main.py trains, and their TimeSformer "
    "fork) or 'sub' (pos − α·neg: their vit/dna.py, and VisCoP's DnA cross-attention, "
    "whose q_pos_proj / ... keys are refused without 'sub'; converted exactly by negating "
    "α). A wrong choice for qqkvv / qqkv / qkv + q_neg files loads without error but "
    "computes another function"
)


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults in each option's help, descriptions kept as written."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='direction', required=True, metavar='SUBCOMMAND')

    def command(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=summary, description=description, formatter_class=_Formatter)
        cmd.add_argument('src', help='input checkpoint (.pth / .safetensors): path, URL or mmengine prefix')
        cmd.add_argument('dst', type=Path, help='output checkpoint (.pth / .safetensors)')
        cmd.add_argument('--debug', action='store_true', help='print the traceback of an input error')
        return cmd

    s2d = command(
        'softmax-to-dna',
        'give every softmax attention a DnA negative branch',
        'Give every softmax attention (timm qkv/proj or nn.MultiheadAttention keys) a '
        'negative branch: Q- = q_neg_scale * Q, V- = v_neg_scale * V, alpha = 0.5 per '
        'head. The output equals the softmax model to ~1e-4 relative. The head count '
        '(length of alpha) is not in the weights: give --config or --num-heads '
        '(refused without, for variants with alpha).',
    )
    heads = s2d.add_mutually_exclusive_group()
    heads.add_argument('--config', help="model config: the head count is read from model.backbone.num_heads")
    heads.add_argument('--num-heads', type=int, help='heads per attention (length of alpha)')
    s2d.add_argument(
        '--variant',
        default='qpm_vpm',
        help="DnA variant the output is for: dna_mm's name (dna_mm.family.DNA_VARIANTS) or the "
        "paper's (Q±V±, ...)",
    )
    s2d.add_argument('--q-neg-scale', type=float, default=Q_NEG_SCALE, help='Q- = scale * Q')
    s2d.add_argument(
        '--v-neg-scale',
        type=float,
        default=V_NEG_SCALE,
        help='V- = scale * V (a negative scale after "=": --v-neg-scale=-1e-4)',
    )

    d2s = command(
        'dna-to-softmax',
        'drop the negative branch (changes the function)',
        'Drop the negative branch (q_neg, v_neg, alpha) of every DnA attention. This '
        'CHANGES THE FUNCTION: the result is the positive branch alone, a different '
        'model from the DnA one (exactly the softmax model only for a checkpoint that '
        'softmax-to-dna made and nothing trained since).',
    )
    d2s.add_argument(
        '--layout',
        choices=['timm', 'mha'],
        default='timm',
        help="key layout of the result: timm (qkv/proj) or mha "
        "(nn.MultiheadAttention's in_proj/out_proj, e.g. a stock MMAction2 "
        "TimeSformer)",
    )

    off = command(
        'official-to-dna-mm',
        "the authors' DnA checkpoints (github rjccv/DnA) to dna_mm keys",
        "Map the authors' DnA checkpoints (qqkvv / qqkv / qkv + q_neg + v_neg, "
        "neg_scalers) to dna_mm's keys, by meaning. VisCoP files: only the DnA "
        "probe cross-attentions (encoder.interaction_modules.{i}: q_pos_proj, q_neg_proj, "
        "k_proj, v_pos_proj, v_neg_proj, out_proj) are converted, to DnACrossAttention "
        "keys; the SigLIP encoder and the LLM keys pass through unchanged.",
    )
    off.add_argument('--combine', choices=COMBINES, default='add', help=COMBINE_HELP)
    return p.parse_args(argv)


def num_heads_from_config(path: str) -> int:
    """``model.backbone.num_heads`` of a model config.

    Raises:
        ConfigError: the config has no such key (the error names the config).
    """
    from dna_mm.config.build import read_config
    from dna_mm.errors import ConfigError

    cfg = read_config(path)
    backbone = (cfg.get('model') or {}).get('backbone') or {}
    heads = backbone.get('num_heads')
    if not isinstance(heads, int) or heads <= 0:
        raise ConfigError(
            f'{path}: model.backbone.num_heads is {heads!r}, not a positive head count; pass --num-heads'
        )
    return heads


def weight_containers(ckpt: dict) -> list[Optional[str]]:
    """The keys of ``ckpt`` that hold weights (:data:`WRAPPER_KEYS` whose value is a mapping
    of tensors), or ``[None]`` when ``ckpt`` is itself a state dict."""
    import torch

    found = [
        k
        for k in WRAPPER_KEYS
        if isinstance(ckpt.get(k), dict) and any(isinstance(v, torch.Tensor) for v in ckpt[k].values())
    ]
    return found or [None]


def convert_state_dict(args: argparse.Namespace, sd: dict) -> dict:
    """One state dict converted as ``args.direction`` says."""
    from dna_mm.converters import NothingToConvertError, dna_to_softmax, official_to_dna_mm, softmax_to_dna
    from dna_mm.errors import ConfigError

    if args.direction == 'softmax-to-dna':
        heads = args.num_heads
        if heads is None and args.config is not None:
            heads = num_heads_from_config(args.config)
        try:
            return softmax_to_dna(sd, args.q_neg_scale, args.v_neg_scale, args.variant, heads)
        except NothingToConvertError:
            raise
        except ValueError as err:  # no head count, or one that does not divide the width
            hint = '' if heads is not None else ' (give the model config with --config, or --num-heads)'
            raise ConfigError(f'{err}{hint}') from None
    if args.direction == 'dna-to-softmax':
        return dna_to_softmax(sd, layout=args.layout)
    return official_to_dna_mm(sd, combine=args.combine)


def convert(args: argparse.Namespace) -> tuple[Any, dict[Optional[str], tuple[dict, dict]]]:
    """Read ``args.src`` and convert it: ``(checkpoint, {wrapper key: (state dict in, out)})``
    (wrapper ``None``: the file is the state dict).

    Raises:
        UserError: naming ``args.src`` (a :class:`~dna_mm.converters.NothingToConvertError`
            when it has nothing to convert).
    """
    from dna_mm.checkpoint import read_checkpoint
    from dna_mm.errors import DataError, UserError

    ckpt = read_checkpoint(args.src, map_location='cpu')
    if not isinstance(ckpt, dict):
        raise DataError(f'{args.src} holds a {type(ckpt).__name__}, not a checkpoint dict')
    done = {}
    for wrapper in weight_containers(ckpt):
        sd = ckpt[wrapper] if wrapper else ckpt
        try:
            done[wrapper] = (sd, convert_state_dict(args, sd))
        except ValueError as err:  # the converters' errors are about the file's contents
            where = f" (its '{wrapper}' entry)" if wrapper else ''
            kind = type(err) if isinstance(err, UserError) else DataError
            raise kind(f'{args.src}{where}: {err}') from None
    return ckpt, done


def check_variant(args: argparse.Namespace) -> None:
    """``--variant`` one of the DnA family's (:func:`dna_mm.family.canonical_variant`), else a
    :class:`~dna_mm.errors.ConfigError` naming them."""
    from dna_mm.errors import ConfigError
    from dna_mm.family import canonical_variant

    if getattr(args, 'variant', None) is None:
        return
    try:
        canonical_variant(args.variant)
    except ValueError as err:
        raise ConfigError(f'--variant: {err}') from None


def convert_file(args: argparse.Namespace) -> int:
    import torch

    from dna_mm.errors import ConfigError
    from dna_mm.tools.cli import not_an_input, user_file

    check_variant(args)
    user_file(args.src, 'checkpoint')
    not_an_input(str(args.dst), 'DST', dict(checkpoint=str(args.src)))
    ckpt, done = convert(args)
    for wrapper, (sd, new) in done.items():
        added, removed = sorted(set(new) - set(sd)), sorted(set(sd) - set(new))
        where = f" '{wrapper}'" if wrapper else ''
        print(
            f'{args.direction}{where}: {len(sd)} keys in, {len(new)} out; added {len(added)}, '
            f'removed {len(removed)}'
        )
        for title, keys in (('added', added), ('removed', removed)):
            for key in keys[:6]:
                print(f'  {title}: {key}')
            if len(keys) > 6:
                print(f'  {title}: ... ({len(keys) - 6} more)')
    if args.direction == 'dna-to-softmax':
        print(
            '  note: the negative branch was dropped, so the output computes a different '
            'function from the input'
        )
    args.dst.parent.mkdir(parents=True, exist_ok=True)
    if args.dst.suffix == '.safetensors':
        from safetensors.torch import save_file

        if len(done) > 1:
            raise ConfigError(
                f'{args.src} holds {len(done)} state dicts ({", ".join(map(str, done))}); '
                f'a .safetensors file holds one: write a .pth'
            )
        new = next(iter(done.values()))[1]
        save_file({k: v.contiguous() for k, v in new.items()}, str(args.dst))
    else:
        wrapped = {w: new for w, (_, new) in done.items() if w is not None}
        torch.save({**ckpt, **wrapped} if wrapped else done[None][1], args.dst)
    print(f'wrote {args.dst}')
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('convert_checkpoint.py', convert_file, args)


if __name__ == '__main__':
    sys.exit(main())
