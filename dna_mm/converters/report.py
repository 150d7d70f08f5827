"""What a backbone's ``pretrained`` load checks and logs (TimeSformer, ViTDet)."""

from __future__ import annotations

from typing import Mapping

from mmengine.logging import print_log
from torch import Tensor


def check_shapes(own: Mapping[str, Tensor], state_dict: Mapping[str, Tensor], filename: str) -> None:
    """Refuse a key present in both with another shape (after a backbone's resizing).

    Raises:
        ValueError: naming the file, the key and both shapes.
    """
    for key, value in state_dict.items():
        if key in own and own[key].shape != value.shape:
            raise ValueError(
                f'{filename}: shape mismatch for {key}: checkpoint '
                f'{list(value.shape)}, model {list(own[key].shape)}'
            )


def log_load_report(
    header: str, report: Mapping[str, list[str]], titles: Mapping[str, str], limit: int = 8
) -> None:
    """Log ``header`` and, per non-empty ``report[key]``, one line ``titles[key]: k1, k2, ...``
    (at most ``limit`` keys, then a count), to the current MMEngine logger."""
    lines = [header]
    for key, title in titles.items():
        keys = report[key]
        if keys:
            more = f', ... ({len(keys) - limit} more)' if len(keys) > limit else ''
            lines.append(f'  {title}: {", ".join(keys[:limit])}{more}')
    print_log('\n'.join(lines), logger='current')
