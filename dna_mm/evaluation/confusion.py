"""The confusion matrix of a test run as a figure (``tools/test.py --confusion-matrix FILE``).

The matrix is MMAction2's ``ConfusionMatrix`` metric: row ``i`` counts the test videos of class
``i`` by predicted class. The figure writes each cell's count (or, ``normalize=True``, its share
of the row: the per-class recall on the diagonal) and colours every cell by its share of the
row, so that a rare class reads as clearly as a common one. Axis titles name the true and the
predicted class; every class name is drawn whole (the figure grows with the names and the
saved image takes in everything drawn). The counts are also written as CSV beside the figure.

:func:`figure_files` names the two files a path gives (a path without a suffix: a PNG) and refuses
a format matplotlib does not write, so that a tool checks them before the test runs.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..errors import ConfigError
from ..utils.files import atomic_path

#: points a character of a tick label takes (8-point sans-serif), for the figure's margins
_CHAR_PT = 5.0
#: the format of a figure path without a suffix (matplotlib's own default, ``savefig.format``)
DEFAULT_FORMAT = 'png'


def figure_formats() -> list[str]:
    """The file formats matplotlib writes (``png``, ``pdf``, ``svg``, ...), sorted."""
    from matplotlib.figure import Figure

    return sorted(Figure().canvas.get_supported_filetypes())


def figure_files(path: str, flag: str = 'confusion matrix') -> tuple[str, str]:
    """The figure and the table that :func:`confusion_figure` writes for ``path``: ``path`` itself
    (``cm`` without a suffix: ``cm.png``) and the same with suffix ``.csv``. A suffix that is
    not a format matplotlib writes (:func:`figure_formats`) is a
    :class:`~dna_mm.errors.ConfigError` naming ``flag``."""
    suffix = Path(path).suffix
    if not suffix:
        path = f'{path}.{DEFAULT_FORMAT}'
    elif suffix[1:].lower() not in (formats := figure_formats()):
        raise ConfigError(
            f'{flag} {path}: {suffix} is not a figure format matplotlib writes ({", ".join(formats)})'
        )
    return str(path), str(Path(path).with_suffix('.csv'))


def confusion_figure(
    matrix: np.ndarray, names: Optional[Sequence[str]], path: str, normalize: bool = False
) -> list[str]:
    """Draw ``matrix`` (``[K, K]`` counts; rows true, columns predicted) with class ``names``
    (``None``: the indices) to ``path`` (any format matplotlib writes: .png, .pdf, .svg; no
    suffix: .png) and the counts to ``path`` with suffix ``.csv`` (:func:`figure_files`), each
    whole or not at all, their folder made (as ``--dump``'s CSV). Returns the two paths written."""
    from matplotlib.figure import Figure

    figure, table = figure_files(path)
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
    with atomic_path(figure) as tmp:  # the format by the figure's suffix, not the part's
        fig.savefig(tmp, format=Path(figure).suffix[1:].lower(), dpi=150, bbox_inches='tight')
    with atomic_path(table) as tmp, open(tmp, 'w', newline='', encoding='utf-8') as f:
        writer = csv.writer(f)
        writer.writerow(['true \\ predicted', *labels])
        writer.writerows([label, *map(int, row)] for label, row in zip(labels, counts, strict=True))
    return [figure, table]
