"""The family module itself as the form of hosts whose call it already has: timm's
``Attention`` (ViT, DeiT, ...: ``forward(x [B, N, C], attn_mask=None)``, keys ``qkv``, ``proj``)
and MMAction2's VideoMAE ``vit_mae.Attention`` (``forward(x)``; its ``q_bias`` / ``v_bias``
become the ``qkv`` bias, :func:`~dna_mm.converters.hosts.videomae_keys`)."""

from __future__ import annotations

from torch import nn

from ..attention.builder import AttnCfg
from .forms import member_for_host, refuse, refuse_extras, timm_gate


def from_timm(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The family attention in place of timm's ``Attention`` ``host`` (its biases, dropouts,
    scale, gate); refuses ``qk_norm``, ``scale_norm`` and a width other than the tokens'."""
    refuse_extras(host, 'qk_norm / scale_norm', 'qk_norm / scale_norm')
    if host.qkv.in_features != host.proj.out_features or host.attn_dim != host.qkv.in_features:
        refuse(host, 'attn_head_dim / dim_out different from the token width')
    bias = dict(qkv_bias=host.qkv.bias is not None, proj_bias=host.proj.bias is not None, **timm_gate(host))
    return member_for_host(host, attn_cfg, layer_index, num_layers, host.qkv.in_features, **bias)


def from_videomae(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The family attention in place of MMAction2's VideoMAE ``Attention`` ``host``."""
    return member_for_host(
        host, attn_cfg, layer_index, num_layers, host.embed_dims, qkv_bias=hasattr(host, 'q_bias')
    )
