"""The one way to give a host a member: a *form*, one module in :mod:`dna_mm.models.layers`
per host call, built by that module's ``from_host(host, attn_cfg, layer_index, num_layers)``
with the host's sizes, dropouts and scale. Every form takes whatever member the config names
(the shipped ones or your own), by composition:

* a call (ViTDet's grid, ``nn.MultiheadAttention``'s, MViTv2's pooling): a :class:`HostForm`
  gives the member itself the parameters the host's call needs (relative position tables,
  pooling layers) and makes it answer that call; the member keeps its class, its keys and its
  formula, so a block's keys are the host's and the member's (``blocks.0.attn.qkv``, ...);
* a holder (Video Swin's windows, EVA's call, UniFormerV2's ``Extractor``, mmcv's
  ``MultiheadAttention``, MMPretrain's): a module with the member under ``attn.``
  (:func:`member_for_host`).

A host whose call is the members' own (timm ``Attention``, VideoMAE's) gets the member itself
(:mod:`.family_attention`). Every ``from_host`` refuses, in one line naming the host class,
what the members lack (:func:`refuse`).
"""

from __future__ import annotations

import functools
from typing import Any

from torch import nn

from ...errors import UnsupportedModelError
from ..attention import AttentionBase, build_attention
from ..attention.base import CrossAttentionMixin
from ..attention.builder import AttnCfg


class HostForm:
    """A host's call given to a member: :meth:`attach` makes ``member(*args)`` run
    ``form(member, *args)`` (the member's ``forward`` for this module only; MMEngine's and
    PyTorch's hooks run around it as usual), using the member's own steps
    (:meth:`~dna_mm.models.attention.AttentionBase.project`, ``run_attend``, ``proj``). A plain
    object: it pickles and deep-copies with its member."""

    #: the host, named in refusals
    host = 'this host'

    def attach(self, member: nn.Module) -> AttentionBase:
        """``member`` answering the host's call (refused: a cross form, or not a member)."""
        if not isinstance(member, AttentionBase) or isinstance(member, CrossAttentionMixin):
            raise ValueError(
                f'{self.host}: attention type {type(member).__name__!r} is not a self-attention of '
                'the family (a cross form, or not a subclass of AttentionBase)'
            )
        member.host_form = self
        member.forward = functools.partial(self, member)
        member.extra_repr = functools.partial(_repr_with_form, member)
        return member

    def __call__(self, member: AttentionBase, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def describe(self, member: AttentionBase) -> str:
        """What the member's ``repr`` adds: the host, and the form's settings."""
        return f'host={self.host!r}'


def _repr_with_form(member: AttentionBase) -> str:
    return f'{type(member).extra_repr(member)}, {member.host_form.describe(member)}'


def member_for_host(
    host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int, embed_dims: int, **kwargs: Any
) -> nn.Module:
    """The member ``attn_cfg`` names, with ``host``'s heads, dropouts (``attn_drop``,
    ``proj_drop`` modules) and scale; ``kwargs``: biases and any member argument."""
    drops = dict(attn_drop=host.attn_drop.p, proj_drop=host.proj_drop.p)
    family = build_attention(attn_cfg, embed_dims, host.num_heads, layer_index, num_layers, **drops, **kwargs)
    family.scale = host.scale
    return family


def refuse(host: nn.Module, what: str) -> None:
    """An :class:`~dna_mm.errors.UnsupportedModelError` naming ``host``'s class and ``what``."""
    raise UnsupportedModelError(
        f'{type(host).__module__}.{type(host).__name__}: {what} is not supported by the attention swap'
    )


def refuse_extras(host: nn.Module, qk_norm: str, scale_norm: str) -> None:
    """Refuse a timm host's ``q_norm`` / ``k_norm``, ``norm`` (when not identities) or ``gate``."""
    if not isinstance(host.q_norm, nn.Identity) or not isinstance(host.k_norm, nn.Identity):
        refuse(host, qk_norm)
    if not isinstance(getattr(host, 'norm', nn.Identity()), nn.Identity):
        refuse(host, scale_norm)
    if getattr(host, 'gate', None) is not None:
        refuse(host, 'a gated output')
