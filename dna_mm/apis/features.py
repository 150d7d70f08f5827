"""Features of videos from a trained recognizer, as the recognizer computes them at test time.

Each video goes through the config's test pipeline (its clips × crops are the *views*) and the
data preprocessor, then through ``Recognizer3D.extract_feat(test_mode=True)`` (so
``model.test_cfg.max_testing_views`` bounds memory here too). Three levels, ``V`` views:

==============  ====================================================  ========================
level           what                                                  TimeSformer-B
==============  ====================================================  ========================
``pooled``      the input of the head's classifier (its last          ``[V, 768]``, the CLS
                ``nn.Linear``): the backbone output pooled by the     token after the last
                head, before dropout and the class scores             norm
``pre-head``    what the recognizer hands to ``cls_head``: the        ``[V, 768]``
                backbone (+ neck) output, unpooled
``tokens``      every token after the backbone's final ``norm``       ``[V, 1 + P·T, 768]``
==============  ====================================================  ========================

``per='video'`` averages the views (as the head averages their scores), ``per='clip'`` keeps
them (a head that merges the views before its classifier, as TSN's consensus, gives one row).
:func:`extract` returns one array; :class:`FeatureStore` writes one ``.npy`` per video
(atomically: a killed run resumes at the first missing file) and assembles one
``features.npy`` with ``index.csv`` on request.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset

from ..errors import ConfigError
from ..utils.files import atomic_path, write_json_atomic
from ..utils.parent_death import die_with_parent

LEVELS = ('pooled', 'pre-head', 'tokens')
PER = ('video', 'clip')


def classifier_of(model: nn.Module) -> nn.Linear:
    """The last ``nn.Linear`` of the recognizer's ``cls_head`` (``fc_cls`` in MMAction2's heads)."""
    head = getattr(model, 'cls_head', None)
    linears = [m for m in head.modules() if isinstance(m, nn.Linear)] if head is not None else []
    if not linears:
        raise ConfigError(
            f'{type(model).__name__}: no cls_head with a linear classifier to take features from'
        )
    return linears[-1]


def _concat(parts: list[Any]) -> Any:
    """``torch.cat`` of tensors, or of tuples of tensors element-wise (multi-output backbones)."""
    if isinstance(parts[0], torch.Tensor):
        return torch.cat(parts)
    return tuple(_concat([p[i] for p in parts]) for i in range(len(parts[0])))


@torch.no_grad()
def extract(model: nn.Module, inputs: torch.Tensor, level: str = 'pooled', per: str = 'video') -> np.ndarray:
    """Features of one preprocessed video ``inputs`` ``[1, V, C, T, H, W]`` (see the module
    docstring), as float32 numpy: ``[V, ...]`` per clip, ``[...]`` per video."""
    if level not in LEVELS or per not in PER:
        raise ConfigError(f'level must be one of {LEVELS} and per one of {PER}, got {level!r}, {per!r}')
    captured: list[Any] = []
    if level == 'tokens':
        norm = getattr(getattr(model, 'backbone', None), 'norm', None)
        if not isinstance(norm, nn.Module):
            raise ConfigError(
                f'level tokens: {type(model.backbone).__name__} has no final `norm` layer (transformer '
                'backbones such as TimeSformer have one); use pooled or pre-head'
            )
        hook = norm.register_forward_hook(lambda _m, _i, out: captured.append(out))
    elif level == 'pooled':
        hook = classifier_of(model).register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
    try:
        feats, kwargs = model.extract_feat(inputs, test_mode=True)  # [V, ...], max_testing_views at a time
        if level == 'pooled':
            model.cls_head(feats, **kwargs)  # as the head's predict calls it
    finally:
        if level != 'pre-head':
            hook.remove()
    out = feats if level == 'pre-head' else _concat(captured)
    if not isinstance(out, torch.Tensor):
        raise ConfigError(f'level {level}: the model gives {type(out).__name__}, not one tensor')
    if per == 'video':
        out = out.mean(dim=0)
    return out.float().cpu().numpy()


class VideoInputs(Dataset):
    """Videos through a test pipeline: ``(index, packed sample)``, or ``(index, (path,
    reason))`` for a video that cannot be read."""

    def __init__(self, videos: Sequence[str], pipeline: list[dict]) -> None:
        from mmengine.dataset import Compose

        self.videos = list(videos)
        self.pipeline = Compose(pipeline)

    def __len__(self) -> int:
        return len(self.videos)

    def __getitem__(self, i: int) -> tuple[int, Any]:
        from ..preparation.runner import describe

        path = self.videos[i]
        try:
            return i, self.pipeline(dict(filename=path, label=-1, start_index=0, modality='RGB'))
        except Exception as err:  # decoding / pipeline errors: listed, the others go on
            return i, (path, describe(err))


class FeatureStore:
    """One ``.npy`` per video under ``out`` (the video's name relative to ``root``, suffix
    ``.npy``), a settings file that a resumed run must match, and the assembled single file.

    Args:
        out: Output folder.
        root: The folder video names are relative to (a video outside it keeps its full path
            below ``out``).
        settings: What produced the features (config, checkpoint, level, per); a folder made
            with other settings is refused.
        single_file: Per-video files go to ``out/parts`` (kept: a later run resumes from them) and
            :meth:`assemble` stacks them into ``out/features.npy``.

    Making the store writes nothing: it checks ``out`` (a folder or nothing yet) and the settings
    of the features already there (a settings file with no feature beside it, left by a run that
    stopped before its first, is replaced). The settings file ``out/features.json`` is written
    with the first file the store writes (a feature, the index), so that a run that stops before
    it has any (a config or checkpoint refused, a crash) leaves nothing that refuses its rerun.
    """

    def __init__(self, out: str, root: str, settings: dict, single_file: bool = False) -> None:
        self.out, self.root = Path(out), Path(root).resolve()
        self.parts = self.out / 'parts' if single_file else self.out
        self.single_file = single_file
        self.settings = dict(settings, single_file=single_file)
        self.record = self.out / 'features.json'
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f'{self.out} is a file, not a folder for the features')
        self._recorded = False
        if self.record.is_file():
            before = json.loads(self.record.read_text(encoding='utf-8'))
            self._recorded = before == self.settings
            if not self._recorded and any(self.out.rglob('*.npy')):  # no feature: a stale record
                diff = {k: (before.get(k), v) for k, v in self.settings.items() if before.get(k) != v}
                raise ConfigError(
                    f'{self.out} holds features made with other settings ({diff}, as (then, now)); '
                    f'use another --out, or delete {self.record} to overwrite'
                )

    def _record_settings(self) -> None:
        """``features.json`` (and ``out``), before the first file the store writes; once."""
        if not self._recorded:  # the ranks of a distributed run all write it: a part name per process
            write_json_atomic(self.record, self.settings, unique=True)
            self._recorded = True

    def name(self, video: str) -> str:
        """The video's name below ``out``: relative to ``root``, else its full path."""
        path = Path(video).resolve()
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path).lstrip(os.sep)

    def file(self, video: str) -> Path:
        return self.parts / (os.path.splitext(self.name(video))[0] + '.npy')

    def done(self, video: str) -> bool:
        return self.file(video).is_file()

    def write(self, video: str, array: np.ndarray) -> None:
        """``array`` to the video's file, through a temporary name (atomic on one file system)."""
        self._record_settings()
        with atomic_path(self.file(video)) as tmp, open(tmp, 'wb') as f:
            np.save(f, array)

    def write_index(self, videos: Sequence[str]) -> Path:
        """``index.csv``: ``row, video, file, shape`` of every video with features (``file``:
        ``features.npy`` for the single file, whose row ``row`` it is)."""
        self._record_settings()
        index = self.out / 'index.csv'
        with open(index, 'w', newline='', encoding='utf-8') as f:
            writer = csv.writer(f)
            writer.writerow(['row', 'video', 'file', 'shape'])
            for row, video in enumerate(v for v in videos if self.done(v)):
                shape = np.load(self.file(video), mmap_mode='r').shape
                name = 'features.npy' if self.single_file else str(self.file(video).relative_to(self.out))
                writer.writerow([row, video, name, 'x'.join(map(str, shape))])
        return index

    def assemble(self, videos: Sequence[str]) -> Optional[Path]:
        """``features.npy`` ``[N, ...]`` from the per-video files of ``videos`` (in that order:
        the rows of :meth:`write_index`), kept in ``parts/`` for a later resumed run; ``None``
        when no video has features. Features of different shapes (``per='clip'`` with varying
        views) are a ``ConfigError``."""
        ready = [v for v in videos if self.done(v)]
        if not ready:
            return None
        arrays = [np.load(self.file(v)) for v in ready]
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise ConfigError(
                f'features of different shapes {sorted(shapes)[:3]} cannot be stacked in one file: '
                'use per-video files (no --single-file) or --per video'
            )
        target = self.out / 'features.npy'
        with atomic_path(target) as tmp, open(tmp, 'wb') as f:
            np.save(f, np.stack(arrays))
        return target


def run_extraction(
    model: nn.Module,
    pipeline: list[dict],
    videos: Sequence[str],
    store: FeatureStore,
    level: str = 'pooled',
    per: str = 'video',
    rank: int = 0,
    world_size: int = 1,
    workers: int = 0,
) -> dict[str, str]:
    """Features of this rank's share of ``videos`` (``videos[rank::world_size]``) not yet in
    ``store``, decoded by ``workers`` dataloader processes, with mmengine's progress bar on rank
    0 (the workers end with this process, however it ends:
    :func:`~dna_mm.utils.parent_death.die_with_parent`). Returns ``video -> reason`` for the
    videos that could not be read."""
    import sys

    from mmengine.dataset import pseudo_collate
    from mmengine.utils import ProgressBar
    from torch.utils.data import DataLoader

    todo = [v for v in list(videos)[rank::world_size] if not store.done(v)]
    loader = DataLoader(
        VideoInputs(todo, pipeline),
        batch_size=None,
        num_workers=workers,
        collate_fn=lambda x: x,
        worker_init_fn=die_with_parent,
    )
    bar = ProgressBar(len(todo), file=sys.stderr) if rank == 0 and todo else None
    unreadable: dict[str, str] = {}
    for i, sample in loader:
        if isinstance(sample, tuple):  # (path, reason)
            unreadable[sample[0]] = sample[1]
        else:
            data = model.data_preprocessor(pseudo_collate([sample]), False)
            store.write(todo[i], extract(model, data['inputs'], level, per))
        if bar is not None:
            bar.update()
    if bar is not None:
        sys.stderr.write('\n')
    return unreadable
