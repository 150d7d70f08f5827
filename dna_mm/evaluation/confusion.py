"""The confusion matrix of a test run as a figure (``tools/test.py --confusion-matrix FILE``).

The matrix is MMAction2's ``ConfusionMatrix`` metric: row ``i`` counts the test videos of class
``i`` by predicted class. The figure writes each cell's count (or, ``normalize=True``, its share
of the row: the per-class recall on the diagonal) and colours every cell by its share of the
row, so that a rare class reads as clearly as a common one. Axis titles name the true and the
predicted class; every class name is drawn whole (the figure grows with the names and the
saved image takes in everything drawn). The counts are also written as CSV beside the figure.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

#: points a character of a tick label takes (8-point sans-serif), for the figure's margins
_CHAR_PT = 5.0


def confusion_figure(
    matrix: np.ndarray, names: Optional[Sequence[str]], path: str, normalize: bool = False
) -> list[str]:
    """Draw ``matrix`` (``[K, K]`` counts; rows true, columns predicted) with class ``names``
    (``None``: the indices) to ``path`` (any format matplotlib writes: .png, .pdf, .svg) and the
    counts to ``path`` with suffix ``.csv``. Returns the two paths written."""
    from matplotlib.figure import Figure

    counts = np.asarray(matrix, dtype=np.int64)  # [K, K]
    k = counts.shape[0]
    labels = [str(n) for n in names] if names is not None else [str(i) for i in range(k)]
    rows = counts.sum(axis=1, keepdims=True)
    share = np.divide(counts, rows, out=np.zeros(counts.shape), where=rows > 0)  # [K, K] row shares
    longest = max(len(label) for label in labels)
    cell = 0.45 if k <= 30 else 0.25  # inches a cell
    margin = longest * _CHAR_PT / 72 + 0.8  # inches the names take beside and below the grid
    fig = Figure(figsize=(k * cell + margin + 1.5, k * cell + margin + 0.8))
    ax = fig.add_subplot()
    image = ax.imshow(share, cmap='Blues', vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label='share of the true class')
    if k <= 40:  # numbers stay readable
        for i in range(k):
            for j in range(k):
                text = f'{100 * share[i, j]:.0f}' if normalize else f'{counts[i, j]}'
                colour = 'white' if share[i, j] > 0.5 else 'black'
                ax.text(j, i, text, ha='center', va='center', fontsize=7, color=colour)
    ax.set_xticks(range(k), labels, rotation=60, ha='right', rotation_mode='anchor', fontsize=8)
    ax.set_yticks(range(k), labels, fontsize=8)
    ax.set_xlabel('predicted class')
    ax.set_ylabel('true class')
    total, right = int(counts.sum()), int(np.trace(counts))
    what = '% of the true class' if normalize else 'videos'
    ax.set_title(f'confusion matrix ({what}): {right} of {total} right', fontsize=10)
    fig.savefig(path, dpi=150, bbox_inches='tight')
    table = Path(path).with_suffix('.csv')
    with open(table, 'w', newline='', encoding='utf-8') as f:
        writer = csv.writer(f)
        writer.writerow(['true \\ predicted', *labels])
        writer.writerows([label, *map(int, row)] for label, row in zip(labels, counts, strict=True))
    return [str(path), str(table)]
