"""CPU latency of exported models, PyTorch eager against onnxruntime: the work of
``tools/benchmarks/benchmark_onnx.py``, whose docstring says what is measured and how.

:func:`benchmark` exports each model (:mod:`dna_mm.deployment`: its config's model with its
initial weights, or a timm model) and times both runtimes in turns (:mod:`.timing`) per thread
count and batch size, one markdown row each.
"""

from __future__ import annotations

import functools
import os
import platform
import tempfile
from typing import Callable, Optional, Sequence

import torch

from ..config.build import read_config
from ..config.timm_models import check_timm_name, timm_name
from ..deployment import Exportable, export, load_exportable, onnx_session, verify
from ..deployment.onnx import example_input
from .timing import median_ms, time_in_turns


def check_models(models: Sequence[str]) -> None:
    """Each of ``models`` names a model, before anything is measured: a config that can be read
    (a file, or ``dna_mm::…`` / ``mmaction::…``), a timm name timm knows. The first that does not
    is a :class:`~dna_mm.errors.UserError` naming it (``MissingFileError``, ``ConfigError``)."""
    for model in models:
        name = timm_name(model)
        if name is None:
            read_config(model)
        else:
            check_timm_name(name)


def model_variants(
    model: str, attentions: Optional[Sequence[str]] = None
) -> list[tuple[str, Optional[dict]]]:
    """The rows of one model: ``(label, --cfg-options)``; a config once per attention of
    ``attentions`` (its backbone's ``attn_cfg``, a name with a method's settings too:
    ``'dna:apm+gated'``; labelled by its file name, a package's ``dna_mm::NAME.py`` too), or once as
    it is written (``None``); a ``timm:`` model once."""
    name = timm_name(model)
    if name is not None:
        return [(name, None)]
    stem = os.path.splitext(os.path.basename(model.rpartition('::')[2]))[0]
    if attentions is None:
        return [(stem, None)]
    return [(f'{stem} ({attn})', {'model.backbone.attn_cfg': attn}) for attn in attentions]


def latency_rows(
    name: str,
    ex: Exportable,
    path: str,
    threads: Sequence[int],
    batches: Sequence[int],
    reps: int,
    echo: Callable[..., None] = print,
) -> list[str]:
    """Table rows of one model, exported to ``path`` (dynamic batch) and checked against PyTorch;
    each row said through ``echo`` as it comes."""
    export(ex, path, dynamic_batch=True)
    diff = max(verify(ex, path, (1, 2)).values())
    rows = []
    for n in threads:
        torch.set_num_threads(n)
        session = onnx_session(path, n)

        def eager(x: torch.Tensor) -> None:
            with torch.inference_mode():
                ex.model(x)

        def ort(x: torch.Tensor, session=session) -> None:
            session.run(['logits'], {'inputs': x.numpy()})

        for b in batches:
            x = example_input(ex.input_shape, b)
            calls = {'eager': functools.partial(eager, x), 'ort': functools.partial(ort, x)}
            times = time_in_turns(calls, reps, warmup=3)
            te, to = (median_ms(times[k]) for k in ('eager', 'ort'))
            rows.append(f'| {name} | {b} | {n} | {te:.2f} | {to:.2f} | {te / to:.2f}× | {diff:.1e} |')
            echo(rows[-1], flush=True)
    return rows


def benchmark(
    models: Sequence[str],
    attentions: Optional[Sequence[str]],
    batches: Sequence[int],
    threads: Sequence[int],
    reps: int,
    echo: Callable[..., None] = print,
) -> str:
    """The markdown table of every model (a config: one row set per attention of ``attentions``,
    set as its backbone's ``attn_cfg``, or one as written for ``None``; ``timm:<name>``: one),
    said through ``echo`` as it comes; returns it whole. A model that names none is an error before the table
    (:func:`check_models`)."""
    check_models(models)
    header = [
        f'torch {torch.__version__}, onnxruntime {__import__("onnxruntime").__version__}, '
        f'{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs; '
        f'median of {reps} calls',
        '',
        '| model | batch | threads | PyTorch eager (ms) | onnxruntime (ms) | speed-up | max abs diff |',
        '|---|---:|---:|---:|---:|---:|---:|',
    ]
    echo('\n'.join(header), flush=True)
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            for name, opts in model_variants(model, attentions):
                ex = load_exportable(model, None, opts)
                path = os.path.join(tmp, f'model{len(rows)}.onnx')
                rows += latency_rows(name, ex, path, threads, batches, reps, echo)
    return '\n'.join(header + rows) + '\n'
