"""The one way to give a host the family: a *form*, one module in :mod:`dna_mm.models.layers`
per host call, built by that module's ``from_host(host, attn_cfg, layer_index, num_layers)``
with the host's sizes, dropouts and scale.

A form either *is* the family module with the host's call, or *holds* it:

* is (ViTDet's grid, ``nn.MultiheadAttention``, MViTv2's pooling): a mixin placed before each
  member; :func:`register_forms` makes the classes ``{prefix}{Member}`` (``ViTDetDnAAttention``,
  ...) at the form module's level, so they pickle, and registers each under its member's name in
  the form's registry; :func:`build_form` builds one (the family's per-layer rules included);
* holds (Video Swin's windows, EVA's call, UniFormerV2's ``Extractor``, mmcv's
  ``MultiheadAttention``): a module with the family attention under ``attn.``
  (:func:`host_family`).

A host whose call is the family's own (timm ``Attention``, VideoMAE's) gets the family module
itself (:mod:`.family_attention`). Every ``from_host`` refuses, in one line naming the host
class, what the family lacks (:func:`refuse`).
"""

from __future__ import annotations

from typing import Any, Sequence

from mmengine.registry import Registry
from torch import nn

from ...errors import UnsupportedModelError
from ..attention import CogAttention, DiffAttention, DnAAttention, SoftmaxAttention, build_attention
from ..attention.builder import AttnCfg

#: the self-attention members every form is made for, unless it says fewer
MEMBERS: tuple[type, ...] = (SoftmaxAttention, DnAAttention, DiffAttention, CogAttention)


def register_forms(
    mixin: type, prefix: str, namespace: dict[str, Any], what: str, members: Sequence[type] = MEMBERS
) -> Registry:
    """The classes ``{prefix}{Member}(mixin, Member)`` put in ``namespace`` (the form module's
    ``globals()``: module-level names, so they pickle) and a registry holding each under its
    member's name (:func:`build_form`); ``what`` ends each class's docstring (``'on a
    [B, H, W, C] grid'``)."""
    forms = Registry(f'{prefix} forms')
    for member in members:
        name = prefix + member.__name__
        doc = f'{member.__name__} {what} (:class:`{mixin.__name__}`).'
        cls = type(
            name, (mixin, member), dict(__module__=namespace['__name__'], __qualname__=name, __doc__=doc)
        )
        namespace[name] = cls
        forms.register_module(name=member.__name__, module=cls)
    return forms


def build_form(
    forms: Registry,
    attn_cfg: AttnCfg,
    embed_dims: int,
    num_heads: int,
    layer_index: int,
    num_layers: int,
    **kwargs: Any,
) -> nn.Module:
    """The form (from ``forms``, :func:`register_forms`) of attention ``layer_index`` of
    ``num_layers``: :func:`~dna_mm.models.attention.build_attention` with the form's classes (its
    per-layer rules included); ``kwargs``: the mixin's and any family argument.

    Raises:
        ValueError: a cross-attention, or a member the form is not made for.
    """
    return build_attention(attn_cfg, embed_dims, num_heads, layer_index, num_layers, registry=forms, **kwargs)


def host_family(
    host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int, embed_dims: int, **kwargs: Any
) -> nn.Module:
    """The family attention with ``host``'s heads, dropouts (``attn_drop``, ``proj_drop``
    modules) and scale; ``kwargs``: biases and any family argument."""
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
