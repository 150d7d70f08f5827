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

**A host's position bias** (ViTDet's and MViTv2's relative positions, the Swin and BEiT bias
tables) is declared by the form that adds it inside the member's logits, a
:class:`PositionBias`: a :class:`HostForm`'s :meth:`~HostForm.position_bias`, the
``position_bias`` of :func:`member_for_host`, or a host row's ``bias_from``
(:mod:`dna_mm.models.adapters.hosts`: a bias the model hands its hosts at their call, BEiT's
shared one). One check, :func:`check_position_bias`, refuses there a member whose class declares
``takes_position_bias = False``, when the model is built: a bias is never dropped.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Optional

from torch import nn

from ...errors import ConfigError, UnsupportedModelError
from ..attention import AttentionBase, build_attention
from ..attention.base import CrossAttentionMixin
from ..attention.builder import AttnCfg


class PositionBias(NamedTuple):
    """A position bias a form adds inside its member's logits, as the form declares it: ``what``
    it is (``'its relative position bias table'``) and, where the host can do without it, the
    setting that leaves it out (``'use_rel_pos=False'``). Named by :func:`check_position_bias`."""

    what: str
    without: Optional[str] = None


def host_name(host: nn.Module) -> str:
    """``module.Class`` of ``host``, as refusals name it."""
    return f'{type(host).__module__}.{type(host).__name__}'


def check_position_bias(host: str, member: nn.Module, bias: Optional[PositionBias]) -> None:
    """The one rule for a host's position bias: ``member`` (a member of the family) in ``host``,
    whose form gives it ``bias`` (None: no bias), is refused in one line naming both when its
    class declares :attr:`~dna_mm.models.attention.AttentionBase.takes_position_bias` False.

    Raises:
        UnsupportedModelError: what the member declares, what the host adds, and what to do.
    """
    if bias is None or type(member).takes_position_bias:
        return
    remedy = f'set {bias.without}, or ' if bias.without else ''
    raise UnsupportedModelError(
        f'{host}: the member {type(member).__name__} declares takes_position_bias = False, and this '
        f'host adds {bias.what} inside the attention logits; {remedy}use a member that takes a '
        'position bias'
    )


class HostForm:
    """A host's call given to a member: :meth:`attach` makes ``member(*args)`` run
    ``form(member, *args)`` (the member's ``forward`` for this module only; MMEngine's and
    PyTorch's hooks run around it as usual), using the member's own steps
    (:meth:`~dna_mm.models.attention.AttentionBase.project`, ``run_attend``, ``project_out``: the
    gate of a gated member, ``proj``, ``proj_drop``). A plain object: it pickles and deep-copies
    with its member."""

    #: the host, named in refusals
    host = 'this host'

    def position_bias(self) -> Optional[PositionBias]:
        """The position bias this form adds inside the member's logits (None: none); a member
        that takes none is refused by :meth:`attach` (:func:`check_position_bias`)."""
        return None

    def attach(self, member: nn.Module) -> AttentionBase:
        """``member`` answering the host's call (refused: a cross form, not a member, or a
        member that takes no position bias where the form gives one)."""
        if not isinstance(member, AttentionBase) or isinstance(member, CrossAttentionMixin):
            raise ConfigError(
                f'{self.host}: attention type {type(member).__name__!r} is not a self-attention of '
                'the family (a cross form, or not a subclass of AttentionBase)'
            )
        check_position_bias(self.host, member, self.position_bias())
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
    host: nn.Module,
    attn_cfg: AttnCfg,
    layer_index: int,
    num_layers: int,
    embed_dims: int,
    position_bias: Optional[PositionBias] = None,
    **kwargs: Any,
) -> nn.Module:
    """The member ``attn_cfg`` names, with ``host``'s heads, dropouts (``attn_drop``,
    ``proj_drop`` modules) and scale; ``position_bias``: the bias the holder adds inside its
    logits (a member that takes none is refused, :func:`check_position_bias`); ``kwargs``:
    biases and any member argument."""
    drops = dict(attn_drop=host.attn_drop.p, proj_drop=host.proj_drop.p)
    family = build_attention(attn_cfg, embed_dims, host.num_heads, layer_index, num_layers, **drops, **kwargs)
    check_position_bias(host_name(host), family, position_bias)
    family.scale = host.scale
    return family


_SETTING = (bool, int, float, str, type(None))


def keep_settings(form: nn.Module, host: nn.Module) -> nn.Module:
    """``form`` given the plain settings of ``host`` it has no attribute of that name for: the
    numbers, flags, strings (and tuples of them) the host keeps as attributes, such as
    ``num_heads``, ``embed_dims``, ``head_dims``, ``scale``, ``window_size``, which the host's
    library and its own tests read of an attention. Its modules, parameters and buffers are the
    form's own."""
    for name, value in vars(host).items():
        plain = isinstance(value, _SETTING) or (
            isinstance(value, (tuple, list)) and all(isinstance(v, _SETTING) for v in value)
        )
        if plain and not name.startswith('_') and name != 'training' and not hasattr(form, name):
            setattr(form, name, value)
    return form


def refuse(host: nn.Module, what: str) -> None:
    """An :class:`~dna_mm.errors.UnsupportedModelError` naming ``host``'s class and ``what``."""
    raise UnsupportedModelError(f'{host_name(host)}: {what} is not supported by the attention swap')


def refuse_extras(host: nn.Module, qk_norm: str, scale_norm: str) -> None:
    """Refuse a timm host's ``q_norm`` / ``k_norm`` or ``norm`` (when not identities). Its
    ``gate`` is the member's (:func:`timm_gate`)."""
    if not isinstance(host.q_norm, nn.Identity) or not isinstance(host.k_norm, nn.Identity):
        refuse(host, qk_norm)
    if not isinstance(getattr(host, 'norm', nn.Identity()), nn.Identity):
        refuse(host, scale_norm)


def timm_gate(host: nn.Module) -> dict[str, bool]:
    """``gated=True`` for a timm host with a ``gate`` (``sigmoid(gate(x))`` times the heads'
    output before ``proj``, the bias as the ``qkv``'s: the member's ``gated``, key ``gate``
    included); nothing for one without, so any member takes its place."""
    return dict(gated=True) if getattr(host, 'gate', None) is not None else {}
