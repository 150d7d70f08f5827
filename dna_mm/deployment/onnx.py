"""ONNX export of dna_mm's classifiers: MMAction2 recognizers (TimeSformer with DnA, softmax, Diff
or Cog attention; divided, joint or space-only) and timm ``dna_vit_*``.

The exported graph::

    inputs  float32 [B, C, T, H, W] (recognizer: one clip)  or  [B, C, H, W] (image)
            normalised as the config's data_preprocessor / timm's eval transform does
            (``(pixels - mean) / std``; both are written into the file's metadata)
    logits  float32 [B, K]  class scores before the softmax (a multi-label model's,
            ``cls_head.multi_class``: before a sigmoid each; the metadata says which)

``B`` is fixed at export, or symbolic (``dynamic_batch``). The graph is what the model's
inference path computes: attention on its fast path (SDPA calls; DnA's two of them), MMAction2's
recognizer as ``model(inputs[:, None], mode='tensor', stage='head')``, the head's scores for the one clip.

Exporters: TorchScript-based (``dynamo=False``, opset 17 by default) exports every attention of
the family; the ``torch.export``-based one (``dynamo=True``) needs opset 18 or later and
``onnxscript``. :func:`verify` runs the file in onnxruntime and returns the largest absolute
difference to the eager PyTorch model.
"""

from __future__ import annotations

import json
import os.path as osp
import warnings
from dataclasses import dataclass, field
from typing import Optional, Sequence

import torch
from torch import Tensor, nn

from ..config.timm_models import create_timm_model, timm_name
from ..datasets.protocols import read_label_map
from ..errors import UnsupportedModelError
from ..utils.held_output import held_output

#: opset of the TorchScript exporter's default
DEFAULT_OPSET = 17
#: what a multi-label recognizer's (``cls_head.multi_class``) output is, in the file's metadata
MULTI_LABEL_OUTPUT = (
    "logits [B, K] (before a sigmoid each: a multi-label model's classes are scored on their own)"
)


class ExportError(UnsupportedModelError):
    """A model or configuration the export cannot take (user-facing, one line)."""


class RecognizerLogits(nn.Module):
    """MMAction2 recognizer as ``[B, C, T, H, W] → logits [B, K]`` (one clip per sample)."""

    def __init__(self, recognizer: nn.Module) -> None:
        super().__init__()
        self.recognizer = recognizer

    def forward(self, inputs: Tensor) -> Tensor:
        # [B, C, T, H, W] -> [B, 1 clip, C, T, H, W] -> the head's scores [B, K]
        return self.recognizer(inputs[:, None], mode='tensor', stage='head')


@dataclass
class Exportable:
    """A model ready for :func:`export`."""

    model: nn.Module  # inputs -> logits, eval mode
    input_shape: tuple[int, ...]  # example input, batch first: [1, C, T, H, W] / [1, C, H, W]
    mean: list[float]  # per-channel input normalisation (pixel scale of the source pipeline)
    std: list[float]
    name: str  # for messages
    metadata: dict[str, str] = field(default_factory=dict)  # extra strings for the ONNX file


def _image_shape(model: nn.Module, config: str) -> tuple[int, ...]:
    """The example input ``(1, C, H, W)`` of a timm model: its patch embedding's input channels and
    image size; a model without one (not a ViT) is an :class:`ExportError`."""
    embed = getattr(model, 'patch_embed', None)
    size = getattr(embed, 'img_size', None)
    channels = getattr(getattr(embed, 'proj', None), 'in_channels', None)
    if size is None or channels is None:
        raise ExportError(
            f'{config}: {type(model).__name__} has no ViT patch embedding (patch_embed.proj, img_size) '
            'to fix the input shape; the ONNX export takes timm:dna_vit_* (and timm ViT) models'
        )
    return (1, int(channels), *((size, size) if isinstance(size, int) else size))


def label_map_metadata(label_map: Optional[str], num_classes: int) -> dict[str, str]:
    """The metadata of a recognizer config's ``label_map``: ``dna_mm.label_map`` as the export
    read it (a file by its absolute path: a relative one is relative to the current folder, as
    ``tools/infer.py`` reads it; a label map shipped with dna_mm, such as ``label_map_k400``, by its
    name) and, where it has one name for each of the model's ``num_classes``, ``dna_mm.classes``:
    the names as a JSON list, so that a deployed file needs no side file. A map that cannot be
    read, or whose length is not the model's (a config whose ``num_classes`` was changed), gives
    no names, as ``tools/infer.py`` uses none."""
    if not label_map:
        return {}
    source = str(label_map)
    meta = {'dna_mm.label_map': osp.abspath(source) if osp.isfile(source) else source}
    try:
        names = read_label_map(source)
    except FileNotFoundError:
        return meta
    if len(names) == num_classes:
        meta['dna_mm.classes'] = json.dumps(names, ensure_ascii=False)
    return meta


def attention_methods(model: nn.Module) -> list[str]:
    """The attentions of ``model``, each once in the order they run, by the name the tools take
    (``'dna:qpm_vpm'``, ``'dna:apm+gated'``, ``'softmax'``: :func:`~dna_mm.family.method_of`)."""
    from ..family import method_of
    from ..models.attention import AttentionBase

    found = [
        method_of(
            type(m).short_name or type(m).__name__, dict(variant=getattr(m, 'variant', None), gated=m.gated)
        )
        for m in model.modules()
        if isinstance(m, AttentionBase)
    ]
    return list(dict.fromkeys(found))


def load_exportable(config: str, checkpoint: Optional[str], cfg_options: Optional[dict] = None) -> Exportable:
    """The model of ``config`` (an OpenMMLab recognizer config, or ``timm:<name>`` with
    ``cfg_options`` as ``create_model`` arguments) with ``checkpoint``'s weights (``None``:
    the initialisation, for benchmarks). A model with no class scores (a detector) is an
    ``ExportError``."""
    from ..checkpoint import load_whole_model
    from ..config.model import model_from_config

    name = timm_name(config)
    if name is not None:
        model = create_timm_model(name, cfg_options)
        pretrained = model.pretrained_cfg
        exportable = Exportable(
            model,
            _image_shape(model, config),
            [float(m) for m in pretrained.get('mean', (0.485, 0.456, 0.406))],
            [float(s) for s in pretrained.get('std', (0.229, 0.224, 0.225))],
            name,
            {'dna_mm.source': config, 'dna_mm.pixel_range': '1'},
        )
    else:
        cfg, model = model_from_config(config, cfg_options)
        if not hasattr(model, 'cls_head'):
            raise ExportError(
                f'{config}: {type(model).__name__} is not a recognizer; the ONNX export takes '
                f'recognizers (class scores) and timm:dna_vit_* models'
            )
        bb = cfg.model.backbone
        if 'num_frames' not in bb or 'img_size' not in bb:
            raise ExportError(
                f'{config}: model.backbone needs num_frames and img_size to fix the input shape'
            )
        size = bb.img_size if isinstance(bb.img_size, (tuple, list)) else (bb.img_size, bb.img_size)
        source = config if '::' in config else osp.abspath(config)  # a package's (dna_mm::…): its name
        meta = {'dna_mm.source': source, 'dna_mm.pixel_range': '255'}
        meta.update(label_map_metadata(cfg.get('label_map'), int(model.cls_head.num_classes)))
        if getattr(model.cls_head, 'multi_class', False):  # trained with a sigmoid a class
            meta['dna_mm.output'] = MULTI_LABEL_OUTPUT
        exportable = Exportable(
            RecognizerLogits(model),
            (1, bb.get('in_channels', 3), int(bb.num_frames), *size),
            model.data_preprocessor.mean.flatten().tolist(),
            model.data_preprocessor.std.flatten().tolist(),
            osp.splitext(osp.basename(config.rpartition('::')[2]))[0],
            meta,
        )
    if checkpoint:
        advice = (
            f'Nothing was loaded: export {config} with a checkpoint of its own model'  # no partial load here
        )
        load_whole_model(model, checkpoint, advice=advice)
    exportable.model.eval()
    return exportable


#: what the TorchScript exporter prints (from C++, on stdout) before the graph it was building
#: when an operator stopped it; the error that follows says which operator, in one line
GRAPH_DUMP = 'ONNX graph being constructed during exception:'


def without_graph_dump(text: str) -> str:
    """``text`` up to the exporter's :data:`GRAPH_DUMP` (some hundred lines of graph)."""
    return text.partition(GRAPH_DUMP)[0]


def example_input(shape: Sequence[int], batch: int = 1, seed: int = 0) -> Tensor:
    """A seeded standard-normal input of ``shape`` with batch ``batch`` (normalised scale)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((batch, *shape[1:]), generator=gen)


def export(
    ex: Exportable,
    path: str,
    batch: int = 1,
    dynamic_batch: bool = False,
    opset: int = DEFAULT_OPSET,
    dynamo: bool = False,
) -> str:
    """Write ``ex.model`` as ONNX to ``path`` (input ``inputs``, output ``logits``). ``batch`` is
    the traced example's (the graph's unless ``dynamic_batch``: a symbolic batch dimension);
    ``opset``: up to 20 for the TorchScript exporter, 18 or later with ``dynamo`` (the
    ``torch.export``-based exporter)."""
    import onnx

    # torch.export specialises a size-1 dimension: trace a symbolic batch with 2 samples
    x = example_input(ex.input_shape, max(batch, 2) if dynamic_batch else batch)
    kwargs: dict = dict(input_names=['inputs'], output_names=['logits'], opset_version=opset, dynamo=dynamo)
    if dynamo:
        kwargs.update(external_data=False, verbose=False)
        if dynamic_batch:
            kwargs['dynamic_shapes'] = ({0: torch.export.Dim('batch', min=1, max=4096)},)
    elif dynamic_batch:
        kwargs['dynamic_axes'] = {'inputs': {0: 'batch'}, 'logits': {0: 'batch'}}
    with torch.no_grad(), warnings.catch_warnings(), held_output(1, without_graph_dump):
        warnings.simplefilter('ignore')  # the exporters' deprecation / tracer notes
        try:
            torch.onnx.export(ex.model, (x,), path, **kwargs)
        except torch.onnx.errors.UnsupportedOperatorError as err:
            first = str(err).splitlines()[0]
            raise ExportError(
                f'{ex.name}: {first} by the TorchScript exporter; export with the dynamo '
                f'exporter instead (--dynamo, opset 18 or later)'
            ) from None
    proto = onnx.load(path)
    meta = {
        **ex.metadata,
        'dna_mm.input': 'inputs [B, C, T, H, W]' if len(ex.input_shape) == 5 else 'inputs [B, C, H, W]',
        'dna_mm.mean': json.dumps(ex.mean),
        'dna_mm.std': json.dumps(ex.std),
        'dna_mm.output': ex.metadata.get('dna_mm.output', 'logits [B, K] (before softmax)'),
    }
    attentions = attention_methods(ex.model)
    if attentions:
        meta['dna_mm.attention'] = json.dumps(attentions, ensure_ascii=False)
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(proto)
    onnx.save(proto, path)
    return path


def onnx_session(path: str, threads: Optional[int] = None):
    """An onnxruntime CPU session (``threads``: intra-op threads, default onnxruntime's)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads is not None:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=['CPUExecutionProvider'])


def verify(ex: Exportable, path: str, batches: Sequence[int] = (1,), seed: int = 1) -> dict[int, float]:
    """Largest ``|onnxruntime − PyTorch|`` of the logits per batch size, on seeded inputs
    different from the traced example."""
    session = onnx_session(path)
    diffs = {}
    for b in batches:
        x = example_input(ex.input_shape, b, seed)
        with torch.no_grad():
            ref = ex.model(x).float().numpy()
        (out,) = session.run(['logits'], {'inputs': x.numpy()})
        if out.shape != ref.shape:
            raise AssertionError(
                f'{path}: onnxruntime gave logits {list(out.shape)}, PyTorch {list(ref.shape)}'
            )
        diffs[b] = float(abs(out - ref).max())
    return diffs
