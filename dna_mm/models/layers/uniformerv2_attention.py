"""MMAction2 UniFormerV2's global UniBlock (``Extractor``) with its cross-attention through the
family's ``nn.MultiheadAttention`` form: :class:`ExtractorAdapter`, built by :func:`from_host`.
Keys: the host's, the attention under ``attn.`` (:func:`~dna_mm.converters.hosts.mha_keys`)."""

from __future__ import annotations

import copy

from mmaction.models.backbones.uniformerv2 import Extractor
from mmengine.model import BaseModule
from torch import Tensor, nn

from ..attention.builder import AttnCfg
from .mha_attention import form_of


class ExtractorAdapter(Extractor):
    """UniFormerV2's global UniBlock with its cross-attention through a family attention.

    MMAction2's ``Extractor.attention(x, y)`` slices its ``nn.MultiheadAttention``'s packed
    ``in_proj_weight`` by hand: ``Q`` from the query tokens ``x [1, N, C]`` (the temporal CLS
    token), ``K, V`` from ``y [T·L, N, C]`` (every token of the layer), ``softmax(s Q Kᵀ) V``,
    ``out_proj``: exactly ``nn.MultiheadAttention(x, y, y)``. Here ``attn`` is the family's
    ``nn.MultiheadAttention`` form and ``attention(x, y) = attn(x, y, y)``. The rest
    (``ln_1``, ``ln_2``, ``ln_3``, ``mlp``, ``drop_path``, the residuals) is the host's.
    """

    def __init__(self, host: nn.Module, attn: nn.Module) -> None:
        BaseModule.__init__(self, init_cfg=copy.deepcopy(host.init_cfg))
        self.drop_path = copy.deepcopy(host.drop_path)
        self.attn = attn
        for name in ('ln_1', 'mlp', 'ln_2', 'ln_3'):
            setattr(self, name, copy.deepcopy(getattr(host, name)))

    def attention(self, x: Tensor, y: Tensor) -> Tensor:
        return self.attn(x, y, y, need_weights=False)[0]  # [1, N, C]


def from_host(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of UniFormerV2's ``Extractor`` ``host``: its own modules, its attention the
    family's ``nn.MultiheadAttention`` form."""
    return ExtractorAdapter(host, form_of(host.attn, attn_cfg, layer_index, num_layers, host))
