"""The host attentions a family attention can replace: one row of :data:`HOSTS` per host class.

Each row names the host class, its form (a ``from_host`` builder in :mod:`dna_mm.models.layers`,
:mod:`~dna_mm.models.layers.forms`), how the host's keys read into the form's
(:mod:`dna_mm.converters.hosts`), where the family attention sits inside the form and how its
weights are fitted (:mod:`dna_mm.models.fitting`):

======================================  =================================  ======================
host                                    form (keys under ``P.``)           host keys it reads
======================================  =================================  ======================
timm ``Attention`` (ViT, DeiT, ...)     the family module (``qkv``,        same names
                                        ``proj``)
MMAction2 ``vit_mae.Attention``         the family module, ``qkv`` with    ``qkv.weight`` +
(VideoMAE / VideoMAE V2)                bias                               ``q_bias``, ``v_bias``
MMAction2 ``WindowAttention3D``         ``WindowAttention3DAdapter``       ``qkv``, ``proj`` →
(Video Swin); MMPretrain / MMDetection  (``attn.*``, the bias table)       ``attn.qkv``, ...
``WindowMSA`` (Swin)
MMPretrain ``MultiheadAttention``       ``MultiheadAttentionAdapter``      ``qkv``, ``proj`` →
(ViT, DeiT, DeiT III)                   (``attn.*``, ``gamma1``)           ``attn.qkv``, ...
MMPretrain ``BEiTAttention`` (BEiT)     ``BEiTAttentionAdapter``           ``qkv`` + ``q_bias`` /
                                        (``attn.*``, the bias table)       ``v_bias`` → ``attn.qkv``
mmcv ``MultiheadAttention`` (DETR, any  ``TokenAttention`` (``attn.*``)    ``attn.in_proj_*``,
``BaseTransformerLayer``)                                                  ``attn.out_proj``
MMAction2 ``DividedTemporalAttention``  the host's module, its ``attn``     ``attn.in_proj_*``,
``WithNorm``, ``DividedSpatial``        the member in                      ``attn.out_proj``
``AttentionWithNorm`` (TimeSformer)     ``nn.MultiheadAttention``'s form
timm ``EvaAttention`` (EVA / EVA-02     ``EvaAttentionAdapter``            ``qkv.weight`` +
without rotary positions)               (``attn.*``)                       ``q_bias`` / ``v_bias``,
                                                                           or ``q/k/v_proj``
torch ``nn.MultiheadAttention``         its ``nn.MultiheadAttention``      ``in_proj_*``,
(torchvision ViT, CLIP blocks,          form (``qkv`` or ``q/k/v_proj``,   ``out_proj``, or
UniFormerV2's local blocks, ...)        ``proj``)                          ``q/k/v_proj_weight``
MMAction2 UniFormerV2 ``Extractor``     ``ExtractorAdapter``               ``attn.in_proj_*``,
(the global UniBlocks)                  (the form under ``attn.``)         ``attn.out_proj``
MMAction2 MViTv2                        its MViTv2 form (pooling, rel-     same names; DnA's
``MultiScaleAttention``                 pos)                               negative pooling
                                                                           generated
======================================  =================================  ======================

Blocks whose class name looks like attention but which reach their attention only through its
call are walked through (:data:`CONTAINERS`, :data:`CONTAINER_NAMES`): CLIP's
``ResidualAttentionBlock``, OpenCLIP's ``AttentionalPooler``.

A host's position bias is the form's to declare (:mod:`dna_mm.models.layers.forms`): a bias
the form adds itself (a bias table, relative positions), or, in the row's ``bias_from``, one the
model hands the host at its call (BEiT's shared table); a member that takes none is refused there,
by the one check :func:`~dna_mm.models.layers.forms.check_position_bias`. Every form keeps the
host's plain settings (``num_heads``, ``embed_dims``, ``head_dims``, ``scale``, ...:
:func:`~dna_mm.models.layers.forms.keep_settings`), which the host's library reads.

Adding a host: its form in :mod:`dna_mm.models.layers` (a module with ``from_host``), its key
mapping in :mod:`dna_mm.converters.hosts` (when its keys differ), one row here. A row's form
builder is the one route into its host: ``DnATimeSformer`` builds its divided steps and mmcv
layers through the builders the TimeSformer rows name
(:func:`~dna_mm.models.backbones.timesformer.give_members`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Optional

from torch import Tensor, nn

from ...converters import hosts as keys
from ..attention.builder import AttnCfg
from ..fitting import adapt_attentions, adapt_pooled_attention
from ..layers.forms import PositionBias, check_position_bias, host_name, keep_settings

StateDict = dict[str, Tensor]


def _resolve(path: str) -> object:
    """``'package.module:Name'`` → the object (importing the module)."""
    module, _, name = path.partition(':')
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class HostSpec:
    """How one host attention class is replaced.

    Attributes:
        name: Readable name of the host (errors, docs).
        host: ``'module:Class'`` of the host (imported by :func:`host_specs`).
        form: ``'module:function'`` in :mod:`dna_mm.models.layers` building the form:
            ``(host, attn_cfg, layer_index, num_layers) → form`` with the host's sizes, dropouts
            and scale (the swap then loads the host's weights through ``to_replacement``, as it
            loads a checkpoint).
        to_replacement: Host-layout keys of one attention (relative to it) → the form's keys;
            keys already in the form's layout pass unchanged.
        family_prefix: Where the family attention sits inside the form (``''`` or ``'attn.'``).
        fit: ``(family, weights, neg_init, source) → (weights, generated)``: fits the family
            attention's weights (relative to it) to its class; default
            :func:`~dna_mm.models.fitting.adapt_attentions` (for DnA from softmax weights the
            negative branch of :class:`~dna_mm.family.NegativeInit`).
        bias_from: The position biases a model hands this host at its call, each the
            ``'module:Class'`` of the module that makes it with its
            :class:`~dna_mm.models.layers.forms.PositionBias` (BEiT's shared table):
            :meth:`shared_bias`.
    """

    name: str
    host: str
    form: str
    to_replacement: Callable[[StateDict], StateDict]
    family_prefix: str
    fit: Callable[..., tuple[StateDict, list[str]]] = adapt_attentions
    bias_from: tuple[tuple[str, PositionBias], ...] = ()

    def shared_bias(self, model: nn.Module) -> Optional[PositionBias]:
        """The position bias ``model`` hands this host at its call (:attr:`bias_from`), or None."""
        for path, bias in self.bias_from:
            found = _importable((path,))
            if found and any(isinstance(m, found[0][1]) for m in model.modules()):
                return bias
        return None

    def family(self, form: nn.Module) -> nn.Module:
        """The member inside ``form`` (at :attr:`family_prefix`)."""
        return form.get_submodule(self.family_prefix[:-1]) if self.family_prefix else form

    def build(
        self,
        host: nn.Module,
        attn_cfg: AttnCfg,
        layer_index: int,
        num_layers: int,
        shared_bias: Optional[PositionBias] = None,
    ) -> nn.Module:
        """The form of ``host``, attention ``layer_index`` of ``num_layers``, with the host's plain
        settings (:func:`~dna_mm.models.layers.forms.keep_settings`); ``shared_bias``: the bias the
        model hands the host (:meth:`shared_bias`), refused for a member that takes none."""
        form = _resolve(f'dna_mm.models.layers.{self.form}')(host, attn_cfg, layer_index, num_layers)
        check_position_bias(host_name(host), self.family(form), shared_bias)
        return keep_settings(form, host)


#: every host, in the order the swap's messages list them
HOSTS = (
    HostSpec(
        'timm Attention', 'timm.layers.attention:Attention', 'family_attention:from_timm', keys.unchanged, ''
    ),
    HostSpec(
        'mmcv MultiheadAttention',
        'mmcv.cnn.bricks.transformer:MultiheadAttention',
        'video_attention:from_host',
        keys.mha_keys,
        'attn.',
    ),
    HostSpec(
        'MMAction2 TimeSformer temporal step',
        'mmaction.models.common.transformer:DividedTemporalAttentionWithNorm',
        'video_attention:from_divided',
        keys.mha_keys,
        'attn.',
    ),
    HostSpec(
        'MMAction2 TimeSformer spatial step',
        'mmaction.models.common.transformer:DividedSpatialAttentionWithNorm',
        'video_attention:from_divided',
        keys.mha_keys,
        'attn.',
    ),
    HostSpec(
        'MMAction2 VideoMAE Attention',
        'mmaction.models.backbones.vit_mae:Attention',
        'family_attention:from_videomae',
        keys.videomae_keys,
        '',
    ),
    HostSpec(
        'MMAction2 WindowAttention3D',
        'mmaction.models.backbones.swin:WindowAttention3D',
        'swin_attention:from_host',
        keys.under_attn,
        'attn.',
    ),
    HostSpec(
        'MMPretrain MultiheadAttention',
        'mmpretrain.models.utils.attention:MultiheadAttention',
        'mmpretrain_attention:from_multihead',
        keys.under_attn,
        'attn.',
    ),
    HostSpec(
        'MMPretrain BEiTAttention',
        'mmpretrain.models.utils.attention:BEiTAttention',
        'mmpretrain_attention:from_beit',
        keys.beit_keys,
        'attn.',
        bias_from=(
            (
                'mmpretrain.models.backbones.beit:RelativePositionBias',
                PositionBias(
                    "the backbone's shared relative position bias (use_shared_rel_pos_bias=True)",
                    'use_shared_rel_pos_bias=False',
                ),
            ),
        ),
    ),
    HostSpec(
        'MMPretrain WindowMSA',
        'mmpretrain.models.utils.attention:WindowMSA',
        'swin_attention:from_host',
        keys.under_attn,
        'attn.',
    ),
    HostSpec(
        'MMDetection WindowMSA',
        'mmdet.models.backbones.swin:WindowMSA',
        'swin_attention:from_host',
        keys.under_attn,
        'attn.',
    ),
    HostSpec(
        'timm EvaAttention (no rope)',
        'timm.models.eva:EvaAttention',
        'eva_attention:from_host',
        keys.eva_keys,
        'attn.',
    ),
    HostSpec(
        'torch nn.MultiheadAttention',
        'torch.nn:MultiheadAttention',
        'mha_attention:from_host',
        keys.torch_mha_keys,
        '',
    ),
    HostSpec(
        'MMAction2 UniFormerV2 Extractor',
        'mmaction.models.backbones.uniformerv2:Extractor',
        'uniformerv2_attention:from_host',
        keys.mha_keys,
        'attn.',
    ),
    HostSpec(
        'MMAction2 MViTv2 MultiScaleAttention',
        'mmaction.models.backbones.mvit:MultiScaleAttention',
        'mvit_attention:from_host',
        keys.unchanged,
        '',
        adapt_pooled_attention,
    ),
)

#: blocks the swap walks through (``'module:Class'``): MMAction2 UniFormerV2's
#: ``ResidualAttentionBlock`` reaches its ``nn.MultiheadAttention`` only by calling it, Swin's
#: ``ShiftWindowMSA`` (MMPretrain's, MMDetection's) its ``WindowMSA``
CONTAINERS = (
    'mmaction.models.backbones.uniformerv2:ResidualAttentionBlock',
    'mmpretrain.models.utils.attention:ShiftWindowMSA',
    'mmdet.models.backbones.swin:ShiftWindowMSA',
)
#: class names of blocks (OpenAI CLIP / OpenCLIP) that reach their ``attn``, an
#: ``nn.MultiheadAttention``, only by calling it
CONTAINER_NAMES = ('ResidualAttentionBlock', 'AttentionalPooler')


def _importable(paths: tuple[str, ...]) -> list[tuple[str, type]]:
    """``(path, class)`` of the ``paths`` importable here: a library not installed, or a version
    without that class, leaves its path out."""
    found = []
    for path in paths:
        try:
            found.append((path, _resolve(path)))
        except (ImportError, AttributeError):
            continue
    return found


def host_specs() -> dict[type, HostSpec]:
    """Host class → spec, for the host classes importable in this environment."""
    classes = dict(_importable(tuple(spec.host for spec in HOSTS)))
    return {classes[spec.host]: spec for spec in HOSTS if spec.host in classes}


def container_classes() -> tuple[type, ...]:
    """The classes of :data:`CONTAINERS` importable in this environment."""
    return tuple(cls for _, cls in _importable(CONTAINERS))
