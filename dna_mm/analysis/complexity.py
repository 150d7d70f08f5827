"""Parameters and FLOPs with MMEngine's complexity analysis, attention included.

MMEngine's :class:`~mmengine.analysis.FlopAnalyzer` (fvcore's counter) traces the model with
``torch.jit`` and counts each op by a handle; it has none for
``aten::scaled_dot_product_attention``, so every fast path (softmax's one SDPA call, DnA's two,
Diff's two) would count as free and DnA would cost the same as softmax. :func:`sdpa_flop_jit`
is that handle: for ``q [..., M, d]``, ``k [..., N, d]``, ``v [..., N, dv]``

    FLOPs = prod(...) · M · N · (d + dv)        (QKᵀ, then A·V)

Conventions are fvcore's: one multiply-add = one FLOP; matmuls, convolutions and norms are
counted, softmax, the mask / bias additions and element-wise ops (α·O−) are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any, Callable

import torch
import torch.nn as nn
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape

SDPA_OP = 'aten::scaled_dot_product_attention'


def sdpa_flop_jit(inputs: list[Any], outputs: list[Any]) -> int:
    """FLOPs of one ``scaled_dot_product_attention`` call (see the module docstring)."""
    q, k, v = (get_shape(x) for x in inputs[:3])
    *batch, m, d = q
    n, dv = k[-2], v[-1]
    return prod(batch) * m * n * (d + dv)


class _Call(nn.Module):
    """A module whose forward is ``fn`` (what is traced), holding ``model`` for its names."""

    def __init__(self, model: nn.Module, fn: Callable[[torch.Tensor], Any]) -> None:
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, x: torch.Tensor) -> Any:
        return self.fn(x)


@dataclass
class Complexity:
    """What :func:`model_complexity` measured."""

    params: int
    flops: int
    unsupported: dict[str, int] = field(default_factory=dict)  # op → calls not counted

    def summary(self) -> str:
        """``<params> M params`` and ``<flops> GFLOPs``, two decimals."""
        return f'{self.params / 1e6:.2f} M params\n{self.flops / 1e9:.2f} GFLOPs'


def model_complexity(
    model: nn.Module, inputs: torch.Tensor, forward: Callable[[torch.Tensor], Any] | None = None
) -> Complexity:
    """Parameters of ``model`` and FLOPs of ``forward(inputs)`` (default ``model(inputs)``).

    Args:
        model: The model (all its parameters are counted).
        inputs: One input batch.
        forward: What to trace, e.g. ``lambda x: det.extract_feat(x)``.

    Returns:
        The counts, and the ops the tracer met that have no handle (reported, not guessed).
    """
    model.eval()
    analyzer = FlopAnalyzer(_Call(model, forward or model), (inputs,))
    analyzer.set_op_handle(**{SDPA_OP: sdpa_flop_jit})
    analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    with torch.no_grad():
        flops = analyzer.total()
    return Complexity(parameter_count(model)[''], int(flops), dict(analyzer.unsupported_ops()))
