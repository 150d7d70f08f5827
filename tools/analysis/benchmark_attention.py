#!/usr/bin/env python
"""fwd+bwd time and peak memory of the attention family at TimeSformer-B shapes.

    python tools/analysis/benchmark_attention.py [--device cpu cuda] [--reps 10] [--out FILE.md]

Shapes (12 heads of 64, C = 768; batch = one 8-frame clip at 224²):
spatial ``[8, 197, 768]``, temporal ``[196, 8, 768]``, joint ``[1, 1569, 768]``.
Two scopes: ``core`` (the attention on precomputed head tensors: what DnA changes; the
floor for two branches is 2.0×) and ``module`` (projections included: what a model pays).
Methods: softmax (SDPA), DnA Q±V± fast (two SDPA calls), DnA eager (explicit maps, the
authors' formulation), Diff (SDPA), Cog (explicit: no SDPA form).

Each (device, shape, method) runs in a fresh subprocess so the peak memory is its own:
CUDA ``max_memory_allocated``; CPU the growth of the process's peak RSS over the baseline
taken after the module and inputs exist. Times are medians over ``--reps`` after warm-up.
Everything is reported as a ratio to softmax measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time

import torch

SHAPES = {'spatial': (8, 197), 'temporal': (196, 8), 'joint': (1, 1569)}
METHODS = {
    'softmax': dict(type='SoftmaxAttention'),
    'dna_fast': dict(type='DnAAttention'),
    'dna_eager': dict(type='DnAAttention', fused_attn=False),
    'diff': dict(type='DiffAttention'),
    'cog': dict(type='CogAttention'),
}
C, H = 768, 12


def _sync(device: str) -> None:
    if device == 'cuda':
        torch.cuda.synchronize()


def worker(device: str, shape: str, method: str, reps: int, dtype: str, scope: str) -> dict:
    """One measurement in this process (called through ``--worker``).

    ``scope='module'``: the whole module (projections included) on tokens ``[B, N, C]``;
    ``scope='core'``: only :meth:`core` on precomputed head tensors (the part DnA changes).
    """
    import dna_mm  # noqa: F401
    from mmengine.registry import MODELS
    torch.manual_seed(0)
    b, n = SHAPES[shape]
    module = MODELS.build(dict(METHODS[method], embed_dims=C, num_heads=H)).to(device)
    x = torch.randn(b, n, C, device=device, requires_grad=True)
    heads = {k: t.detach().requires_grad_() for k, t in module.project(x, None).items()}
    amp = torch.autocast(device, dtype=getattr(torch, dtype)) if dtype != 'float32' else None

    def forward() -> torch.Tensor:
        return module(x) if scope == 'module' else module.core(**heads)[0]

    def step() -> None:
        if amp:
            with amp:
                y = forward()
        else:
            y = forward()
        y.float().sum().backward()

    _sync(device)
    if device == 'cuda':
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:  # before the first step, which reaches the peak (later steps reuse freed memory)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    step()
    times = []
    for _ in range(reps + 1):
        module.zero_grad(set_to_none=True)
        for t in (x, *heads.values()):
            t.grad = None
        _sync(device)
        t = time.perf_counter()
        step()
        _sync(device)
        times.append(time.perf_counter() - t)
    if device == 'cuda':
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    return dict(ms=1e3 * statistics.median(times[1:]), peak_mb=max(peak, 0) / 2**20)


def measure(device: str, shape: str, method: str, reps: int, dtype: str, scope: str) -> dict:
    cmd = [sys.executable, __file__, '--worker', device, shape, method, '--reps', str(reps),
           '--dtype', dtype, '--scope', scope]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f'{device}/{shape}/{method} failed:\n{out.stderr[-2000:]}')
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(device: str, rows: dict, dtype: str, scope: str) -> str:
    what = 'whole module' if scope == 'module' else 'attention core (after the projections)'
    lines = [f'**{device}, {what}** ({dtype}; {_device_name(device)}): fwd+bwd time / peak '
             'memory as ratios to softmax (absolute softmax figures in brackets)', '',
             '| shape | ' + ' | '.join(METHODS) + ' | DnA eager / fast |',
             '|---|' + '---|' * (len(METHODS) + 1)]
    for shape, res in rows.items():
        ref = res['softmax']
        cells = []
        for m in METHODS:
            if m == 'softmax':
                cells.append(f"1.00× [{ref['ms']:.1f} ms, {ref['peak_mb']:.0f} MB]")
            else:
                mem = res[m]['peak_mb'] / ref['peak_mb'] if ref['peak_mb'] > 0 else float('nan')
                cells.append(f"{res[m]['ms'] / ref['ms']:.2f}× / {mem:.2f}× mem")
        speed = res['dna_eager']['ms'] / res['dna_fast']['ms']
        lines.append(f'| {shape} {list(SHAPES[shape]) + [C]} | ' + ' | '.join(cells) + f' | {speed:.2f}× |')
    return '\n'.join(lines)


def _device_name(device: str) -> str:
    if device == 'cuda':
        return torch.cuda.get_device_name()
    return f'{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads'


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--device', nargs='+', default=None, help='default: cpu, and cuda if present')
    p.add_argument('--reps', type=int, default=10)
    p.add_argument('--dtype', default='float32', choices=['float32', 'bfloat16', 'float16'])
    p.add_argument('--shapes', nargs='+', default=list(SHAPES), choices=list(SHAPES))
    p.add_argument('--scope', nargs='+', default=['core', 'module'], choices=['core', 'module'])
    p.add_argument('--out', help='also write the tables (markdown) here')
    p.add_argument('--worker', nargs=3, metavar=('DEVICE', 'SHAPE', 'METHOD'), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker, reps=args.reps, dtype=args.dtype,
                                scope=args.scope[0])))
        return
    devices = args.device or (['cpu'] + (['cuda'] if torch.cuda.is_available() else []))
    print(f'torch {torch.__version__}; fwd+bwd median of {args.reps}; C={C}, H={H}', flush=True)
    tables = []
    for device in devices:
        for scope in args.scope:
            rows = {}
            for shape in args.shapes:
                rows[shape] = {}
                for method in METHODS:
                    rows[shape][method] = r = measure(device, shape, method, args.reps,
                                                      args.dtype, scope)
                    print(f'  {device:4s} {scope:6s} {shape:8s} {method:9s} {r["ms"]:9.2f} ms  '
                          f'{r["peak_mb"]:8.1f} MB', flush=True)
            tables.append(table(device, rows, args.dtype, scope))
            print('\n' + tables[-1] + '\n', flush=True)
    if args.out:
        with open(args.out, 'w') as f:
            f.write('\n\n'.join(tables) + '\n')


if __name__ == '__main__':
    main()
