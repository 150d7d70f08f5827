"""An ImageNet-1K classifier on ImageNet-A, -R and -O (the paper's robustness tables), with the
measures of Hendrycks et al.'s evaluation code (:mod:`dna_mm.analysis.calibration`).

ImageNet-A and -R hold 200 of ImageNet-1K's classes, one folder each, named by WordNet id
(``imagenet-a/n01498041/*.jpg``). As in their code, the 1000-way model is read on those 200
classes only: the logits of the classes present, a softmax over them. Reported: accuracy, RMS
calibration error (equal-count bins of 100), AURRA.

ImageNet-O holds images of classes outside ImageNet-1K (folders of other WordNet ids). It is
scored against ImageNet-1K validation images of the same 200 classes (the in-distribution
set), each image's confidence the maximum softmax over those classes, an OOD image the positive:
AUROC, AUPR and FPR at 95 % TPR.

:func:`list_sets` reads the folders and checks them (classes, sizes) before any model runs;
:func:`score_sets` runs the model on them: every image through the config's test pipeline
(MMPretrain's ``LoadImageFromFile`` and resizing) and the classifier in ``'tensor'`` mode (logits
``[B, 1000]``). :func:`evaluate_variants` does both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
from torch import nn

from ..errors import DataError
from ..preparation.imagenet import images_in
from .calibration import aurra, ood_measures, rms_calibration_error


@dataclass(frozen=True)
class ScoredSet:
    """ImageNet-A or -R, listed: ``images`` ``[N]``, their ``labels`` ``[N]`` (indices into the
    set's sorted classes) and ``columns``: the model's logit of each of those classes."""

    images: list[Path]
    labels: np.ndarray
    columns: list[int]


@dataclass(frozen=True)
class OodSet:
    """ImageNet-O, listed: the in-distribution images (``inside``), ImageNet-O's (``outside``)
    and ``columns``: the model's logits of the 200 classes of ImageNet-A / -R."""

    inside: list[Path]
    outside: list[Path]
    columns: list[int]


@dataclass(frozen=True)
class VariantSets:
    """The sets given, listed and checked (:func:`list_sets`): ``scored`` by name
    (``'imagenet-a'``, ``'imagenet-r'``), ``ood`` (ImageNet-O) or ``None``."""

    scored: dict[str, ScoredSet]
    ood: Optional[OodSet] = None

    def images(self) -> list[Path]:
        """Every image the evaluation reads."""
        found = [p for s in self.scored.values() for p in s.images]
        return found + ([*self.ood.inside, *self.ood.outside] if self.ood else [])


def class_folders(root: Path) -> dict[str, list[Path]]:
    """``wnid -> images`` of ``root/<wnid>/*`` (sorted); an error naming ``root`` when it holds none."""
    if not root.is_dir():
        raise DataError(f'{root}: not a folder (expected <wnid>/ class folders of images)')
    found = {
        d.name: images_in(d) for d in sorted(root.iterdir()) if d.is_dir() and not d.name.startswith('.')
    }
    found = {w: images for w, images in found.items() if images}
    if not found:
        raise DataError(f'{root}: no <wnid>/ class folder with images')
    return found


def check_calibration_size(root: Path, n: int, beta: int) -> None:
    """A :class:`~dna_mm.errors.DataError` when ``n`` images of ``root`` are too few for the RMS
    calibration error in bins of ``beta`` (:func:`~.calibration.rms_calibration_error`, as in
    Hendrycks et al.'s code: the most confident bin is left out, so it needs two bins,
    ``2 · beta`` images), naming the largest ``beta`` that fits."""
    if beta < 1:
        raise DataError(f'--beta must be at least 1, got {beta}')
    if n >= 2 * beta:
        return
    fits = f'; give --beta {n // 2} or less' if n >= 2 else ''
    raise DataError(
        f'{root}: {n} image(s), too few for the RMS calibration error in bins of --beta {beta} '
        f'images: it needs at least {2 * beta} (two bins; the most confident one is left out, as '
        f"in Hendrycks et al.'s code){fits}"
    )


def list_sets(
    wnids: list[str],
    imagenet_a: Optional[Path] = None,
    imagenet_r: Optional[Path] = None,
    imagenet_o: Optional[Path] = None,
    imagenet_val: Optional[Path] = None,
    beta: int = 100,
) -> VariantSets:
    """The sets given, listed and checked before any model runs (arguments as
    :func:`evaluate_variants`'s): class folders that are ImageNet-1K classes, enough images of
    ImageNet-A / -R for bins of ``beta`` (:func:`check_calibration_size`), ImageNet-O with its
    in-distribution images. A :class:`~dna_mm.errors.DataError` names the folder otherwise."""
    index = {w: i for i, w in enumerate(wnids)}
    scored: dict[str, ScoredSet] = {}
    subset: Optional[list[str]] = None
    for name, root in (('imagenet-a', imagenet_a), ('imagenet-r', imagenet_r)):
        if root is None:
            continue
        folders = class_folders(root)
        unknown = sorted(set(folders) - set(index))
        if unknown:
            raise DataError(
                f'{root}: class folders that are not ImageNet-1K classes: {", ".join(unknown[:5])}'
            )
        classes = sorted(folders)
        subset = subset or classes
        images = [p for w in classes for p in folders[w]]
        check_calibration_size(root, len(images), beta)
        labels = np.array([i for i, w in enumerate(classes) for _ in folders[w]])
        scored[name] = ScoredSet(images, labels, [index[w] for w in classes])
    if imagenet_o is None:
        return VariantSets(scored)
    if imagenet_val is None or subset is None:
        raise DataError(
            'ImageNet-O is scored against ImageNet validation images of the 200 classes of '
            'ImageNet-A / -R: give the validation folder and --imagenet-a or --imagenet-r'
        )
    val = class_folders(imagenet_val)
    inside = [p for w in subset if w in val for p in val[w]]
    if not inside:
        raise DataError(f'{imagenet_val}: no image of the {len(subset)} classes of ImageNet-A / -R')
    outside = [p for images in class_folders(imagenet_o).values() for p in images]
    return VariantSets(scored, OodSet(inside, outside, [index[w] for w in subset]))


@torch.no_grad()
def logits_of(model: nn.Module, pipeline: Any, images: Sequence[Path], batch_size: int = 32) -> torch.Tensor:
    """``[N, K]`` logits of ``model`` (an MMPretrain classifier) on ``images`` read by ``pipeline``
    (a ``Compose`` of the test pipeline), through the model's data preprocessor."""
    from mmengine.dataset import pseudo_collate

    out = []
    for start in range(0, len(images), batch_size):
        batch = pseudo_collate([pipeline(dict(img_path=str(p))) for p in images[start : start + batch_size]])
        data = model.data_preprocessor(batch, False)
        out.append(model(data['inputs'], mode='tensor').float().cpu())
    return torch.cat(out) if out else torch.zeros(0, 0)


def _subset(logits: torch.Tensor, columns: list[int]) -> torch.Tensor:
    return torch.softmax(logits[:, columns], dim=1)  # [N, len(columns)]


def classification_scores(probs: torch.Tensor, labels: np.ndarray, beta: int = 100) -> dict[str, float]:
    """Accuracy, RMSCE (bins of ``beta`` samples) and AURRA (in %) of ``probs`` ``[N, C]`` against
    ``labels`` ``[N]``."""
    confidence, predicted = probs.max(dim=1)
    correct = (predicted.numpy() == labels).astype(np.float64)
    conf = confidence.double().numpy()
    return dict(
        acc=100 * float(correct.mean()),
        rmsce=100 * rms_calibration_error(conf, correct, beta),
        aurra=100 * aurra(conf, correct),
        images=float(len(labels)),
    )


def score_sets(
    model: nn.Module, pipeline: Any, sets: VariantSets, batch_size: int = 32, beta: int = 100
) -> dict[str, dict[str, float]]:
    """The measures of each set of ``sets`` (:func:`list_sets`; the module docstring)."""
    results: dict[str, dict[str, float]] = {}
    for name, s in sets.scored.items():
        probs = _subset(logits_of(model, pipeline, s.images, batch_size), s.columns)
        results[name] = classification_scores(probs, s.labels, beta)
    if sets.ood is not None:
        ood = sets.ood
        conf_in = _subset(logits_of(model, pipeline, ood.inside, batch_size), ood.columns).max(dim=1).values
        conf_out = _subset(logits_of(model, pipeline, ood.outside, batch_size), ood.columns).max(dim=1).values
        measures = ood_measures(conf_in.double().numpy(), conf_out.double().numpy())
        results['imagenet-o'] = {k: 100 * v for k, v in measures.items()} | dict(
            images=float(len(ood.outside)), in_distribution=float(len(ood.inside))
        )
    return results


def evaluate_variants(
    model: nn.Module,
    pipeline: Any,
    wnids: list[str],
    imagenet_a: Optional[Path] = None,
    imagenet_r: Optional[Path] = None,
    imagenet_o: Optional[Path] = None,
    imagenet_val: Optional[Path] = None,
    batch_size: int = 32,
    beta: int = 100,
) -> dict[str, dict[str, float]]:
    """The measures of each set given (see the module docstring); ``wnids``: the model's 1000
    classes in label order. ImageNet-O needs ``imagenet_val`` (class folders, or the images of
    ``meta/val.txt``'s classes: give its ``val/<wnid>/`` folders) and the 200 classes of
    ``imagenet_a`` or ``imagenet_r``; ``beta``: images per RMSCE bin (Hendrycks': 100; a set of
    fewer than ``2 · beta`` images is refused before the model runs)."""
    sets = list_sets(wnids, imagenet_a, imagenet_r, imagenet_o, imagenet_val, beta)
    return score_sets(model, pipeline, sets, batch_size, beta)
