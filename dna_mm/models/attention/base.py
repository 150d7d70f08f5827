"""Common interface of the attention family.

Every module maps tokens ``x [B, M, C]`` to ``[B, M, C]``:

* self-attention: ``forward(x)``, queries, keys and values all from ``x`` (``M = N``);
* cross-attention: ``forward(x, context=ctx)``, queries from ``x [B, M, C]``, keys and values
  from ``ctx [B, N, C]`` with the *same* projection weights; ``value=val [B, N, C]`` takes the
  values from a different input than the keys (mmcv's ``key`` / ``value``); a module built with
  ``kdim`` / ``vdim`` takes ``ctx [B, N, kdim]`` and ``val [B, N, vdim]``.

Any size may be 0 (the empty output); a query with no key (an empty context, or every key
excluded) gets weights 0 on every route, as SDPA gives it (:mod:`.functional`).

Two additive terms, broadcastable to ``[B, H, M, N]`` (the rule: :mod:`.functional`): the
exclusion mask ``attn_mask`` and the logit bias ``attn_bias`` (DnA also takes ``(b_pos, b_neg)``).

``return_attn=True`` (or ``fused_attn=False``) takes the eager route: explicit maps, returned
with ``return_attn`` as a dict of the normalised maps ``[B, H, M, N]`` (keys documented per
module). :meth:`AttentionBase.register_attend_hook` observes every call of a module on that
route, whichever host calls it (the analyses' one hook point).

The forward is ``torch.fx``-traceable: its argument checks and mask handling are FX leaf
functions (:func:`check_inputs`, :func:`with_causal`), kept as calls that see the real tensors.

The constructor also takes timm's and mmcv's keywords, so each module is usable as timm's
``attn_layer``.

**The member contract.** Code outside a member (the builder, the host forms, the fitting of
state dicts, the analyses) never reads a member's own attribute names; it asks the member:

* what it is: :attr:`~AttentionBase.short_name`, :attr:`~AttentionBase.label`,
  :meth:`~AttentionBase.layer_config`;
* its branches: :attr:`~AttentionBase.map_names` (one map per branch) and
  :meth:`~AttentionBase.branch_heads` (the heads of :meth:`~AttentionBase.project` each branch
  reads), from which :meth:`~AttentionBase.extra_heads` (the heads beyond ``q, k, v`` and the
  place each takes) and, per module, :meth:`~AttentionBase.own_heads` (those computed by a
  projection of their own);
* a host's position bias: :attr:`~AttentionBase.takes_position_bias` and
  :meth:`~AttentionBase.position_bias` (each branch's from its own queries);
* how its branches mix: :meth:`~AttentionBase.neg_coefficient` (the second map's factor) and
  :meth:`~AttentionBase.mixing_weights` (the learned weights, by name);
* its maps: :attr:`~AttentionBase.signed_maps`, :attr:`~AttentionBase.normalised_maps`;
* its weights: :attr:`~AttentionBase.own_start`, :attr:`~AttentionBase.has_negative_branch`
  and :meth:`~AttentionBase.negative_variant` (DnA's negative branch, generated from softmax
  weights).

**Names.** A member's class name (its registered name) and its short name are its own: a class
that claims one another member holds is refused when it is created, unless it says that it
takes that member's place (``class Mine(DnAAttention, replaces='dna')``; :mod:`.registration`).

**Its output.** :meth:`~AttentionBase.attend`, the member's formula, is its own to define: a class
without one is refused with one line (:func:`check_formula`) when it is created where it names
itself a member (a short name of its own, ``replaces=``), else when it is built. It gives
``[B, H, M, d_v]``; the first call of each module checks it (:meth:`~AttentionBase.run_attend`,
in eager mode only: a compiled, exported or traced graph holds no check). Every route ends in
:meth:`~AttentionBase.project_out`: the heads merged, the gate (``gated=True``), ``proj``,
``proj_drop``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, ClassVar, NamedTuple, Optional, Union

import torch
import torch.fx
from torch import Tensor, nn
from torch.fx.node import has_side_effect
from torch.utils.hooks import RemovableHandle

from ...errors import ConfigError, MemberError
from . import functional as AF
from .functional import BiasArg, causal_mask
from .registration import claim_names, where

AttnOutput = Union[Tensor, tuple[Tensor, dict[str, Tensor]]]
#: the arguments every member takes (what a layer keeps when its member's rule changes its type)
BASE_KEYS = (
    'qkv_bias',
    'attn_drop',
    'proj_drop',
    'proj_bias',
    'fused_attn',
    'embed_dims',
    'num_heads',
    'gated',
)
#: ``hook(module, maps, heads)``: the maps ``[B, H, M, N]`` of one call and its head-split inputs
AttendHook = Callable[[nn.Module, dict[str, Tensor], dict[str, Tensor]], None]
#: the heads every member's :meth:`AttentionBase.project` gives
BASE_HEADS = ('q', 'k', 'v')


class BranchHeads(NamedTuple):
    """The heads of :meth:`AttentionBase.project` one branch of a member reads: its queries,
    keys and values (DnA's negative branch: ``BranchHeads(q='q_neg', v='v_neg')``)."""

    q: str = 'q'
    k: str = 'k'
    v: str = 'v'


class MixingWeight(NamedTuple):
    """A learned weight that mixes a member's branches (:meth:`AttentionBase.mixing_weights`):
    its ``value``, ``[H]`` (one per head, DnA's ``α``) or a scalar (Diff's ``λ``), and the
    ``init`` it starts from."""

    value: Tensor
    init: float


class AttentionBase(nn.Module):
    """Multi-head attention skeleton: ``qkv = Linear(C, 3C)``, ``proj = Linear(C, C)``.

    Subclasses state their formula in :meth:`attend` on the head-split tensors of
    :meth:`project`, each branch through :meth:`softmax_branch`: the fused route
    (``scaled_dot_product_attention``) or the eager one, which returns the maps. The heads'
    output, merged, leaves through :meth:`project_out` on every route and in every host form.

    A class statement may say that the new member takes the place of a registered one, named
    by its short name or registered name: ``class Mine(DnAAttention, replaces='dna')``
    (:mod:`.registration`); without it, a short name or class name another member holds is
    refused when the class is created.

    Args:
        embed_dims: Token width ``C``.
        num_heads: Number of heads ``H``; ``C`` must be divisible by it.
        qkv_bias: Bias in the query/key/value projections (and the extra DnA projections).
        attn_drop: Dropout on the normalised attention maps (every branch).
        proj_drop: Dropout after the output projection.
        proj_bias: Bias in the output projection.
        fused_attn: Take the fused route (``scaled_dot_product_attention``) when no maps are
            requested.
        qk_norm, scale_norm, norm_layer: timm keywords; only the defaults are supported.
        batch_first: mmcv keyword; only ``True`` is supported.
        kdim, vdim: Widths of the key and value inputs (default ``embed_dims``; torch's
            ``nn.MultiheadAttention`` keywords). When either differs, the projections are
            separate: ``q_proj`` ``Linear(C, C)``, ``k_proj`` ``Linear(kdim, C)``, ``v_proj``
            ``Linear(vdim, C)`` in place of ``qkv``, and :meth:`forward` takes ``context [B, N,
            kdim]`` and ``value [B, N, vdim]`` (:func:`check_inputs`).
        device, dtype: Factory keywords for the parameters (timm passes them).
        gated: Gated attention (Qiu et al., NeurIPS 2025): the heads' output, merged, is
            multiplied by ``sigmoid(gate(x))`` before ``proj``, ``gate = Linear(C, C)`` (bias as
            ``qkv_bias``) of the queries' input ``x``: timm's ``Attention(gated=True)``, its key
            ``gate`` included. Any member takes it (``dict(type='DnAAttention', gated=True)``);
            without it the module and its state dict are those of earlier releases.

    Attributes:
        has_negative_branch: The member has DnA's negative branch (the keys of
            :data:`~dna_mm.family.NEGATIVE_KEYS` its :meth:`negative_variant` names): the
            fitting of a state dict generates it from softmax weights
            (:class:`~dna_mm.family.NegativeInit`) and drops it for a member without one.
    """

    has_negative_branch: bool = False
    #: the short name a config may give instead of the registered one (``attn_cfg='dna'``): the
    #: member's own, a subclass (its cross form) does not inherit it
    short_name: ClassVar[Optional[str]] = None
    #: how figures and tables name it, where its class says (the study's plots read the class's
    #: own; default: the class name without ``Attention``)
    label: ClassVar[Optional[str]] = None
    #: the keys of the maps the eager route returns, one per branch (the order of
    #: :meth:`branch_heads`, and of a bias per branch)
    map_names: ClassVar[tuple[str, ...]] = ('attn',)
    #: takes a position bias from its host (ViTDet's and MViTv2's relative positions:
    #: :meth:`position_bias`)
    takes_position_bias: ClassVar[bool] = True
    #: its maps are signed (Cog): the analyses measure their magnitude
    signed_maps: ClassVar[bool] = False
    #: each row of its maps (their magnitude, where signed) sums to 1 over the keys, a
    #: distribution (softmax, softmin, Cog's ``|W|``); False for weights that are not normalised
    #: over the keys (sigmoid attention): measures of a distribution, such as the entropy, do
    #: not apply to them as they are
    normalised_maps: ClassVar[bool] = True
    #: prefixes of the parameters that keep their own start when a checkpoint lacks them
    #: (Diff's ``lambda_*`` read from softmax weights)
    own_start: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def layer_config(cls, cfg: dict, layer_index: int, num_layers: int) -> dict:
        """The config of attention ``layer_index`` (0-based) of a ``num_layers``-deep model:
        the member's depth-dependent settings (Diff's ``λ_init``, Cog's softmax first and last
        layer). ``cfg`` has ``type`` and the arguments; the default returns it unchanged."""
        return cfg

    def neg_coefficient(self) -> Tensor:
        """The factor of the second map (``'neg'``) in the output, broadcastable to
        ``[B, H, M, d]`` (the analyses weight that map by it); 1 for a member of one map."""
        return torch.ones((), device=self.proj.weight.device)

    @classmethod
    def branch_heads(cls) -> dict[str, BranchHeads]:
        """Per map of :attr:`map_names` (its branch), the heads of :meth:`project` that branch
        reads. Default: every branch reads ``q, k, v`` (softmax, Cog, Diff's two maps); DnA
        ``{'pos': BranchHeads(), 'neg': BranchHeads(q='q_neg', v='v_neg')}``. A head named
        here beyond ``q, k, v`` is one :meth:`project` gives (:meth:`extra_heads`)."""
        return {name: BranchHeads() for name in cls.map_names}

    @classmethod
    def extra_heads(cls) -> dict[str, str]:
        """The heads of :meth:`branch_heads` beyond ``q, k, v``, each with the base head whose
        place it takes in its branch (``'q'``, ``'k'`` or ``'v'``): it reads that head's input,
        and a host that transforms that head (MViTv2's pooling) gives it its own transform of
        the same kind. DnA ``{'q_neg': 'q', 'v_neg': 'v'}``; ``{}`` for ``q, k, v`` only."""
        extra: dict[str, str] = {}
        for heads in cls.branch_heads().values():
            for base, name in zip(BASE_HEADS, heads, strict=True):
                if name not in BASE_HEADS:
                    extra.setdefault(name, base)
        return extra

    def own_heads(self) -> tuple[str, ...]:
        """The :meth:`extra_heads` this module computes by a projection of its own; any other
        extra head :meth:`project` gives is its base head's tensor itself. Default: all of
        them; DnA: ``q_neg`` / ``v_neg`` where its variant has ``Q-`` / ``V-``."""
        return tuple(self.extra_heads())

    def position_bias(self, heads: dict[str, Tensor], bias_of: Callable[[Tensor], Tensor]) -> BiasArg:
        """A host's position bias for :meth:`attend` (:attr:`takes_position_bias`): ``bias_of(q)``
        of each branch's queries (``q`` of :meth:`branch_heads`, from ``heads``). One bias when
        every branch reads the same query head, else a tuple with one per branch in
        :attr:`map_names` order (DnA ``(R(Q+), R(Q-))``), computed once per distinct tensor."""
        names = [branch.q for branch in self.branch_heads().values()]
        if len(set(names)) == 1:
            return bias_of(heads[names[0]])
        done: list[tuple[Tensor, Tensor]] = []  # (queries, their bias)

        def once(q: Tensor) -> Tensor:  # a tensor two branches share (DnA without Q-): one bias
            bias = next((b for seen, b in done if seen is q), None)
            if bias is None:
                bias = bias_of(q)
                done.append((q, bias))
            return bias

        return tuple(once(heads[name]) for name in names)

    def mixing_weights(self) -> dict[str, MixingWeight]:
        """The learned weights that mix its branches, by name (the analyses report each; a
        per-head ``[H]`` weight with its statistics): DnA ``{'alpha': α [H]}`` (where its variant
        learns ``α``), Diff ``{'lambda': λ}`` (a scalar); ``{}`` by default."""
        return {}

    def negative_variant(self) -> Optional[str]:
        """The DnA variant (a key of :data:`~dna_mm.family.DNA_VARIANTS`) whose negative-branch
        keys this module has, which the fitting of a state dict generates from softmax weights
        or completes (:func:`~dna_mm.converters.attention.negative_branch`); None for a module
        without DnA's negative branch (the fitting drops one)."""
        return None

    @classmethod
    def own_short_name(cls) -> Optional[str]:
        """:attr:`short_name` if this class declares it itself."""
        return vars(cls).get('short_name')

    def __init_subclass__(cls, replaces: Optional[str] = None, **kwargs) -> None:
        """Claim the class's names (:func:`.registration.claim_names`): a short name or class
        name another registered member holds is refused with one line naming both classes;
        ``replaces`` (a member's short name or registered name) takes that member's place. A
        class that names itself a member (its own short name, or ``replaces``) must have its
        formula (:func:`check_formula`), checked first: a class refused claims nothing. Another
        (a base of members, a cross form) is checked when it is built."""
        super().__init_subclass__(**kwargs)
        if cls.own_short_name() is not None or replaces is not None:
            check_formula(cls)
        claim_names(cls, replaces, family=AttentionBase)

    def __init__(
        self,
        embed_dims: int,
        num_heads: int = 8,
        qkv_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        proj_bias: bool = True,
        fused_attn: bool = True,
        qk_norm: bool = False,
        scale_norm: bool = False,
        norm_layer: Optional[type] = None,
        batch_first: bool = True,
        kdim: Optional[int] = None,
        vdim: Optional[int] = None,
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
        gated: bool = False,
    ) -> None:
        super().__init__()
        check_formula(type(self))
        name = type(self).__name__
        if embed_dims <= 0 or num_heads <= 0 or embed_dims % num_heads:  # the host's sizes: a config's
            raise ConfigError(
                f'{name}: embed_dims ({embed_dims}) must be a positive multiple of num_heads ({num_heads}): '
                'each head takes embed_dims / num_heads channels'
            )
        if not 0.0 <= attn_drop < 1.0 or not 0.0 <= proj_drop < 1.0:
            raise ConfigError(
                f'{name}: attn_drop and proj_drop must be in [0, 1), got {attn_drop}, {proj_drop}'
            )
        if qk_norm or scale_norm:
            raise ConfigError(f'{name}: qk_norm / scale_norm are not supported')
        if not batch_first:
            raise ConfigError(f'{name}: only batch_first=True ([B, N, C] tokens) is supported')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dim = embed_dims // num_heads
        self.scale = self.head_dim**-0.5
        self.fused_attn = fused_attn
        self.batch_first = True
        self.factory_kwargs = dict(device=device, dtype=dtype)
        self.kdim, self.vdim = kdim or embed_dims, vdim or embed_dims
        dd = self.factory_kwargs
        if self.packed_projections:
            self.qkv = nn.Linear(embed_dims, 3 * embed_dims, bias=qkv_bias, **dd)
        self.attn_drop_p = attn_drop
        self.attn_drop = nn.Dropout(attn_drop)
        # before proj, as timm's Attention: its keys in timm's order (none when not gated)
        self.gate = nn.Linear(embed_dims, embed_dims, bias=qkv_bias, **dd) if gated else None
        if gated:  # a softmax file has no gate: it keeps its own start (models/fitting.py)
            self.own_start = (*type(self).own_start, 'gate.')
        self.proj = nn.Linear(embed_dims, embed_dims, bias=proj_bias, **dd)
        self.proj_drop = nn.Dropout(proj_drop)
        if not self.packed_projections:  # after proj: the key order of earlier releases
            self.q_proj = nn.Linear(embed_dims, embed_dims, bias=qkv_bias, **dd)
            self.k_proj = nn.Linear(self.kdim, embed_dims, bias=qkv_bias, **dd)
            self.v_proj = nn.Linear(self.vdim, embed_dims, bias=qkv_bias, **dd)

    @property
    def gated(self) -> bool:
        """Its output is gated (``gated=True``: a ``gate`` of its own)."""
        return getattr(self, 'gate', None) is not None

    @property
    def packed_projections(self) -> bool:
        """Keys and values as wide as the queries: one packed ``qkv``."""
        return self.kdim == self.embed_dims and self.vdim == self.embed_dims

    # -- helpers -----------------------------------------------------------------------------
    def split_heads(self, t: Tensor) -> Tensor:
        """``[B, N, H·d] → [B, H, N, d]`` (every size named: ``N = 0`` or ``B = 0`` leaves a ``-1``
        undetermined)."""
        b, n, width = t.shape
        return t.reshape(b, n, self.num_heads, width // self.num_heads).transpose(1, 2)

    def merge_heads(self, t: Tensor) -> Tensor:
        """``[B, H, N, d] → [B, N, H·d]``."""
        b, h, n, d = t.shape
        return t.transpose(1, 2).reshape(b, n, h * d)

    @property
    def dropout_p(self) -> float:
        return self.attn_drop_p if self.training else 0.0

    def softmax_branch(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        attn_mask: Optional[Tensor],
        bias: Optional[Tensor],
        eager: bool,
        negative: bool = False,
        scale: Optional[float] = None,
    ) -> tuple[Tensor, Optional[Tensor]]:
        """One branch ``softmax(s q k^T + b + m) v`` (``negative``: ``softmin(s q k^T + b)``, the
        mask added after the sign) → ``([B, H, M, dv], map)``: the fused route (SDPA, no map)
        or, when ``eager``, the explicit map ``[B, H, M, N]`` (before dropout) it multiplies."""
        scale = self.scale if scale is None else scale
        if eager:
            return AF.eager(q, k, v, attn_mask, scale, self.attn_drop, negative=negative, bias=bias)
        return AF.sdpa(q, k, v, attn_mask, scale, self.dropout_p, bias=bias, negative=negative), None

    # -- interface ---------------------------------------------------------------------------
    def project(
        self, x: Tensor, context: Optional[Tensor] = None, value: Optional[Tensor] = None
    ) -> dict[str, Tensor]:
        """The head-split inputs of :meth:`attend`: ``q`` from ``x``, ``k`` from ``context`` (or
        ``x``), ``v`` from ``value`` (or the keys' input), each ``[B, H, ·, d]`` (a member with
        :meth:`extra_heads` adds them, each from its base head's input). Each distinct
        input goes once through ``qkv`` (called, so a wrapper or hook on it sees every input)
        and keeps its rows of the output; or through ``q_proj``, ``k_proj``, ``v_proj``."""
        if not self.packed_projections:
            keys = x if context is None else context
            values = keys if value is None else value
            heads = (self.q_proj(x), self.k_proj(keys), self.v_proj(values))
            return dict(zip('qkv', (self.split_heads(t) for t in heads), strict=True))
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 × [B, M, C]
        if context is not None:
            _, k, v = self.qkv(context).chunk(3, dim=-1)  # [B, N, C]
        if value is not None:
            v = self.qkv(value).chunk(3, dim=-1)[2]
        return dict(q=self.split_heads(q), k=self.split_heads(k), v=self.split_heads(v))

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The member's formula on the heads of :meth:`project` → ``[B, H, M, d]`` and the maps
        (``{}`` on the fused route, the explicit maps of :attr:`map_names` when ``eager``).
        ``attn_bias``: one bias for every branch, or a tuple of one per branch
        (:meth:`position_bias`). Every member defines it (:func:`check_formula`)."""
        raise NotImplementedError(no_formula(type(self)))

    _attend_hooks: 'OrderedDict[int, AttendHook]' = OrderedDict()  # a module's own once registered

    def register_attend_hook(self, hook: AttendHook) -> RemovableHandle:
        """Run this module's :meth:`attend` on the eager route and call ``hook(module, maps,
        heads)`` after each call: the maps it multiplies (before dropout) and the head-split
        inputs (``q, k, v`` and its :meth:`extra_heads`). The output is the eager formula's
        (equal to the fused route's within float tolerance). ``handle.remove()`` ends it."""
        if '_attend_hooks' not in self.__dict__:
            self._attend_hooks = OrderedDict()
        handle = RemovableHandle(self._attend_hooks)
        self._attend_hooks[handle.id] = hook
        return handle

    #: :meth:`run_attend` has checked this module's output (a module's own once set)
    _output_checked: bool = False

    def run_attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """:meth:`attend`, as every host form calls it: eager, with the hooks called, while the
        module has attend hooks (:meth:`register_attend_hook`). Its output is checked on the
        module's first eager call (:meth:`check_output`); a compiled, exported or traced call
        skips the check, so the graph holds none."""
        if not self._attend_hooks:
            out, maps = self.attend(heads, attn_mask, attn_bias, eager)
        else:
            out, maps = self.attend(heads, attn_mask, attn_bias, True)
            for hook in list(self._attend_hooks.values()):
                hook(self, maps, heads)
        if not (traced(heads['q']) or self._output_checked):  # tracing first: no guard on the flag
            self.check_output(out, heads)
            self._output_checked = True
        return out, maps

    def check_output(self, out: Tensor, heads: dict[str, Tensor]) -> None:
        """Raise a one-line :class:`~dna_mm.errors.MemberError` unless ``out`` (what
        :meth:`attend` returned for ``heads``) is ``[B, H, M, d_v]``: the batch, heads and
        queries of ``heads['q']``, the head width of ``heads['v']``."""
        b, h, m = heads['q'].shape[:3]
        expected = [b, h, m, heads['v'].shape[-1]]
        got = list(out.shape) if isinstance(out, Tensor) else type(out).__name__
        if got != expected:
            raise MemberError(
                f'{where(type(self))}.attend returned {got}; expected [B, H, M, d_v] = {expected} '
                '(batch, heads, queries, value head dim)'
            )

    def project_out(self, out: Tensor, x: Tensor) -> Tensor:
        """The heads' output, merged (``out [B, M, C]``), out of the module: times
        ``sigmoid(gate(x))`` where the module is ``gated`` (``x [B, M, C]``: the input the
        queries came from), then ``proj`` and ``proj_drop``. Every route and every host form
        that applies ``proj`` ends here."""
        gate = getattr(self, 'gate', None)  # a module pickled by an earlier release has none
        if gate is not None:
            check_gate_input(type(self).__name__, out, x)
            out = out * torch.sigmoid(gate(x))
        return self.proj_drop(self.proj(out))

    def forward(
        self,
        x: Tensor,
        attn_mask: Optional[Tensor] = None,
        context: Optional[Tensor] = None,
        return_attn: bool = False,
        is_causal: bool = False,
        attn_bias: BiasArg = None,
        value: Optional[Tensor] = None,
    ) -> AttnOutput:
        """``x [B, M, C]`` (+ ``context [B, N, kdim]`` / ``value [B, N, vdim]``, both ``C`` wide by
        default) → ``[B, M, C]`` (+ maps if asked). Any of ``B``, ``M``, ``N`` may be 0: a query
        with no key (``N = 0``, or every key excluded by ``attn_mask``) gets weights 0, so its
        output is ``proj.bias`` (as SDPA's; :mod:`.functional`).

        Args:
            x: Query tokens (and keys / values when ``context`` is None).
            attn_mask: Exclusion mask (see the module docstring).
            context: Key tokens (and values when ``value`` is None).
            return_attn: Eager route; also return the maps.
            is_causal: AND a causal mask into ``attn_mask``.
            attn_bias: Logit bias inside the formula, or ``(b_pos, b_neg)`` for DnA.
            value: Value tokens, when they differ from the keys' input.
        """
        check_inputs(type(self).__name__, self.embed_dims, x, context, value, self.kdim, self.vdim)
        attn_mask = with_causal(attn_mask, is_causal, x, context)
        heads = self.project(x, context, value)
        out, maps = self.run_attend(heads, attn_mask, attn_bias, return_attn or not self.fused_attn)
        out = self.project_out(self.merge_heads(out), x)  # [B, M, C]
        return (out, maps) if return_attn else out

    def extra_repr(self) -> str:
        text = f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, fused_attn={self.fused_attn}'
        return f'{text}, gated=True' if self.gated else text


class CrossAttentionMixin:
    """Cross-attention form: ``forward(query [B, M, C], context [B, N, C], attn_mask=None)``."""

    def forward(
        self,
        query: Tensor,
        context: Tensor,
        attn_mask: Optional[Tensor] = None,
        return_attn: bool = False,
        attn_bias: BiasArg = None,
        value: Optional[Tensor] = None,
    ) -> AttnOutput:
        """``query [B, M, C]``, keys from ``context [B, N, C]``, values from ``value`` (default:
        ``context``) → ``[B, M, C]``."""
        return super().forward(
            query,
            attn_mask=attn_mask,
            context=context,  # type: ignore[misc]
            return_attn=return_attn,
            attn_bias=attn_bias,
            value=value,
        )


def no_formula(cls: type) -> str:
    """The line that refuses the member class ``cls`` for having no :meth:`~AttentionBase.attend`."""
    return (
        f'{where(cls)} defines no attend(heads, attn_mask, attn_bias, eager): an attention member must '
        'define attend, its formula (docs/attention.md, "Your own member")'
    )


def check_formula(cls: type) -> None:
    """Raise a one-line :class:`~dna_mm.errors.MemberError` naming ``cls`` (a subclass of
    :class:`AttentionBase`) unless it or a base below :class:`AttentionBase` defines
    :meth:`~AttentionBase.attend`: the base states no formula, so a member without its own would
    fail only at its first call (a training step), with no name."""
    if cls.attend is AttentionBase.attend:
        raise MemberError(no_formula(cls))


@has_side_effect  # FX keeps the call although nothing uses its (absent) result
@torch.fx.wrap
def check_inputs(
    name: str,
    embed_dims: int,
    x: Tensor,
    context: Optional[Tensor],
    value: Optional[Tensor],
    kdim: Optional[int] = None,
    vdim: Optional[int] = None,
) -> None:
    """Raise a ``ValueError`` naming the shapes unless ``x [B, M, C]`` and the keys' input
    ``[B, N, kdim]`` (``context``, else ``x``) and the values' input ``[B, N, vdim]`` (``value``,
    else the keys' input) fit a module of width ``C = embed_dims`` called ``name`` (``kdim`` /
    ``vdim``: its key and value widths, default ``C``). Any size may be 0 (an empty batch, no
    queries, an empty context).

    An FX leaf (it branches on shapes): a traced model checks the real inputs on every forward.
    TorchScript-compatible; ``torch.compile`` and ``torch.export`` trace through it.
    """
    kdim = embed_dims if kdim is None else kdim
    vdim = embed_dims if vdim is None else vdim
    if x.dim() != 3 or x.shape[-1] != embed_dims:
        raise ValueError(f'{name}: expected x of shape [B, N, {embed_dims}], got {list(x.shape)}')
    for label, t, width in (('context', context, kdim), ('value', value, vdim)):
        if t is not None and (t.dim() != 3 or t.shape[0] != x.shape[0] or t.shape[-1] != width):
            raise ValueError(
                f'{name}: expected {label} of shape [{x.shape[0]}, N, {width}], got {list(t.shape)}'
            )
    keys = x if context is None else context
    if keys.shape[-1] != kdim:  # x gives the keys, but the module takes keys of another width
        raise ValueError(
            f'{name}: built with kdim={kdim}: its keys come from context [B, N, {kdim}]; got none, '
            f'and x is {embed_dims} wide'
        )
    values = keys if value is None else value
    if values.shape[-1] != vdim:  # the keys' input gives the values, of another width
        source = 'x' if context is None else 'context'
        raise ValueError(
            f'{name}: built with vdim={vdim}: its values come from value [B, N, {vdim}]; got none, '
            f'and {source} (the keys\' input) is {values.shape[-1]} wide'
        )
    if value is not None and value.shape[1] != keys.shape[1]:
        raise ValueError(f'{name}: value has {value.shape[1]} tokens, keys have {keys.shape[1]}')


def checked_kernel(name: str, kernel: str, kernels: tuple[str, ...], head_dim: int) -> str:
    """``kernel`` when it is one of ``kernels`` (a member's fused routes) and, for ``'triton'``,
    the Triton kernel can run here at ``head_dim``; else a :class:`~dna_mm.errors.ConfigError`
    (a ``ValueError``; one line from the tools) naming the choices or why the kernel cannot run."""
    if kernel not in kernels:
        raise ConfigError(f'{name}: kernel must be one of {list(kernels)}, got {kernel!r}')
    if kernel == 'triton':
        from ...ops.dna_attention import kernel_unusable_reason

        reason = kernel_unusable_reason(head_dim)
        if reason is not None:
            raise ConfigError(f"{name}: kernel='triton' cannot run: {reason}; use kernel='sdpa'")
    return kernel


def has_tokens(heads: dict[str, Tensor]) -> bool:
    """The call has queries and keys (``M > 0`` and ``N > 0`` of ``q [B, H, M, d]``, ``k [B, H, N,
    d]``): where a Triton kernel, which tiles them, may run; else SDPA (an empty output, or 0 for
    queries without a key)."""
    return heads['q'].shape[-2] > 0 and heads['k'].shape[-2] > 0


def traced(t: Tensor) -> bool:
    """``t`` is being traced into a graph (``torch.compile``, ``torch.export``, ``torch.jit.trace``,
    a ``torch.fx`` symbolic trace), not computed: where a first-call check is skipped."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing() or isinstance(t, torch.fx.Proxy)


@has_side_effect
@torch.fx.wrap
def check_gate_input(name: str, out: Tensor, x: Tensor) -> None:
    """Raise a ``ValueError`` naming the shapes unless the gate's input ``x [B, M, C]`` has the
    tokens of the output ``out [B, M, C]`` it gates (a host that pools the queries must give
    the gate its pooled tokens). An FX leaf, as :func:`check_inputs`."""
    if x.shape[:-1] != out.shape[:-1]:
        raise ValueError(
            f'{name}: the gate reads x of shape {list(x.shape)}, the output it gates is {list(out.shape)}'
        )


@torch.fx.wrap
def with_causal(
    attn_mask: Optional[Tensor], is_causal: bool, x: Tensor, context: Optional[Tensor]
) -> Optional[Tensor]:
    """``attn_mask`` AND a causal mask over queries ``x`` and keys ``context`` (or ``x``) when
    ``is_causal``, else ``attn_mask`` unchanged. An FX leaf: timm's ViT hands ``is_causal`` on
    as a traced input, which FX cannot branch on."""
    if not is_causal:
        return attn_mask
    keys = x if context is None else context
    causal = causal_mask(x.shape[1], keys.shape[1], x.device)
    if attn_mask is None:
        return causal
    if attn_mask.dtype == torch.bool:
        return attn_mask & causal
    return attn_mask.masked_fill(~causal, float('-inf'))
