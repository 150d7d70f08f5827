"""One attention's keys as another library's host writes them → the keys of its family form
(``with_attention``'s load hooks read a zoo checkpoint through these). Each function takes the
host's keys relative to the attention and returns a new dict; keys already in the form's layout
pass unchanged.

=====================================  =========================================================
host                                   mapping
=====================================  =========================================================
timm ``Attention``, MMAction2 MViTv2   none (the family's names)
MMAction2 ``vit_mae.Attention``        ``qkv.weight`` + ``q_bias`` / ``v_bias`` → ``qkv.*``
MMAction2 ``WindowAttention3D``,       ``qkv``, ``proj`` → ``attn.qkv``, ``attn.proj``
MMPretrain / MMDetection ``WindowMSA``,
MMPretrain ``MultiheadAttention``
MMPretrain ``BEiTAttention``           the same, ``q_bias`` / ``v_bias`` → ``attn.qkv.bias``
mmcv ``MultiheadAttention``,           ``attn.in_proj_*`` → ``attn.qkv.*``, ``attn.out_proj`` →
UniFormerV2 ``Extractor``, MMAction2's ``attn.proj`` (:func:`~.attention.rename_mha`)
divided space-time steps
timm ``EvaAttention``                  ``qkv`` + ``q_bias`` / ``v_bias`` or ``q/k/v_proj`` →
                                       ``attn.qkv``; ``proj``, ``gate`` → ``attn.proj``, ``.gate``
torch ``nn.MultiheadAttention``        ``in_proj_*`` → ``qkv.*``, or ``{q,k,v}_proj_weight`` +
                                       ``in_proj_bias`` → ``{q,k,v}_proj.*``; ``out_proj`` → ``proj``
=====================================  =========================================================

:func:`extra_pooling` gives MViTv2's form the pooling of a member's extra heads from the pooling
of the heads whose place they take (DnA's negative pooling: :func:`negative_pooling`).
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor

from ..family import NegativeInit
from .attention import rename_mha

StateDict = dict[str, Tensor]


def unchanged(sd: StateDict) -> StateDict:
    """The host's keys are the form's."""
    return sd


def qkv_bias(q_bias: Tensor, v_bias: Tensor) -> Tensor:
    """``[q_bias, 0, v_bias]`` (``[3C]``): the fused bias of hosts that learn no key bias
    (VideoMAE, EVA); a key bias would shift every logit of a row alike, so 0 is exact."""
    return torch.cat([q_bias, torch.zeros_like(q_bias), v_bias])


def videomae_keys(sd: StateDict) -> StateDict:
    """``qkv.weight`` (no bias) + ``q_bias`` / ``v_bias`` → ``qkv.weight`` / ``qkv.bias``."""
    if 'q_bias' not in sd:
        return sd
    out = {k: v for k, v in sd.items() if k not in ('q_bias', 'v_bias')}
    out['qkv.bias'] = qkv_bias(sd['q_bias'], sd['v_bias'])
    return out


def under_attn(sd: StateDict) -> StateDict:
    """``qkv.*``, ``proj.*`` → ``attn.qkv.*``, ``attn.proj.*``; the rest (bias table and index,
    layer scale) kept."""
    return {(f'attn.{k}' if k.startswith(('qkv.', 'proj.')) else k): v for k, v in sd.items()}


def beit_keys(sd: StateDict) -> StateDict:
    """:func:`under_attn`, with BEiT's ``q_bias`` / ``v_bias`` (no key bias) → ``attn.qkv.bias``."""
    out = under_attn({k: v for k, v in sd.items() if k not in ('q_bias', 'v_bias')})
    if 'q_bias' in sd:
        out['attn.qkv.bias'] = qkv_bias(sd['q_bias'], sd['v_bias'])
    return out


def mha_keys(sd: StateDict) -> StateDict:
    """``nn.MultiheadAttention``'s keys (also under ``attn.``) → the family's: ``in_proj_*`` →
    ``qkv.*``, ``out_proj.*`` → ``proj.*``."""
    return dict(rename_mha(sd))


def eva_keys(sd: StateDict) -> StateDict:
    """EVA's fused ``qkv.weight`` + ``q_bias`` / ``v_bias`` (the key bias is a zero buffer) or
    separate ``q_proj`` / ``k_proj`` / ``v_proj`` → ``attn.qkv``; ``proj``, ``gate`` →
    ``attn.proj``, ``attn.gate``."""
    if not any(k.startswith(('qkv.', 'q_proj.', 'q_bias', 'proj.')) for k in sd):
        return sd  # already the form's layout
    out = {f'attn.{k}': v for k, v in sd.items() if k.startswith(('proj.', 'gate.'))}
    if 'qkv.weight' in sd:
        out['attn.qkv.weight'] = sd['qkv.weight']
    else:
        out['attn.qkv.weight'] = torch.cat([sd['q_proj.weight'], sd['k_proj.weight'], sd['v_proj.weight']])
    q_bias = sd.get('q_bias', sd.get('q_proj.bias'))
    v_bias = sd.get('v_bias', sd.get('v_proj.bias'))
    if q_bias is not None:
        out['attn.qkv.bias'] = qkv_bias(q_bias, v_bias)
    return out


def torch_mha_keys(sd: StateDict) -> StateDict:
    """``nn.MultiheadAttention``'s keys → its family form's: packed ``in_proj_*`` → ``qkv.*``
    (:func:`mha_keys`); separate ``{q,k,v}_proj_weight`` (``kdim`` / ``vdim`` ≠ ``E``) and the
    packed ``in_proj_bias`` → ``{q,k,v}_proj.weight`` / ``.bias``; ``out_proj.*`` → ``proj.*``."""
    if 'q_proj_weight' not in sd:
        return mha_keys(sd)
    out = {f'{n}_proj.weight': sd[f'{n}_proj_weight'] for n in 'qkv'}
    if 'in_proj_bias' in sd:
        out.update({f'{n}_proj.bias': b for n, b in zip('qkv', sd['in_proj_bias'].chunk(3), strict=True)})
    out.update({'proj.' + k[len('out_proj.') :]: v for k, v in sd.items() if k.startswith('out_proj.')})
    return out


#: the heads MViTv2's attention pools itself (``pool_q`` / ``norm_q``, ...)
POOLED_HEADS = ('q', 'k', 'v')


def _pooled_heads(sd: StateDict) -> list[str]:
    """The heads ``h`` with a pooling convolution ``pool_<h>.*`` in ``sd``, in key order."""
    heads = (k.split('.', 1)[0][len('pool_') :] for k in sd if k.startswith('pool_') and '.' in k)
    return list(dict.fromkeys(heads))


def extra_pooling(sd: StateDict, own: Mapping[str, tuple[str, float]]) -> tuple[StateDict, list[str]]:
    """The pooling of an MViTv2 attention's extra heads (keys relative to it), each from the
    pooling of the head whose place it takes. ``own``: extra head ``h`` the module pools itself
    → ``(base, scale)``; ``pool_<h>.*`` = ``pool_<base>.*`` (copied) and ``norm_<h>.*`` =
    ``scale · norm_<base>.*`` (the norm's affine; a norm after the pooling removes any scale of
    the projection), unless ``sd`` has its pooling already (kept). The pooling of a head beyond
    ``q, k, v`` that the module does not pool itself is dropped. Returns the new state dict and
    the keys generated."""
    absent = [h for h in _pooled_heads(sd) if h not in POOLED_HEADS and h not in own]
    drop = tuple(f'{kind}_{h}.' for h in absent for kind in ('pool', 'norm'))
    out = {k: v for k, v in sd.items() if not k.startswith(drop)} if drop else dict(sd)
    generated = []
    for head, (base, scale) in own.items():
        if any(k.startswith((f'pool_{head}.', f'norm_{head}.')) for k in out):
            continue
        for key in [k for k in sd if k.startswith((f'pool_{base}.', f'norm_{base}.'))]:
            kind, rest = key.split('_', 1)
            new = f'{kind}_{head}{rest[len(base) :]}'
            out[new] = sd[key].clone() if kind == 'pool' else sd[key] * scale
            generated.append(new)
    return out, generated


def negative_pooling(
    sd: StateDict, own: tuple[bool, bool], init: NegativeInit
) -> tuple[StateDict, list[str]]:
    """The negative branch's pooling of a DnA MViTv2 attention (keys relative to it) from the
    positive one's in ``sd`` (:func:`extra_pooling` of ``q_neg`` / ``v_neg``): the convolution
    copied, the norm's affine times the scale (``Q-``: ``q_neg_scale``, ``V-``: ``v_neg_scale``).
    ``own``: whether the module has its own ``(Q-, V-)`` pooling; keys of a negative pooling it
    lacks are dropped, pooling keys already in ``sd`` are kept. Returns the new state dict and
    the keys generated."""
    scales = dict(q=init.q_neg_scale, v=init.v_neg_scale)
    heads = {f'{base}_neg': (base, scales[base]) for base, has in zip('qv', own, strict=True) if has}
    return extra_pooling(sd, heads)
