#!/usr/bin/env python
"""Convert attention checkpoints between softmax, the authors' DnA layouts and dna_mm.

    python tools/convert_checkpoint.py softmax-to-dna vit_b.pth dna_vit_b.pth [--num-heads 12]
    python tools/convert_checkpoint.py dna-to-softmax dna.safetensors softmax.safetensors
    python tools/convert_checkpoint.py official-to-dna-mm authors_dna_vit.pth dna_vit.pth

``.pth`` and ``.safetensors`` in and out (by suffix). In a ``.pth`` that wraps the weights
(``state_dict`` / ``model`` / ``module`` key), only the weights are converted and the rest
(meta, ...) is kept. Files are read with ``weights_only=True``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from dna_mm.converters import dna_to_softmax, official_to_dna_mm, softmax_to_dna
from dna_mm.utils import load_checkpoint_file

WRAPPER_KEYS = ('state_dict', 'model', 'module')


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('direction', choices=['softmax-to-dna', 'dna-to-softmax', 'official-to-dna-mm'])
    p.add_argument('src', type=Path, help='input checkpoint (.pth / .safetensors)')
    p.add_argument('dst', type=Path, help='output checkpoint (.pth / .safetensors)')
    p.add_argument('--variant', default='qpm_vpm', help='DnA variant (softmax-to-dna)')
    p.add_argument('--num-heads', type=int, default=None,
                   help='heads per attention (length of alpha); default width // 64')
    p.add_argument('--q-neg-scale', type=float, default=1e-4)
    p.add_argument('--v-neg-scale', type=float, default=-1e-4)
    p.add_argument('--layout', choices=['timm', 'mha'], default='timm',
                   help='key layout of the softmax result (dna-to-softmax)')
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.src.is_file():
        print(f'convert_checkpoint: {args.src} does not exist', file=sys.stderr)
        return 2
    ckpt = load_checkpoint_file(str(args.src), map_location='cpu')
    wrapper = next((k for k in WRAPPER_KEYS if isinstance(ckpt, dict) and k in ckpt), None)
    sd = ckpt[wrapper] if wrapper else ckpt
    if args.direction == 'softmax-to-dna':
        new = softmax_to_dna(sd, args.q_neg_scale, args.v_neg_scale, args.variant, args.num_heads)
    elif args.direction == 'dna-to-softmax':
        new = dna_to_softmax(sd, layout=args.layout)
    else:
        new = official_to_dna_mm(sd)
    added, removed = sorted(set(new) - set(sd)), sorted(set(sd) - set(new))
    print(f'{args.direction}: {len(sd)} keys in, {len(new)} out; added {len(added)}, '
          f'removed {len(removed)}')
    for title, keys in (('added', added), ('removed', removed)):
        for key in keys[:6]:
            print(f'  {title}: {key}')
        if len(keys) > 6:
            print(f'  {title}: ... ({len(keys) - 6} more)')
    args.dst.parent.mkdir(parents=True, exist_ok=True)
    if args.dst.suffix == '.safetensors':
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in new.items()}, str(args.dst))
    else:
        torch.save({**ckpt, wrapper: new} if wrapper else new, args.dst)
    print(f'wrote {args.dst}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
