"""Common interface of the attention family.

Every module maps tokens ``x [B, M, C]`` to ``[B, M, C]``:

* self-attention: ``forward(x)``, queries, keys and values all from ``x`` (``M = N``);
* cross-attention: ``forward(x, context=ctx)``, queries from ``x [B, M, C]``, keys and values
  from ``ctx [B, N, C]`` with the *same* projection weights; ``value=val [B, N, C]`` takes the
  values from a different input than the keys (mmcv's ``key`` / ``value``).

Two additive terms, broadcastable to ``[B, H, M, N]`` (:mod:`.functional` has the rule):

* ``attn_mask`` — exclusion mask: ``bool`` (``True`` = attend) or float, added unchanged to
  every branch's logits after the softmin sign (``-inf``, ``-1e4``, ``finfo.min``, ``-100``
  remove a key from every branch);
* ``attn_bias`` — logit bias inside the formula (relative positions), ``s Q K^T + b`` in every
  branch; two-branch DnA also takes a pair ``(b_pos, b_neg)``.

``return_attn=True`` takes the eager path and also returns a dict of the normalised maps
``[B, H, M, N]`` (keys documented per module).

The forward is ``torch.fx``-traceable: its argument checks and mask handling are FX leaf
functions (:func:`check_inputs`, :func:`with_causal`), kept as calls that see the real tensors.

The constructor accepts timm's attention keywords (``dim`` positionally, ``qk_norm``,
``scale_norm``, ``proj_bias``, ``norm_layer``), so each module is usable as timm's
``attn_layer``, and mmcv's ``batch_first`` (always ``True`` here).
"""

from __future__ import annotations

from typing import Optional, Union

import torch
import torch.fx
import torch.nn.functional as F
from torch import Tensor, nn
from torch.fx.node import has_side_effect

from .functional import BiasArg, causal_mask

AttnOutput = Union[Tensor, tuple[Tensor, dict[str, Tensor]]]


class AttentionBase(nn.Module):
    """Multi-head attention skeleton: ``qkv = Linear(C, 3C)``, ``proj = Linear(C, C)``.

    Subclasses implement :meth:`attend` on head-split tensors.

    Args:
        embed_dims: Token width ``C``.
        num_heads: Number of heads ``H``; ``C`` must be divisible by it.
        qkv_bias: Bias in the query/key/value projections (and the extra DnA projections).
        attn_drop: Dropout on the normalised attention maps (every branch).
        proj_drop: Dropout after the output projection.
        proj_bias: Bias in the output projection.
        fused_attn: Use ``scaled_dot_product_attention`` when no maps are requested.
        qk_norm, scale_norm, norm_layer: timm keywords; only the defaults are supported.
        batch_first: mmcv keyword; only ``True`` is supported.
        device, dtype: Factory keywords for the parameters (timm passes them).
    """

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
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if embed_dims <= 0 or num_heads <= 0 or embed_dims % num_heads:
            raise ValueError(
                f'{name}: embed_dims ({embed_dims}) must be a positive multiple of num_heads ({num_heads})'
            )
        if not 0.0 <= attn_drop < 1.0 or not 0.0 <= proj_drop < 1.0:
            raise ValueError(
                f'{name}: attn_drop and proj_drop must be in [0, 1), got {attn_drop}, {proj_drop}'
            )
        if qk_norm or scale_norm:
            raise ValueError(f'{name}: qk_norm / scale_norm are not supported')
        if not batch_first:
            raise ValueError(f'{name}: only batch_first=True ([B, N, C] tokens) is supported')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dim = embed_dims // num_heads
        self.scale = self.head_dim**-0.5
        self.fused_attn = fused_attn
        self.batch_first = True
        self.factory_kwargs = dict(device=device, dtype=dtype)
        self.qkv = nn.Linear(embed_dims, 3 * embed_dims, bias=qkv_bias, **self.factory_kwargs)
        self.attn_drop_p = attn_drop
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(embed_dims, embed_dims, bias=proj_bias, **self.factory_kwargs)
        self.proj_drop = nn.Dropout(proj_drop)

    # -- helpers -----------------------------------------------------------------------------
    def split_heads(self, t: Tensor) -> Tensor:
        """``[B, N, H·d] → [B, H, N, d]``."""
        b, n, _ = t.shape
        return t.reshape(b, n, self.num_heads, -1).transpose(1, 2)

    def merge_heads(self, t: Tensor) -> Tensor:
        """``[B, H, N, d] → [B, N, H·d]``."""
        b, _, n, _ = t.shape
        return t.transpose(1, 2).reshape(b, n, -1)

    def project_qkv(
        self, x: Tensor, context: Optional[Tensor], value: Optional[Tensor] = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Queries from ``x``, keys from ``context`` (or ``x``), values from ``value`` (or the
        keys' input), each ``[B, H, ·, d]``."""
        c = self.embed_dims
        if context is None and value is None:
            q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 × [B, N, C]
            return self.split_heads(q), self.split_heads(k), self.split_heads(v)
        context = x if context is None else context
        if value is None and not is_plain_linear(self.qkv):  # a wrapper / hook sees whole inputs
            q = self.qkv(x)[..., :c]
            k, v = self.qkv(context)[..., c:].chunk(2, dim=-1)
        elif value is None:  # only the rows each input needs
            w, b = self.qkv.weight, self.qkv.bias
            q = F.linear(x, w[:c], None if b is None else b[:c])  # [B, M, C]
            k, v = F.linear(context, w[c:], None if b is None else b[c:]).chunk(2, dim=-1)
        else:
            q = self.qkv_rows(x, 0)
            k = self.qkv_rows(context, 1)
            v = self.qkv_rows(value, 2)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def qkv_rows(self, t: Tensor, chunk: int) -> Tensor:
        """One chunk (0: Q, 1: K, 2: V) of ``qkv`` applied to ``t [B, N, C]`` → ``[B, N, C]``."""
        c = self.embed_dims
        if not is_plain_linear(self.qkv):
            return self.qkv(t)[..., chunk * c : (chunk + 1) * c]
        w, b = self.qkv.weight, self.qkv.bias
        rows = slice(chunk * c, (chunk + 1) * c)
        return F.linear(t, w[rows], None if b is None else b[rows])

    @property
    def dropout_p(self) -> float:
        return self.attn_drop_p if self.training else 0.0

    # -- interface ---------------------------------------------------------------------------
    def project(
        self, x: Tensor, context: Optional[Tensor] = None, value: Optional[Tensor] = None
    ) -> dict[str, Tensor]:
        """Head-split projections, the keyword arguments of :meth:`core`."""
        q, k, v = self.project_qkv(x, context, value)
        return dict(q=q, k=k, v=v)

    def core(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        attn_mask: Optional[Tensor] = None,
        return_attn: bool = False,
        attn_bias: BiasArg = None,
        **heads: Tensor,
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The attention itself on head-split tensors: ``[B, H, M, d]`` out, and the maps."""
        raise NotImplementedError

    def attend(
        self,
        x: Tensor,
        context: Optional[Tensor],
        attn_mask: Optional[Tensor],
        return_attn: bool,
        attn_bias: BiasArg = None,
        value: Optional[Tensor] = None,
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Head-merged attention output ``[B, M, C]`` (before ``proj``) and the maps."""
        out, maps = self.core(
            **self.project(x, context, value),
            attn_mask=attn_mask,
            attn_bias=attn_bias,
            return_attn=return_attn,
        )
        return self.merge_heads(out), maps

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
        """``x [B, M, C]`` (+ ``context`` / ``value [B, N, C]``) → ``[B, M, C]`` (+ maps if asked).

        Args:
            x: Query tokens (and keys / values when ``context`` is None).
            attn_mask: Exclusion mask (see the module docstring).
            context: Key tokens (and values when ``value`` is None).
            return_attn: Eager path; also return the maps.
            is_causal: AND a causal mask into ``attn_mask``.
            attn_bias: Logit bias inside the formula, or ``(b_pos, b_neg)`` for DnA.
            value: Value tokens, when they differ from the keys' input.
        """
        check_inputs(type(self).__name__, self.embed_dims, x, context, value)
        attn_mask = with_causal(attn_mask, is_causal, x, context)
        out, maps = self.attend(x, context, attn_mask, return_attn, attn_bias, value)  # [B, M, C]
        out = self.proj_drop(self.proj(out))
        return (out, maps) if return_attn else out

    def extra_repr(self) -> str:
        return f'embed_dims={self.embed_dims}, num_heads={self.num_heads}, fused_attn={self.fused_attn}'


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


@has_side_effect  # FX keeps the call although nothing uses its (absent) result
@torch.fx.wrap
def check_inputs(
    name: str, embed_dims: int, x: Tensor, context: Optional[Tensor], value: Optional[Tensor]
) -> None:
    """Raise a ``ValueError`` naming the shapes unless ``x [B, M, C]``, ``context`` / ``value
    [B, N, C]`` (where given) fit a module of width ``embed_dims`` called ``name``.

    The tests branch on tensor shapes, which ``torch.fx`` symbolic tracing cannot follow, so the
    function is an FX leaf (:func:`torch.fx.wrap`): a traced model keeps the call as one graph
    node that checks the real inputs on every forward.
    TorchScript-compatible (a traced graph can be scripted); ``torch.compile`` and
    ``torch.export`` trace through it (the shapes are static there).
    """
    if x.dim() != 3 or x.shape[-1] != embed_dims:
        raise ValueError(f'{name}: expected x of shape [B, N, {embed_dims}], got {list(x.shape)}')
    for label, t in (('context', context), ('value', value)):
        if t is not None and (t.dim() != 3 or t.shape[0] != x.shape[0] or t.shape[-1] != embed_dims):
            raise ValueError(
                f'{name}: expected {label} of shape [{x.shape[0]}, N, {embed_dims}], got {list(t.shape)}'
            )
    keys = x if context is None else context
    if value is not None and value.shape[1] != keys.shape[1]:
        raise ValueError(f'{name}: value has {value.shape[1]} tokens, keys have {keys.shape[1]}')


def is_plain_linear(layer: Optional[nn.Module]) -> bool:
    """Whether code may use ``layer.weight`` / ``layer.bias`` in place of calling ``layer``:
    only for a plain ``nn.Linear`` without forward hooks (a LoRA wrapper, a subclass or an
    analysis hook would otherwise be bypassed)."""
    return type(layer) is nn.Linear and not (layer._forward_hooks or layer._forward_pre_hooks)  # type: ignore[union-attr]


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
