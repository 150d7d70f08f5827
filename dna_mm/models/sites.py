"""Where the attention modules of a model are: one :class:`AttentionSite` per family member.

Found by class (:class:`~dna_mm.models.attention.AttentionBase`), so the same code covers
MMAction2's TimeSformer (``…layers.{i}.attentions.{0,1}.attn``: temporal, spatial), timm
``dna_vit_*`` (``blocks.{i}.attn``), ViTDet (``backbone.blocks.{i}.attn``) and any model built
with ``with_attention``. A site's ``layer`` is the first integer in its module path (the block
index); its ``group`` separates the attentions of one block: ``'temporal'`` / ``'spatial'`` for
MMAction2's divided space-time wrappers, else ``'attn'`` when a block has one attention, else
the path with the block index written ``*``.

A site reads its member only through the member contract
(:class:`~dna_mm.models.attention.AttentionBase`: ``map_names``, ``branch_heads``,
``own_heads``, ``mixing_weights``, ``neg_coefficient``), never a member's own attribute names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from torch import Tensor, nn

from ..errors import UnsupportedModelError
from .attention import AttentionBase

#: wrapper class name → group label
WRAPPER_GROUPS: dict[str, str] = {
    'DividedTemporalAttentionWithNorm': 'temporal',
    'DividedSpatialAttentionWithNorm': 'spatial',
}


def attention_kind(module: nn.Module) -> str:
    """The member's short name (``'dna' | 'diff' | 'cog' | 'softmax'``, inherited by a cross
    form), or its class name for a member without one."""
    return type(module).short_name or type(module).__name__


@dataclass
class AttentionSite:
    """One attention module of a model.

    Attributes:
        name: Module path, e.g. ``'backbone.transformer_layers.layers.3.attentions.0.attn'``.
        module: The attention.
        layer: 0-based block index.
        group: ``'temporal'``, ``'spatial'``, ``'attn'``, or a path template.
        layer_path: Path of its block (whose output is the layer's tokens).
        parent: The module holding it (a wrapper such as ``DividedSpatialAttentionWithNorm``), if any.
    """

    name: str
    module: AttentionBase
    layer: int
    group: str
    layer_path: str
    parent: Optional[nn.Module]

    @property
    def kind(self) -> str:
        return attention_kind(self.module)

    def record(self, **fields) -> dict:
        """``dict(site, layer, group, **fields)``: the start of every per-site record of a report."""
        return dict(site=self.name, layer=self.layer, group=self.group, **fields)

    @property
    def branches(self) -> tuple[str, ...]:
        """Keys of the maps the module returns: ``('pos', 'neg')`` or ``('attn',)`` (the member's
        :attr:`~dna_mm.models.attention.AttentionBase.map_names`)."""
        return tuple(self.module.map_names)

    @property
    def alpha(self) -> Optional[Tensor]:
        """The member's mixing weight ``'alpha'``: DnA's per-head ``α [H]`` (``None`` for other
        members and for variant ``apm``; :meth:`~dna_mm.models.attention.AttentionBase.mixing_weights`)."""
        weight = self.module.mixing_weights().get('alpha')
        return None if weight is None else weight.value

    @property
    def value_heads(self) -> tuple[str, ...]:
        """The value head each branch reads, in :attr:`branches` order (DnA ``('v', 'v_neg')``,
        Diff ``('v', 'v')``; :meth:`~dna_mm.models.attention.AttentionBase.branch_heads`)."""
        return tuple(heads.v for heads in self.module.branch_heads().values())

    @property
    def has_separate_values(self) -> bool:
        """Whether its two branches read values of two projections (DnA ``q_vpm`` / ``qpm_vpm``:
        ``V+`` and ``V-``): two value heads, each ``v`` or one of the member's
        :meth:`~dna_mm.models.attention.AttentionBase.own_heads`."""
        heads = self.value_heads
        own = ('v', *self.module.own_heads())
        return len(heads) == 2 and heads[0] != heads[1] and all(h in own for h in heads)

    def neg_coefficient(self) -> Tensor:
        """The factor of the second branch in the output, broadcastable to ``[B, H, M, d]``:
        DnA ``α_h`` (1 without α), Diff ``-λ`` (the member's ``neg_coefficient``)."""
        return self.module.neg_coefficient().detach()


def find_attention_sites(model: nn.Module) -> list[AttentionSite]:
    """Every family attention in ``model``, in block order (then module order: a stable sort).

    Raises:
        UnsupportedModelError: The model holds no family attention.
    """
    modules = dict(model.named_modules())
    found = [(name, m) for name, m in modules.items() if isinstance(m, AttentionBase)]
    if not found:
        raise UnsupportedModelError(
            f'{type(model).__name__} holds no attention of the dna_mm family '
            f'(DnA / softmax / Diff / Cog modules); build it with dna_mm attentions'
        )
    sites = []
    for position, (name, module) in enumerate(found):
        parts = name.split('.')
        idx = next((i for i, p in enumerate(parts) if p.isdigit()), None)
        layer = int(parts[idx]) if idx is not None else position
        layer_path = '.'.join(parts[: idx + 1]) if idx is not None else name
        parent = modules.get('.'.join(parts[:-1])) if len(parts) > 1 else None
        template = '.'.join('*' if i == idx else p for i, p in enumerate(parts))
        group = WRAPPER_GROUPS.get(type(parent).__name__, template)
        sites.append(AttentionSite(name, module, layer, group, layer_path, parent))
    groups = {s.group for s in sites}
    if len(groups) == 1 and groups.isdisjoint(WRAPPER_GROUPS.values()):
        for s in sites:
            s.group = 'attn'
    return sorted(sites, key=lambda s: s.layer)


def prefix_tokens(model: nn.Module, layer_path: str) -> int:
    """Tokens before the patch tokens in a block's output (CLS / register tokens): the
    ``num_prefix_tokens`` of the nearest enclosing module that has it (timm), else 1 when that
    module has a ``cls_token`` (MMAction2's TimeSformer), else 0."""
    modules = dict(model.named_modules())
    parts = layer_path.split('.')
    for end in reversed(range(len(parts))):
        owner = modules.get('.'.join(parts[:end]))
        if isinstance(getattr(owner, 'num_prefix_tokens', None), int):
            return owner.num_prefix_tokens
        if isinstance(getattr(owner, 'cls_token', None), Tensor):
            return 1
    return 0


def alpha_stats(alpha: Tensor) -> dict[str, float]:
    """Statistics of one layer's ``α [H]`` over heads: ``mean``, ``max``, ``min`` and ``std``
    (with Bessel's correction, ``torch.std``'s default; 0 for a single head)."""
    if alpha.dim() != 1 or alpha.numel() == 0:
        raise ValueError(f'alpha_stats: expected alpha of shape [H], got {list(alpha.shape)}')
    a = alpha.detach().double()
    std = float(a.std()) if a.numel() > 1 else 0.0
    return dict(mean=float(a.mean()), max=float(a.max()), min=float(a.min()), std=std)
