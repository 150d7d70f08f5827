"""Models and inputs for the analyses: an :class:`AnalysisModel` from an OpenMMLab config
(:func:`load_mm_model`) or a ``timm:<model name>`` (:func:`load_timm_model`); it gives
normalised input batches, runs the model on them and knows how to add pixel noise.

A model whose attentions are not of the dna_mm family (the softmax baselines on timm's own
``Attention``: ``configs/imagenet/vit-*_softmax_in1k.py``, ``timm:vit_*``) is analysed through
dna_mm's softmax member holding the same weights (:func:`family_view`), which computes the same
outputs; the analyses that need a quantity it lacks (DnA's α, a second branch) leave it out.

A run is labelled in figures and reports by its attention member, as the study names its methods
(:func:`model_label`: ``softmax``, ``Diff``, ``DnA (A±)`` with the variant's paper name), and by
its config's name only where its members are mixed or unknown.
"""

from __future__ import annotations

import functools
import os
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch
from torch import Tensor, nn

from ..checkpoint import load_whole_model
from ..config.model import model_from_config
from ..config.timm_models import create_timm_model
from ..errors import ConfigError, DataError, MissingFileError, UnsupportedModelError, UserError
from ..family import DNA_VARIANTS

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.webp')
VIDEO_EXTENSIONS = ('.mp4', '.avi', '.mkv', '.mov', '.webm')
#: the files a model reads (:attr:`AnalysisModel.input_kind`)
INPUT_EXTENSIONS = {'image': IMAGE_EXTENSIONS, 'video': VIDEO_EXTENSIONS}


@dataclass
class Batch:
    """Normalised model inputs and, where known, labels ``[B]`` (-1 = none); ``meta['total']``:
    the number of samples the iteration will give (for progress bars)."""

    inputs: Tensor
    labels: Optional[Tensor] = None
    meta: dict = field(default_factory=dict)


@dataclass
class AnalysisModel:
    """A model ready for analysis.

    Attributes:
        model: The whole model (eval mode).
        forward: ``inputs → logits [B, K]`` (classifiers) or the backbone's output.
        batches: ``num_samples → iterator of Batch`` over the evaluation data.
        mean, std: Per-channel normalisation of the inputs (``x = (raw - mean) / std``), shaped
            to broadcast against ``inputs``.
        pixel_max: Range of the raw pixels (255 for OpenMMLab's uint8 pipelines, 1 for timm).
        is_classifier: ``forward`` gives class logits (needed by relevance maps and accuracy).
        name: The config's name (its file's stem, or the timm model's): for messages.
        load_input: ``path → inputs [1, ...]`` of one image / video, as the model sees it.
        input_kind: What ``load_input`` reads: ``'image'`` or ``'video'``.
        notes: What was done to the model to analyse it (:func:`family_view`), one line each.
        label: How figures and reports name the run by default (:func:`model_label`: its
            attention member; ``name`` where its members are mixed or unknown, and where not given).
    """

    model: nn.Module
    forward: Callable[[Tensor], Any]
    batches: Callable[[Optional[int]], Iterator[Batch]]
    mean: Tensor
    std: Tensor
    pixel_max: float
    is_classifier: bool
    name: str
    load_input: Callable[[str], Tensor]
    input_kind: str = 'image'
    notes: list[str] = field(default_factory=list)
    label: Optional[str] = None

    def __post_init__(self) -> None:
        if not self.label:
            self.label = self.name

    def raw_pixels(self, inputs: Tensor) -> Tensor:
        """Normalised inputs back to pixels in ``[0, 1]``."""
        return ((inputs * self.std + self.mean) / self.pixel_max).clamp(0, 1)

    def add_noise(
        self,
        inputs: Tensor,
        sigma: float,
        space: str = 'normalized',
        generator: Optional[torch.Generator] = None,
    ) -> Tensor:
        """Gaussian noise of standard deviation ``sigma``.

        ``'normalized'`` (default): ``x + σ·n`` on the normalised inputs the model sees (σ in
        units of the normalised pixel scale). ``'pixel'``: ``σ`` as a fraction of the pixel range
        added to the raw pixels, clipped to ``[0, pixel_max]``, normalised again.
        """
        if sigma == 0:
            return inputs
        noise = torch.randn(inputs.shape, generator=generator, dtype=inputs.dtype)
        if space == 'normalized':
            return inputs + sigma * noise
        if space != 'pixel':
            raise ValueError(f"noise space must be 'normalized' or 'pixel', got {space!r}")
        raw = inputs * self.std + self.mean
        raw = (raw + sigma * self.pixel_max * noise).clamp(0, self.pixel_max)
        return (raw - self.mean) / self.std

    def psnr(self, clean: Tensor, noisy: Tensor) -> float:
        """PSNR in dB of ``noisy`` against ``clean`` on the raw pixel scale."""
        err = ((noisy - clean) * self.std).pow(2).mean()
        return float(10 * torch.log10(self.pixel_max**2 / err.clamp_min(1e-20)))


# -- OpenMMLab configs ---------------------------------------------------------------------
def load_mm_model(
    config: str,
    checkpoint: str,
    cfg_options: Optional[dict] = None,
    split: str = 'test',
    batch_size: Optional[int] = None,
) -> AnalysisModel:
    """An OpenMMLab model from ``config`` with the weights of ``checkpoint``.

    Args:
        config: Config file (or ``package::`` name: :func:`dna_mm.config.build.read_config`).
        checkpoint: Whole-model checkpoint of that config.
        cfg_options: Overrides (``--cfg-options``).
        split: ``'test'`` or ``'val'``: whose dataloader gives the samples.
        batch_size: Override the loader's batch size.
    """
    from mmengine.runner import Runner

    cfg, model = model_from_config(config, cfg_options)
    load_whole_model(model, checkpoint, advice=mismatch_advice(config))
    notes = family_view(model, config)
    model.eval()
    key = f'{split}_dataloader'
    if cfg.get(key) is None:
        raise ConfigError(f'{config}: no {key} to take the samples from')
    loader_cfg = cfg[key].copy()
    if batch_size is not None:
        loader_cfg['batch_size'] = batch_size
    pre = model.data_preprocessor
    mean, std = getattr(pre, 'mean', None), getattr(pre, 'std', None)
    if mean is None or std is None:
        raise ConfigError(f'{config}: the data_preprocessor has no mean / std (needed for noise)')
    # channels on axis 2 of [B, clips, C, T, H, W] (MMAction2 NCTHW), axis 1 of [B, C, H, W] otherwise
    shape = (1, 1, -1, 1, 1, 1) if getattr(pre, 'format_shape', None) == 'NCTHW' else (1, -1, 1, 1)
    mean, std = mean.reshape(shape), std.reshape(shape)
    is_recognizer = hasattr(model, 'cls_head')  # MMAction2: reads videos
    head = model.cls_head if is_recognizer else getattr(model, 'head', None)
    is_classifier = getattr(head, 'num_classes', None) is not None  # and MMPretrain's ImageClassifier
    kind = 'video' if is_recognizer else 'image'

    def forward(inputs: Tensor) -> Tensor:
        if is_recognizer:  # [B, clips, C, T, H, W] -> logits [B·clips, K] -> mean over clips [B, K]
            logits = model(inputs, mode='tensor', stage='head')
            return logits.reshape(inputs.shape[0], -1, logits.shape[-1]).mean(dim=1)
        if is_classifier:  # [B, C, H, W] -> the head's logits [B, K]
            return model(inputs, mode='tensor')
        return model.backbone(inputs)

    @functools.cache
    def test_pipeline() -> Callable[[dict], dict]:
        """The config's test pipeline, built at the first input (the analyses never need it)."""
        from mmengine.dataset import Compose

        return Compose(cfg[key].dataset.pipeline)

    def load_input(path: str) -> Tensor:
        """One video (a recognizer) or image through the config's test pipeline and the data
        preprocessor."""
        check_input(config, path, kind)
        if kind == 'video':
            sample = dict(filename=path, label=-1, start_index=0, modality='RGB')
        else:
            sample = dict(img_path=path)
        packed = test_pipeline()(sample)
        data = pre(dict(inputs=[packed['inputs']], data_samples=[packed['data_samples']]), False)
        return data['inputs']

    def batches(num_samples: Optional[int]) -> Iterator[Batch]:
        loader = Runner.build_dataloader(loader_cfg)
        seen = 0
        total = len(loader.dataset) if num_samples is None else min(num_samples, len(loader.dataset))
        for data in loader:
            data = pre(data, False)
            samples = data.get('data_samples') or []
            labels = torch.tensor([_label(s) for s in samples]) if samples else None
            keep = None if num_samples is None else num_samples - seen  # slice [:None]: all
            inputs = data['inputs'][:keep]
            seen += inputs.shape[0]
            yield Batch(inputs, None if labels is None else labels[:keep], meta=dict(total=total))
            if num_samples is not None and seen >= num_samples:
                return

    pixel_max = 255.0 if float(mean.max()) > 1.5 else 1.0
    name = osp.splitext(osp.basename(config))[0]
    label = model_label(model, name)
    return AnalysisModel(
        model, forward, batches, mean, std, pixel_max, is_classifier, name, load_input, kind, notes, label
    )


def _label(sample: Any) -> int:
    """The first ground-truth label of a data sample (``gt_labels.item`` / ``gt_label``), else -1."""
    for key in ('gt_labels', 'gt_label'):
        holder = getattr(sample, key, None)
        item = holder.item if isinstance(getattr(holder, 'item', None), Tensor) else holder
        if isinstance(item, Tensor) and item.numel() >= 1:
            return int(item.flatten()[0])
    return -1


# -- timm ------------------------------------------------------------------------------------
def load_timm_model(
    name: str,
    checkpoint: str,
    model_args: Optional[dict] = None,
    input_dir: Optional[str] = None,
    batch_size: int = 8,
) -> AnalysisModel:
    """``timm.create_model(name, **model_args)`` (:func:`~dna_mm.config.timm_models.create_timm_model`:
    a misspelt name or argument is one line) with ``checkpoint``'s weights; samples: the
    images under ``input_dir`` (sorted, recursive; labels unknown), timm's eval transform at the
    size the model was built for (:func:`built_input_size`)."""
    from timm.data import create_transform, resolve_data_config

    import dna_mm  # noqa: F401  (registers dna_vit_*)

    model = create_timm_model(name, model_args)
    load_whole_model(model, checkpoint, advice=mismatch_advice(f'timm:{name}'))
    notes = family_view(model, f'timm:{name}')
    model.eval()
    size = built_input_size(model)
    data_cfg = resolve_data_config({} if size is None else dict(input_size=size), model=model)
    transform = create_transform(**data_cfg, is_training=False)
    mean = torch.tensor(data_cfg['mean']).reshape(1, -1, 1, 1)
    std = torch.tensor(data_cfg['std']).reshape(1, -1, 1, 1)

    def batches(num_samples: Optional[int]) -> Iterator[Batch]:
        if input_dir is None:
            raise ConfigError(f'timm:{name}: pass an image folder (--input-dir)')
        files = list_files(input_dir, IMAGE_EXTENSIONS)[:num_samples]
        for i in range(0, len(files), batch_size):
            chunk = files[i : i + batch_size]
            batch = torch.stack([transform(load_image(f)) for f in chunk])
            yield Batch(batch, meta=dict(files=chunk, total=len(files)))

    def load_input(path: str) -> Tensor:
        check_input(f'timm:{name}', path, 'image')
        return transform(load_image(path))[None]

    label = model_label(model, name)
    return AnalysisModel(model, model, batches, mean, std, 1.0, True, name, load_input, 'image', notes, label)


def mismatch_advice(config: str) -> str:
    """How the refusal of a checkpoint that does not match ``config``'s model ends in the
    analysis tools (:func:`~dna_mm.checkpoint.loading.mismatch_line`'s ``advice``): they load
    whole checkpoints only, so what to do is give the config its own model's checkpoint."""
    return (
        f"Nothing was loaded: analyse {config} with a checkpoint of its own model (one its training "
        f"wrote), not another model's"
    )


def _settings(module: nn.Module) -> dict:
    """The variant (a DnA member's) and gate of one attention, as a study method names them."""
    variant = getattr(module, 'variant', None)
    settings = dict(variant=variant if isinstance(variant, str) and variant in DNA_VARIANTS else None)
    settings['gated'] = bool(getattr(module, 'gated', False))
    return settings


def member_label(module: nn.Module) -> str:
    """How figures name one attention: as the study names its method
    (:func:`~dna_mm.analysis.plots.study.method_label` of the module's class, variant and gate:
    ``softmax``, ``Diff``, ``DnA (A±)``, ``DnA (A±) + gate``); a class the registry does not hold
    (timm's ``TimmDnAAttention``) as its member (:func:`~dna_mm.models.sites.attention_kind`:
    ``DnA (Q±V±)``)."""
    from ..family import method_of
    from ..models.attention.builder import attention_types
    from ..models.sites import attention_kind
    from .plots.study import method_label

    cls = type(module)
    name = cls.__name__ if attention_types().get(cls.__name__) is cls else attention_kind(module)
    return method_label(method_of(name, _settings(module)))


def member_method(module: nn.Module) -> str:
    """The member of one attention as a study method: its member's short name (a subclass's its
    member's: timm's ``TimmDnAAttention`` is ``dna``), variant and gate (``softmax``,
    ``dna:qpm_vpm``, ``dna:apm+gated``); a member without a short name by its class name."""
    from ..family import method_of
    from ..models.sites import attention_kind

    return method_of(attention_kind(module), _settings(module))


def _one_member(model: nn.Module, key: Callable[[nn.Module], str]) -> Optional[str]:
    """``key`` of the attentions of ``model`` where one member (one variant, gated or not) holds
    every attention, or holds them with the layers its own per-layer rule gives another member
    (Cog's softmax first and last layer: :meth:`~dna_mm.models.attention.AttentionBase.layer_config`);
    ``None`` where the members are mixed otherwise, or the model has none."""
    from ..models.sites import find_attention_sites

    try:
        sites = find_attention_sites(model)
    except UnsupportedModelError:
        return None
    keys = {key(s.module) for s in sites}
    if len(keys) == 1:
        return keys.pop()
    num_layers = max(s.layer for s in sites) + 1
    for cls in dict.fromkeys(type(s.module) for s in sites):
        if all(_layer_type(cls, s.layer, num_layers) is type(s.module) for s in sites):
            own = {key(s.module) for s in sites if type(s.module) is cls}
            if len(own) == 1:
                return own.pop()
    return None


def model_label(model: nn.Module, name: str) -> str:
    """How figures and reports name a run of ``model`` by default: the label of its attention
    member (:func:`member_label`) where one member holds its attentions (:func:`_one_member`);
    ``name`` (the config's) where the members are mixed, or the model has none."""
    return _one_member(model, member_label) or name


def model_member(model: nn.Module) -> Optional[str]:
    """The attention member of ``model`` as a study method (:func:`member_method`), which the
    figures colour its runs by, where one member holds its attentions (:func:`_one_member`);
    ``None`` where the members are mixed, or the model has none."""
    return _one_member(model, member_method)


def _layer_type(cls: type, layer: int, num_layers: int) -> Optional[type]:
    """The member class ``cls``'s per-layer rule builds at ``layer`` of ``num_layers``
    (``None``: a type no member is registered as now)."""
    from ..models.attention.builder import attention_types

    kind = cls.layer_config(dict(type=cls.__name__), layer, num_layers).get('type')
    return kind if isinstance(kind, type) else attention_types().get(kind)


def built_input_size(model: nn.Module) -> Optional[tuple[int, int, int]]:
    """``(C, H, W)`` a timm model was built for: its patch embedding's ``img_size`` and input
    channels (``create_model(..., img_size=32)`` keeps the 224 of the stored ``pretrained_cfg``,
    which ``resolve_data_config`` would otherwise give); ``None`` without a patch embedding."""
    embed = getattr(model, 'patch_embed', None)
    size = getattr(embed, 'img_size', None)
    if size is None:
        return None
    h, w = (size, size) if isinstance(size, int) else size
    channels = getattr(getattr(embed, 'proj', None), 'in_channels', 3)
    return int(channels), int(h), int(w)


def family_view(model: nn.Module, name: str) -> list[str]:
    """Make ``model``'s attentions readable by the analyses, in place; returns a note per change.

    A model holding a family attention is left as it is. One holding none (a softmax baseline on
    timm's ``Attention``, an OpenMMLab host attention) has each host attention replaced by
    dna_mm's softmax member loaded with its weights
    (:func:`~dna_mm.models.adapters.swap.swap_attention`): the same computation, so the same
    logits, and maps the collectors can read.

    Raises:
        UnsupportedModelError: ``model`` has no attention the swap can read (the message names
            ``name`` and why).
    """
    from ..models.adapters.swap import swap_attention
    from ..models.attention import AttentionBase

    if any(isinstance(m, AttentionBase) for m in model.modules()):
        return []
    try:
        swapped = swap_attention(model, 'softmax')
    except UnsupportedModelError as err:
        raise UnsupportedModelError(
            f'{name}: {type(model).__name__} holds no dna_mm attention, and its own cannot be read as '
            f"dna_mm's softmax: {err}"
        ) from err
    model.eval()
    return [
        f'{name}: its {len(swapped)} attention(s) ({swapped[0]}, ...) analysed as dna_mm softmax '
        'attentions holding the same weights (the same outputs)'
    ]


def check_input(config: str, path: str, kind: Optional[str] = None) -> None:
    """``path`` is an existing file, of ``kind`` (``'image'`` / ``'video'``, the model of
    ``config`` reads: :attr:`AnalysisModel.input_kind`) when given; else a one-line error naming it."""
    if not osp.isfile(path):
        raise MissingFileError(f'input {path} does not exist')
    if kind is None:
        return
    extensions = INPUT_EXTENSIONS[kind]
    if not path.lower().endswith(extensions):
        raise DataError(
            f'{config}: --input must be {"an" if kind == "image" else "a"} {kind} '
            f'({", ".join(extensions)}), got {path}'
        )


def out_folder(path: str, flag: str = '--out', make: bool = True) -> str:
    """``path`` as an output folder, made (with its parents) when ``make``; a
    :class:`~dna_mm.errors.UserError` naming ``flag`` when it, or the nearest of its parents that
    exists, is a file, or the folder cannot be made."""
    existing = osp.abspath(path)
    while not osp.exists(existing) and osp.dirname(existing) != existing:
        existing = osp.dirname(existing)
    if not osp.isdir(existing):
        what = 'is a file' if existing == osp.abspath(path) else f'is inside {existing}, a file'
        raise UserError(f'{flag} {path} {what}; {flag} names the folder to write into')
    if make:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as err:
            raise UserError(f'{flag} {path}: cannot make the folder ({err.strerror or err})') from err
    return path


def list_files(root: str, extensions: tuple[str, ...]) -> list[str]:
    """Files under ``root`` with one of ``extensions`` (sorted); an error when there are none."""
    if not osp.isdir(root):
        raise FileNotFoundError(f'{root} is not a directory')
    found = sorted(
        osp.join(d, f) for d, _, files in os.walk(root) for f in files if f.lower().endswith(extensions)
    )
    if not found:
        raise FileNotFoundError(f'{root}: no files ending in {", ".join(extensions)}')
    return found


def load_image(path: str):
    """An RGB PIL image; a :class:`~dna_mm.errors.DataError` naming ``path`` when it cannot be read."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            return img.convert('RGB')
    except OSError as err:  # PIL.UnidentifiedImageError, a truncated file
        raise DataError(f'image {path} cannot be read: {err}') from err


def load_model(
    config: str,
    checkpoint: str,
    cfg_options: Optional[dict] = None,
    input_dir: Optional[str] = None,
    split: str = 'test',
    batch_size: Optional[int] = None,
) -> AnalysisModel:
    """``config`` = an OpenMMLab config file, or ``timm:<name>`` (then ``cfg_options`` are the
    ``create_model`` keyword arguments and ``input_dir`` the image folder)."""
    if config.startswith('timm:'):
        return load_timm_model(config[len('timm:') :], checkpoint, cfg_options, input_dir, batch_size or 8)
    return load_mm_model(config, checkpoint, cfg_options, split, batch_size)
