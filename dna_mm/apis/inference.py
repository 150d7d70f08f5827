"""Inference with a trained recognizer: inputs, class names, a safe and strict model load
(:func:`load_recognizer`, the same as ``tools/test.py``'s) and top-k predictions (:func:`predict`).
"""

from __future__ import annotations

import os.path as osp
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import print_log

from ..checkpoint import load_whole_model
from ..config.build import type_name
from ..config.model import model_from_config
from ..datasets.protocols import read_label_map
from ..datasets.video_files import VIDEO_SUFFIXES, list_videos
from ..errors import ConfigError, DataError


@dataclass
class Prediction:
    """The top-k classes of one video, best first."""

    video: str
    indices: list[int]
    scores: list[float]


def collect_videos(source: str, video_root: Optional[str] = None) -> list[str]:
    """The videos named by ``source``: a video file, a folder (its video files, recursively,
    sorted) or a list file (``.txt``: one path per line, optionally followed by a label as in
    MMAction2's lists, :func:`list_entry`; ``.csv``: ``path,label`` rows, :func:`csv_entries`;
    relative paths are relative to ``video_root``, default the list's folder).
    A missing input, an empty folder or missing listed videos are a ``FileNotFoundError``."""
    return list(collect_labelled_videos(source, video_root))


def collect_labelled_videos(
    source: str, video_root: Optional[str] = None, multi_class: bool = False
) -> dict[str, Optional[Labels]]:
    """:func:`collect_videos` with each video's label: the list's (MMAction2's ``path label``
    lines; with ``multi_class``, ``path label [label ...]`` lines, whose labels are a tuple:
    :func:`list_entry`), ``None`` for a file, a folder or an unlabelled line."""
    path = Path(source)
    if path.is_dir():
        videos = [str(p) for p in list_videos(path)]
        if not videos:
            raise FileNotFoundError(f'no video files ({", ".join(VIDEO_SUFFIXES)}) under {source}')
        return dict.fromkeys(videos)
    if not path.is_file():
        raise FileNotFoundError(
            f'input {source} does not exist (expected a video file, a folder or a .txt list of videos)'
        )
    if path.suffix.lower() not in ('.txt', '.csv'):
        return {str(path): None}
    root = Path(video_root) if video_root is not None else path.parent
    if path.suffix.lower() == '.csv':
        entries = csv_entries(path)
    else:
        lines = path.read_text(encoding='utf-8').splitlines()
        entries = []
        for lineno, line in enumerate(lines, 1):
            if line.strip() and not line.lstrip().startswith('#'):
                try:
                    entries.append(list_entry(line, multi_class))
                except ValueError as err:
                    raise DataError(f'{source}:{lineno}: {err}') from None
    labelled = {str(root / video): label for video, label in entries}  # an absolute entry stays absolute
    videos = list(labelled)
    if not videos:
        raise DataError(f'list {source} names no video (one path per line expected)')
    missing = [v for v in videos if not osp.isfile(v)]
    if missing:
        raise FileNotFoundError(
            f'{len(missing)} of the {len(videos)} videos of {source} do not '
            f'exist (relative to {root}; set the folder with --video-root): '
            f'{", ".join(missing[:3])}{" ..." if len(missing) > 3 else ""}'
        )
    return labelled


#: a video's label: one class, or a multi-label video's classes
Labels = Union[int, tuple[int, ...]]


def list_entry(line: str, multi_class: bool = False) -> tuple[str, Optional[Labels]]:
    """The video of a list line and its label: the line and ``None``, or the text before its last
    field and that field when it is an integer (a label; the path itself may hold blanks). With
    ``multi_class`` (a multi-label model's list, MMAction2's ``path label [label ...]``), the first
    field and the integers after it, a tuple (``None`` for none; another field: a ``ValueError``)."""
    line = line.strip()
    if multi_class:
        path, *fields = line.split()
        labels = tuple(int(f) for f in fields if re.fullmatch(r'-?\d+', f))
        if len(labels) < len(fields):
            raise ValueError(f'expected "path label [label ...]" (a multi-label list), got {line!r}')
        return path, labels or None
    labelled = re.fullmatch(r'(.+?)\s+(-?\d+)', line)
    return (labelled.group(1), int(labelled.group(2))) if labelled else (line, None)


def csv_entries(path: Path) -> list[tuple[str, Optional[int]]]:
    """The videos of a ``.csv`` list (``tools/data/build_custom_dataset.py``'s ``path,label``
    layout, a header line ``path,...`` skipped) and their labels where the second field is a
    class index (a class name gives ``None``: the model's classes are indices)."""
    import csv

    rows = [r for r in csv.reader(path.read_text(encoding='utf-8').splitlines()) if r and r[0].strip()]
    if rows and rows[0][0].strip().lower() == 'path':
        rows = rows[1:]
    index = re.compile(r'-?\d+')
    return [(r[0].strip(), int(r[1]) if len(r) > 1 and index.fullmatch(r[1].strip()) else None) for r in rows]


def check_recognizer_config(cfg: Config) -> None:
    """A :class:`~dna_mm.errors.ConfigError` for a config whose model is not a recognizer (no
    ``model.cls_head``), before its checkpoint is read: a video is classified by a recognizer's
    head; a detector (MMDetection's scope) runs on images with MMDetection's ``DetInferencer``."""
    model = cfg.get('model') or {}
    if isinstance(model, dict) and 'cls_head' in model:
        return
    kind = type_name(model.get('type')) if isinstance(model, dict) else type(model).__name__
    other = (
        "; a detector runs on images with MMDetection's DetInferencer (from mmdet.apis import "
        'DetInferencer; DetInferencer(CONFIG, CHECKPOINT)(IMAGE, out_dir=...))'
        if cfg.get('default_scope') == 'mmdet'
        else ''
    )
    raise ConfigError(
        f"this tool classifies videos with a recognizer's head (model.cls_head); the config's model is "
        f'{kind}, which has none{other}'
    )


def num_classes_of(model: nn.Module) -> int:
    """The number of classes the recognizer's head predicts."""
    head = getattr(model, 'cls_head', None)
    if head is None or not hasattr(head, 'num_classes'):
        raise TypeError(f'{type(model).__name__} has no cls_head.num_classes: not a recognizer')
    return int(head.num_classes)


def resolve_class_names(
    cfg: Config, num_classes: int, label_map: Optional[str] = None
) -> Optional[list[str]]:
    """Class names for the predictions: ``label_map`` if given, else the config's ``label_map``
    key (set by the dataset bases in ``configs/_base_/datasets``) when it exists and has the
    model's number of classes (a config whose ``num_classes`` was changed no longer has a map
    for its classes, the demo's is written with its data: a note is logged), else ``None``
    (indices). A given ``label_map`` that is missing or of the wrong length is an error.
    """
    names, why = class_names(cfg, num_classes, label_map)
    if why is not None:
        print_log(f'note: {why}: not used, printing class indices', logger='current')
    return names


def class_names(
    cfg: Config, num_classes: int, label_map: Optional[str] = None
) -> tuple[Optional[list[str]], Optional[str]]:
    """:func:`resolve_class_names` without its note: ``(names, None)``, or ``(None, why)`` where
    the config's label map is not used (``why`` names it and the reason), or ``(None, None)``
    where there is none. A given ``label_map`` that is missing or of the wrong length is an
    error."""
    source = label_map or cfg.get('label_map')
    if source is None:
        return None, None
    try:
        names = read_label_map(source)
    except FileNotFoundError:
        if label_map:
            raise
        return None, f"the config's label map {source} does not exist (yet: the demo writes it with its data)"
    if len(names) == num_classes:
        return names, None
    if label_map:
        raise ConfigError(f'label map {source} has {len(names)} classes, the model predicts {num_classes}')
    return None, f"the config's label map {source} has {len(names)} classes, the model predicts {num_classes}"


def load_recognizer(
    config: Union[str, Config],
    checkpoint: str,
    device: Union[str, torch.device] = 'cpu',
    partial: bool = False,
) -> nn.Module:
    """Build the config's recognizer (:func:`~dna_mm.config.model.model_from_config`; pretrained weights
    cleared: the checkpoint holds the whole model; ``model.cfg`` the config, as MMAction2's
    ``init_recognizer`` sets it) and load ``checkpoint`` (file, URL or mmengine prefix;
    ``weights_only``) into it; a mismatch is a ``CheckpointMismatchError`` unless ``partial``
    (what was not loaded is printed).
    """
    cfg, model = model_from_config(config, clear_pretrained=True)
    model.cfg = cfg
    report = load_whole_model(model, checkpoint, strict=not partial)
    if not report.complete:
        print(
            f'partial load of {checkpoint}: {report.loaded} weights loaded; not loaded:\n{report.describe()}',
            flush=True,
        )
    return model.to(device).eval()


#: a video longer than this many clips gets a note that one clip stands for it (``tools/infer.py``,
#: ``tools/extract_features.py``)
LONG = 4
#: the key of the test pipeline every tool reads (the one ``tools/test.py`` runs)
PIPELINE_KEY = 'test_dataloader.dataset.pipeline'


def test_pipeline_of(cfg: Config, cfg_options: Optional[dict] = None) -> list[dict]:
    """The config's test pipeline: ``test_dataloader.dataset.pipeline``, the one ``tools/test.py``
    runs, unless ``cfg_options`` (the tool's ``--cfg-options``) changed the top-level
    ``test_pipeline`` and not that key: then ``test_pipeline`` (a config's ``test_pipeline``
    variable is copied into its loaders when the file is read; an override of one is not seen
    in the other). So either key changes what every tool runs."""
    keys = list(cfg_options or {})
    top = any(k == 'test_pipeline' or k.startswith('test_pipeline.') for k in keys)
    whole = ('test_dataloader', 'test_dataloader.dataset')
    loader = any(k in whole or k.startswith(PIPELINE_KEY) for k in keys)
    if top and not loader and cfg.get('test_pipeline') is not None:
        return list(cfg.test_pipeline)
    pipeline = (cfg.get('test_dataloader') or {}).get('dataset', {}).get('pipeline')
    if pipeline is None:
        pipeline = cfg.get('test_pipeline')
    if pipeline is None:
        raise ConfigError(f'the config has no {PIPELINE_KEY} (nor test_pipeline) to read videos with')
    frames = [type_name(step.get('type')) for step in pipeline if isinstance(step, dict)]
    frames = [name for name in frames if name in FRAME_DECODERS]
    if frames:
        raise ConfigError(
            f'{PIPELINE_KEY} decodes frame folders ({frames[0]}), and this tool reads video '
            'files: give it a config whose test pipeline opens videos (DecordInit, DecordDecode: the '
            'same model reads both), or test the frame folders with tools/test.py'
        )
    return list(pipeline)


#: test pipeline steps that read frame folders (MMAction2's RawframeDataset), not video files
FRAME_DECODERS = ('RawFrameDecode',)


def clip_coverage(video: str, pipeline: list[dict]) -> Optional[tuple[float, float]]:
    """``(the video's seconds, the seconds one clip of the test pipeline spans)`` from the
    file's header and the pipeline's sampling step (``clip_len x frame_interval`` frames at the
    video's rate), or ``None`` when either is unknown (a header PyAV cannot read, where the
    pipeline's reader could)."""
    from ..over_time.frame_stream import FrameStream
    from ..over_time.windows import split_pipeline, window_sampling

    try:
        _, sample, _ = split_pipeline(pipeline)
        with FrameStream(video) as stream:
            info = stream.info
    except (ConfigError, DataError):
        return None
    if not info.duration:
        return None
    return info.duration, window_sampling(sample, info.fps).span / info.fps


def why_unreadable(video: str, err: BaseException) -> str:
    """What is wrong with ``video``, on which ``err`` stopped :func:`predict`, in words (without
    its path): a :class:`~dna_mm.errors.DataError`'s own message; else what dna_mm's reader finds
    wrong with the file as it opens and indexes it
    (:class:`~dna_mm.datasets.video_reader.KeyframeReader`: empty, not a video, an MP4 without
    its index, truncated or damaged, ...), when decord's error (``av_read_frame failed with
    1094995529``) does not say; else ``err``'s type and message."""
    from ..datasets.video_reader import KeyframeReader

    if isinstance(err, DataError):
        return str(err).removeprefix(f'{video}: ')
    try:
        KeyframeReader(video, name=video).close()
    except DataError as found:
        return str(found).removeprefix(f'{video}: ')
    except Exception:  # noqa: BLE001 (the reader fails otherwise: the first error says what it can)
        pass
    return f'{type(err).__name__}: {err}'


class UnreadableVideo(Exception):
    """``video`` could not be made into the model's input by the test pipeline (its decoding,
    sampling or cropping raised ``__cause__``), as opposed to a failure of the model."""

    def __init__(self, video: str) -> None:
        super().__init__(video)
        self.video = video


def predict(model: nn.Module, video: str, topk: int = 5, pipeline: Optional[list[dict]] = None) -> Prediction:
    """The ``topk`` classes of ``video`` through the config's test pipeline (``pipeline``,
    default :func:`test_pipeline_of` the model's config; MMAction2's ``inference_recognizer``;
    the scores are the head's class probabilities, averaged over the pipeline's clips and crops;
    a multi-label head's, each class's own: :func:`~dna_mm.over_time.predictor.class_scores`).

    Raises:
        UnreadableVideo: the pipeline failed on ``video`` (the model's own errors are raised as
            they are: not the video's doing).
    """
    from mmaction.apis import inference_recognizer  # noqa: PLC0415
    from mmengine.dataset import Compose

    from ..over_time.predictor import class_scores

    steps = Compose(pipeline if pipeline is not None else test_pipeline_of(model.cfg))
    try:
        sample = steps(dict(filename=video, label=-1, start_index=0, modality='RGB'))  # as MMAction2's
    except Exception as err:  # noqa: BLE001  (decord, PyAV, a transform: the video's)
        raise UnreadableVideo(video) from err
    scores = class_scores(model, inference_recognizer(model, sample, Compose([]))).cpu()  # [num_classes]
    top = scores.topk(min(topk, scores.numel()))
    return Prediction(video, top.indices.tolist(), top.values.tolist())
