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
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset

from ..errors import ConfigError
from ..over_time.predictor import Decoded, OverTimePredictor
from ..utils.files import atomic_path, recorded_path, write_json_atomic, write_text_atomic
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
def extract_batch(
    model: nn.Module, inputs: torch.Tensor, level: str = 'pooled', per: str = 'video'
) -> np.ndarray:
    """Features of ``B`` preprocessed inputs ``[B, V, C, T, H, W]`` (a video's views, or the
    windows of :func:`window_features`; see the module docstring), as float32 numpy:
    ``[B, V, ...]`` per clip, ``[B, ...]`` per video (its views averaged)."""
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
        feats, kwargs = model.extract_feat(inputs, test_mode=True)  # [B·V, ...], max_testing_views at a time
        if level == 'pooled':
            model.cls_head(feats, **kwargs)  # as the head's predict calls it
    finally:
        if level != 'pre-head':
            hook.remove()
    out = feats if level == 'pre-head' else _concat(captured)
    if not isinstance(out, torch.Tensor):
        raise ConfigError(f'level {level}: the model gives {type(out).__name__}, not one tensor')
    out = out.reshape(len(inputs), -1, *out.shape[1:])  # [B, V, ...] (V = 1: a head that merged the views)
    if per == 'video':
        out = out.mean(dim=1)
    return out.float().cpu().numpy()


def extract(model: nn.Module, inputs: torch.Tensor, level: str = 'pooled', per: str = 'video') -> np.ndarray:
    """Features of one preprocessed video ``inputs`` ``[1, V, C, T, H, W]``
    (:func:`extract_batch`): ``[V, ...]`` per clip, ``[...]`` per video."""
    return extract_batch(model, inputs, level, per)[0]


def window_features(
    model: nn.Module,
    predictor: OverTimePredictor,
    video: str,
    stride: Optional[float] = None,
    level: str = 'pooled',
    per: str = 'video',
) -> tuple[np.ndarray, np.ndarray]:
    """The model's clip slid along ``video`` every ``stride`` seconds (default: half a window),
    the windows ``tools/infer.py --over-time`` scores (:class:`OverTimePredictor`; none across a
    gap of damaged data): ``[W, ...]`` features (:func:`extract_batch`, ``predictor.batch_size``
    windows a forward pass) and ``[W, 2]`` each window's start and end in seconds.

    The windows are decoded and packed ahead in a second thread, as ``tools/infer.py --over-time``
    decodes them (:meth:`OverTimePredictor.decoding`: at most ``2 × batch_size`` windows ahead),
    while the model takes the features of those before; the thread ends and the file is closed
    however this ends (an error in either thread, Ctrl-C). A batch may hold windows from both
    sides of a gap: each window's features are its own."""
    from mmengine.dataset import pseudo_collate

    feats: list[np.ndarray] = []
    times: list[tuple[float, float]] = []
    batch: list[Decoded] = []

    def flush() -> None:
        data = model.data_preprocessor(pseudo_collate([d.sample for d in batch]), False)
        feats.append(extract_batch(model, data['inputs'], level, per))
        times.extend((d.window.start, d.window.end) for d in batch)
        batch.clear()

    stream, stride = predictor.open(video, stride)
    with predictor.decoding(stream, stride) as ahead:  # ends the thread, closes the stream
        for item in ahead:
            if isinstance(item, Decoded):  # not a gap
                batch.append(item)
                if len(batch) == predictor.batch_size:
                    flush()
        if batch:
            flush()
    return np.concatenate(feats), np.asarray(times, dtype=np.float64).reshape(-1, 2)


class VideoInputs(Dataset):
    """Videos through a test pipeline: ``(index, packed sample, coverage)`` (coverage:
    :func:`~.inference.clip_coverage`, the video's seconds and one clip's), or ``(index, None,
    reason)`` for a video that cannot be read (:func:`~.inference.why_unreadable`)."""

    def __init__(self, videos: Sequence[str], pipeline: list[dict]) -> None:
        from mmengine.dataset import Compose

        self.videos = list(videos)
        self.steps = list(pipeline)
        self.pipeline = Compose(pipeline)

    def __len__(self) -> int:
        return len(self.videos)

    def __getitem__(self, i: int) -> tuple[int, Optional[dict], Any]:
        from .inference import clip_coverage, why_unreadable

        path = self.videos[i]
        try:
            sample = self.pipeline(dict(filename=path, label=-1, start_index=0, modality='RGB'))
        except Exception as err:  # decoding / pipeline errors: listed, the others go on
            return i, None, why_unreadable(path, err)
        return i, sample, clip_coverage(path, self.steps)


#: the files of a features folder besides the features (``*.npy``) and their windows' times
RECORD, INDEX, UNREADABLE, SINGLE = 'features.json', 'index.csv', 'unreadable.txt', 'features.npy'
#: a video's windows (``--over-time``): ``window, start, end`` (seconds), beside its features
TIMES = '.windows.csv'
#: settings recorded as the user gave them, not compared on a resume (the same files by another path)
AS_GIVEN = ('config', 'checkpoint')


def extraction_settings(
    model: dict,
    pipeline: list[dict],
    config: str,
    checkpoint: str,
    root: str,
    level: str,
    per: str,
    windows: Any = None,
) -> dict:
    """What makes features the same, for :class:`FeatureStore`: a digest of the ``model`` config
    and the test ``pipeline``, the checkpoint file's (sha256: the same weights by any path), the
    videos' folder, ``level``, ``per`` and ``windows`` (the stride, or ``None``); the ``config``
    and ``checkpoint``, recorded for the reader (:data:`AS_GIVEN`): files by absolute paths (a URL,
    a ``dna_mm::`` config as given: :func:`~dna_mm.utils.files.recorded_path`)."""
    text = json.dumps([model, pipeline], sort_keys=True, default=repr)
    weights = checkpoint
    if os.path.isfile(checkpoint):
        sha = hashlib.sha256()
        with open(checkpoint, 'rb') as f:
            for block in iter(lambda: f.read(1 << 24), b''):
                sha.update(block)
        weights = f'sha256:{sha.hexdigest()}'
    return dict(
        config=recorded_path(config),
        checkpoint=recorded_path(checkpoint),
        model=f'sha256:{hashlib.sha256(text.encode()).hexdigest()}',
        weights=weights,
        videos=os.path.abspath(root),
        level=level,
        per=per,
        windows=windows,
    )


class FeatureStore:
    """One ``.npy`` per video under ``out`` (the video's name relative to ``root``, suffix
    ``.npy``; the name with its suffix where two videos share a stem: ``a.avi.npy``,
    ``a.mp4.npy``), its windows' times beside it (``windows``), a settings file that a resumed run
    must match, and the assembled single file.

    Args:
        out: Output folder.
        root: The folder video names are relative to (a video outside it keeps its full path
            below ``out``).
        videos: Every video of the run (their file names are chosen together).
        settings: What produced the features (the model's and pipeline's digests, the
            checkpoint's, level, per, windows, the videos' folder; :data:`AS_GIVEN` recorded
            only); a folder made with other settings is refused, and so is one that holds
            ``.npy`` files without a settings file (features of unknown origin).
        single_file: Per-video files go to ``out/parts`` (kept: a later run resumes from them) and
            :meth:`assemble` stacks them into ``out/features.npy``.
        overwrite: Refuse nothing: :meth:`clear` (on one process) removes what is there.

    Making the store writes nothing. The settings file ``out/features.json`` is written with the
    first file the store writes (a feature, the index), so that a run that stops before it has
    any (a config or checkpoint refused, a crash) leaves nothing that refuses its rerun. A video
    counts as done when its file exists and is newer than the video (a video replaced since is
    extracted again).
    """

    def __init__(
        self,
        out: str,
        root: str,
        videos: Sequence[str],
        settings: dict,
        single_file: bool = False,
        windows: bool = False,
        overwrite: bool = False,
    ) -> None:
        self.out, self.root = Path(out), Path(os.path.abspath(root))
        self.parts = self.out / 'parts' if single_file else self.out
        self.single_file, self.windows = single_file, windows
        self.settings = dict(settings, single_file=single_file)
        self.record = self.out / RECORD
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f'{self.out} is a file, not a folder for the features')
        self.files = self._files(videos)
        self._recorded = False
        if not overwrite:
            self._check_settings()

    def _check_settings(self) -> None:
        """Refuse a folder whose features other settings made (module docstring)."""
        again = 'use another --out, or --overwrite to replace them'
        features = next(self.out.rglob('*.npy'), None) if self.out.is_dir() else None
        if not self.record.is_file():
            if features is not None:
                raise ConfigError(
                    f'{self.out} holds .npy files ({features.relative_to(self.out)}, ...) but no '
                    f'{RECORD}, the settings that made them: {again}'
                )
            return
        before = json.loads(self.record.read_text(encoding='utf-8'))
        diff = {
            k: (before.get(k), v)
            for k, v in self.settings.items()
            if k not in AS_GIVEN and before.get(k) != v
        }
        self._recorded = before == self.settings
        if diff and features is not None:  # no feature: a stale record, replaced with the first
            raise ConfigError(
                f'{self.out} holds features made with other settings ({diff}, as (then, now)); {again}'
            )

    def clear(self) -> None:
        """Remove what a run left in ``out``: the features, their windows' times, the settings,
        index, unreadable list and single file, and the folders they leave empty."""
        if not self.out.is_dir():
            return
        for path in [*self.out.rglob('*.npy'), *self.out.rglob(f'*{TIMES}')]:
            path.unlink()
        for name in (RECORD, INDEX, UNREADABLE):
            (self.out / name).unlink(missing_ok=True)
        for folder in sorted((p for p in self.out.rglob('*') if p.is_dir()), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()
        self._recorded = False

    def _record_settings(self) -> None:
        """``features.json`` (and ``out``), before the first file the store writes; once."""
        if not self._recorded:  # the ranks of a distributed run all write it: a part name per process
            write_json_atomic(self.record, self.settings, unique=True)
            self._recorded = True

    def name(self, video: str) -> str:
        """The video's name below ``out``: relative to ``root``, else its full path (a link by
        its own name, not its target's)."""
        path = Path(os.path.abspath(video))
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path).lstrip(os.sep)

    def _files(self, videos: Sequence[str]) -> dict[str, Path]:
        """Each video's features file: its name without the suffix, with it where two share a stem."""
        names = {video: self.name(video) for video in videos}
        stems = Counter(os.path.splitext(n)[0] for n in dict.fromkeys(names.values()))
        shared = {stem for stem, n in stems.items() if n > 1}
        files = {}
        for video, name in names.items():
            stem = os.path.splitext(name)[0]
            files[video] = self.parts / ((name if stem in shared else stem) + '.npy')
        by_file: dict[Path, str] = {}
        for video, file in files.items():
            other = by_file.setdefault(file, video)
            if os.path.abspath(other) != os.path.abspath(video):
                raise ConfigError(f'{other} and {video} would both write {file}: rename one of them')
        return files

    def file(self, video: str) -> Path:
        return self.files[video]

    def times(self, video: str) -> Path:
        """The windows' times beside the video's features (``a.npy``: ``a.windows.csv``)."""
        file = self.file(video)
        return file.with_name(file.name.removesuffix('.npy') + TIMES)

    def done(self, video: str) -> bool:
        """The video's features are there, and newer than the video."""
        try:
            written = self.file(video).stat().st_mtime_ns
            if self.windows:
                written = min(written, self.times(video).stat().st_mtime_ns)
        except FileNotFoundError:
            return False
        try:
            return written >= os.stat(video).st_mtime_ns
        except OSError:  # gone since it was listed: its features stand
            return True

    def write(self, video: str, array: np.ndarray, times: Optional[np.ndarray] = None) -> None:
        """``array`` to the video's file (``times``, ``[W, 2]`` seconds, first, to its windows'
        file), through temporary names (atomic on one file system)."""
        self._record_settings()
        if times is not None:
            rows = ''.join(f'{i},{start:.6f},{end:.6f}\n' for i, (start, end) in enumerate(times))
            write_text_atomic(self.times(video), 'window,start,end\n' + rows)
        with atomic_path(self.file(video)) as tmp, open(tmp, 'wb') as f:
            np.save(f, array)

    def write_index(self, videos: Sequence[str]) -> Path:
        """``index.csv``: ``row, video, file, shape`` of every video with features (``file``:
        ``features.npy`` for the single file, whose row ``row`` it is; ``windows``: the file of
        the windows' times)."""
        self._record_settings()
        index = self.out / INDEX
        with open(index, 'w', newline='', encoding='utf-8') as f:
            writer = csv.writer(f)
            writer.writerow(['row', 'video', 'file', 'shape', *(['windows'] if self.windows else [])])
            for row, video in enumerate(v for v in videos if self.done(v)):
                shape = np.load(self.file(video), mmap_mode='r').shape
                name = SINGLE if self.single_file else str(self.file(video).relative_to(self.out))
                times = [str(self.times(video).relative_to(self.out))] if self.windows else []
                writer.writerow([row, video, name, 'x'.join(map(str, shape)), *times])
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
        target = self.out / SINGLE
        with atomic_path(target) as tmp, open(tmp, 'wb') as f:
            np.save(f, np.stack(arrays))
        return target


def _views(pipeline: list[dict], videos: list[str], workers: int) -> Iterator[tuple[str, Any, Any]]:
    """``(video, packed sample or None, coverage or reason)`` (:class:`VideoInputs`), decoded by
    ``workers`` dataloader processes."""
    from torch.utils.data import DataLoader

    loader = DataLoader(
        VideoInputs(videos, pipeline),
        batch_size=None,
        num_workers=workers,
        collate_fn=lambda x: x,
        worker_init_fn=die_with_parent,
    )
    for i, sample, info in loader:
        yield videos[i], sample, info


def _windowed(
    model: nn.Module, pipeline: list[dict], videos: list[str], stride: Optional[float], level: str, per: str
) -> Iterator[tuple[str, Any, Any]]:
    """``(video, (features, times) or None, None or reason)``: :func:`window_features` of each."""
    from ..errors import DataError
    from .inference import why_unreadable

    predictor = OverTimePredictor(model, pipeline)
    for video in videos:
        try:
            yield video, window_features(model, predictor, video, stride, level, per), None
        except DataError as err:  # a file that cannot be read at all
            yield video, None, why_unreadable(video, err)


@dataclass
class Extraction:
    """What :func:`run_extraction` found: ``unreadable`` (video → reason) and ``long`` (video →
    (its seconds, one clip's seconds) for a video more than :data:`~.inference.LONG` clips long,
    whose features summarise the test views alone)."""

    unreadable: dict[str, str] = field(default_factory=dict)
    long: dict[str, tuple[float, float]] = field(default_factory=dict)


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
    windows: bool = False,
    stride: Optional[float] = None,
) -> Extraction:
    """Features of this rank's share of ``videos`` (``videos[rank::world_size]``) not yet in
    ``store``, with mmengine's progress bar on rank 0: each video's test views, decoded by
    ``workers`` dataloader processes (they end with this process, however it ends:
    :func:`~dna_mm.utils.parent_death.die_with_parent`), or with ``windows`` the model's clip slid
    along it every ``stride`` seconds (:func:`window_features`, decoded here, on a second thread)."""
    import sys

    from mmengine.dataset import pseudo_collate
    from mmengine.utils import ProgressBar

    from .inference import LONG

    todo = [v for v in list(videos)[rank::world_size] if not store.done(v)]
    bar = ProgressBar(len(todo), file=sys.stderr) if rank == 0 and todo else None
    found = Extraction()
    if windows:
        items = _windowed(model, pipeline, todo, stride, level, per)
    else:
        items = _views(pipeline, todo, workers)
    for video, sample, info in items:
        if sample is None:
            found.unreadable[video] = info
        elif windows:
            store.write(video, *sample)
        else:
            data = model.data_preprocessor(pseudo_collate([sample]), False)
            store.write(video, extract(model, data['inputs'], level, per))
            if info is not None and info[0] > LONG * info[1]:
                found.long[video] = info
        if bar is not None:
            bar.update()
    if bar is not None:
        sys.stderr.write('\n')
    return found
