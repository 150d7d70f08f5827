"""timm's ``EvaAttention`` (EVA / EVA-02 without rotary positions) with a family attention
inside: :class:`EvaAttentionAdapter`, built by :func:`from_host`. Keys: ``attn.*``
(:func:`~dna_mm.converters.hosts.eva_keys`)."""

from __future__ import annotations

from typing import Optional

from torch import Tensor, nn

from ..attention.builder import AttnCfg
from .forms import member_for_host, refuse, refuse_extras, timm_gate


class EvaAttentionAdapter(nn.Module):
    """timm's ``EvaAttention`` call ``(x [B, N, C], rope=None, attn_mask=None,
    is_causal=False) → [B, N, C]`` onto a family attention (``attn.*``): ``attn_mask`` (``bool``
    True = attend, or float added, as SDPA) is the family's exclusion mask, ``is_causal`` ANDs
    a causal mask into it. The family has no rotary positions: an EVA built with
    ``use_rot_pos_emb=True`` is refused by the swap (its ``RotaryEmbedding*`` module), and a
    ``rope`` tensor reaching this module anyway is refused at call time."""

    def __init__(self, family: nn.Module) -> None:
        super().__init__()
        self.attn = family

    def forward(
        self,
        x: Tensor,
        rope: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        is_causal: bool = False,
    ) -> Tensor:
        if rope is not None:
            raise ValueError(
                'with_attention: this EVA passes rotary position embeddings (rope), which the '
                'swapped attention does not support; build the EVA with use_rot_pos_emb=False'
            )
        return self.attn(x, attn_mask=attn_mask, is_causal=is_causal)  # [B, N, C]


def from_host(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of timm's ``EvaAttention`` ``host`` (its gate too); refuses ``qk_norm``,
    ``scale_attn_inner`` and a head width other than ``C / H``."""
    refuse_extras(host, 'qk_norm', 'scale_norm (scale_attn_inner)')
    dim = host.proj.out_features
    if host.head_dim * host.num_heads != dim:
        refuse(host, 'attn_head_dim different from the token width / num_heads')
    has_bias = host.q_bias is not None or (host.q_proj is not None and host.q_proj.bias is not None)
    bias = dict(qkv_bias=has_bias, proj_bias=host.proj.bias is not None, **timm_gate(host))
    return EvaAttentionAdapter(member_for_host(host, attn_cfg, layer_index, num_layers, dim, **bias))
