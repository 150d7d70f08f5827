"""One rule for "the same value up to round-off" in the tests: the tolerance comes from the
dtype's machine epsilon and the magnitude of the reference values, never from a fixed number.

    |actual - expected| <= ulps · eps(dtype) · (magnitude + |expected|)      (every element)

that is ``atol = ulps · eps · magnitude`` and ``rtol = ulps · eps`` (:func:`tolerance`):
``ulps`` units in the last place of the largest reference value.

``eps(dtype)``  ``torch.finfo(dtype).eps`` of the precision the computation ran in: the less
                precise of the two sides' dtypes (a float32 result against a float64 formula:
                float32's; bfloat16 under autocast: bfloat16's), or ``dtype=`` where a side no
                longer shows it (numbers read back from a float32 run, a result cast to float32).
``magnitude``   ``max|expected|`` by default: round-off in a sum is relative to its terms, and
                the largest value stands for them. Pass it where the reference is a cancellation
                (an expected 0, ``1 - cos``): the magnitude of the terms that cancelled.
``ulps``        how many roundings the two computations differ by, in units of
                ``eps · magnitude`` (one ulp of the largest value, within a factor 2):

``ROUNDING = 4``    elementwise: the same value with other roundings (a scale applied in another
                    order, a cast, one rounding to float16 at the end of a float32 kernel), or
                    the same operations again (a traced, compiled or exported graph, a
                    recomputed checkpointed block): half an ulp per rounding on each side.
``REORDERED = 32``  a forward along another route: an operator (SDPA against explicit
                    ``softmax(QKᵀ)V``, float32 against the float64 formula, onnxruntime against
                    PyTorch, another thread split of a matmul) or a model of a few blocks (a host
                    against its swapped copy). A sum of n terms in another order is off by up to
                    n·eps in the worst case and ~√n·eps typically; the tests' sums have n ≤ 64
                    terms (head widths, tokens, channels): √64 = 8 ulps, 4 such sums in
                    sequence. Measured: ≤ 10 ulps (torchvision's ViT with scalar kernels);
                    issue 59's MMDetection Swin 2.2 with AVX-512, 3.2 with scalar kernels (the
                    old absolute 1e-6 fails there: 1.31e-6 on values up to 3.46) and 3.0 on the
                    machine that reported it.
``SUMMED = 256``    a gradient along another route: a parameter's gradient sums over batch ×
                    tokens × width, ~10³ terms, √10³ ≈ 32 ulps of the terms typically; more of
                    the result where the sum cancels (a scalar parameter that every output
                    element reaches, Diff's λ). Measured: ≤ 20 ulps with vectorised kernels and
                    146 for λ with ``ATEN_CPU_CAPABILITY=default`` (scalar kernels sum in order).
                    Weights after s optimizer steps carry s gradients' round-off: ``s * SUMMED``.

A wrong result is far outside all three: a missing α, a wrong sign, a dropped bias or another
scale changes values by a fraction of their magnitude (1e-3 of it is 8400 float32 ulps). The
MMDetection Swin host test fails, 2 to 60 times over its tolerance, when one attention's scale,
its ``qkv`` weight, or even one weight element is made 1e-3 larger. Comparisons that must be
bitwise (the same weights loaded or copied, an exact resume) use ``torch.equal`` instead.

``DNA_MM_TOLERANCE_LOG=<file>`` appends one line per comparison (what, dtype, ulps, the measured
error in ulps, the ratio error / tolerance): the data to re-derive the constants on a new machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import torch

ROUNDING = 4
REORDERED = 32
SUMMED = 256


def eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


def tolerance(dtype: torch.dtype, magnitude: float, ulps: float) -> dict[str, float]:
    """``atol`` / ``rtol`` of the rule, as ``torch.testing.assert_close`` and
    ``np.testing.assert_allclose`` take them (``pytest.approx``: ``abs=``, ``rel=``)."""
    return dict(atol=ulps * eps(dtype) * float(magnitude), rtol=ulps * eps(dtype))


def _tensor(value) -> torch.Tensor:
    return value.detach() if isinstance(value, torch.Tensor) else torch.as_tensor(np.array(value))


def _coarser(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """The less precise floating dtype of the two (integers and bools count as exact)."""
    floats = [d for d in (a, b) if d.is_floating_point]
    return max(floats, key=eps) if floats else torch.float64


def assert_close_as(
    actual,
    expected,
    *,
    ulps: float,
    what: str = '',
    dtype: torch.dtype | None = None,
    magnitude: float | None = None,
) -> float:
    """Assert the rule for tensors, arrays, numbers or mappings of them (each entry with its own
    magnitude); returns the largest ``|actual - expected| / tolerance`` (≤ 1). Shapes must be
    equal and infinities match exactly; a NaN fails."""
    if isinstance(expected, Mapping):
        assert actual.keys() == expected.keys(), f'{what}: keys differ'
        ratios = [
            assert_close_as(actual[k], v, ulps=ulps, what=f'{what}[{k}]', dtype=dtype, magnitude=magnitude)
            for k, v in expected.items()
        ]
        return max(ratios, default=0.0)
    a, e = _tensor(actual), _tensor(expected)
    assert a.shape == e.shape, f'{what}: shape {tuple(a.shape)} != {tuple(e.shape)}'
    dtype = dtype or _coarser(a.dtype, e.dtype)
    a, e = a.double(), e.double()
    finite = e.isfinite()
    assert torch.equal(a.isfinite(), finite) and torch.equal(a[~finite], e[~finite]), f'{what}: non-finite'
    if magnitude is None:
        magnitude = e[finite].abs().max().item() if finite.any() else 0.0
    tol = tolerance(dtype, magnitude, ulps)
    diff = (a - e)[finite].abs()
    allowed = tol['atol'] + tol['rtol'] * e[finite].abs()
    ratio = torch.where(diff > 0, diff / allowed, 0.0).max().item() if diff.numel() else 0.0  # x / 0 = inf
    worst = diff.max().item() if diff.numel() else 0.0
    measured = worst / (eps(dtype) * magnitude) if magnitude else (float('inf') if worst else 0.0)
    _log(what, dtype, ulps, measured, ratio)
    assert ratio <= 1, (
        f'{what}: max |diff| {worst:.3g} is {measured:.3g} ulps of {magnitude:.3g} in {dtype}, '
        f'over the {ulps} allowed ({ratio:.3g} × the tolerance)'
    )
    return ratio


def _log(what: str, dtype: torch.dtype, ulps: float, measured: float, ratio: float) -> None:
    path = os.environ.get('DNA_MM_TOLERANCE_LOG')
    if path:
        test = os.environ.get('PYTEST_CURRENT_TEST', '').rsplit(' ', 1)[0]
        with open(path, 'a') as f:
            f.write(f'{test}\t{what}\t{str(dtype)[6:]}\t{ulps}\t{measured:.3g}\t{ratio:.3g}\n')
