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
                                       ``attn.qkv``; ``proj`` → ``attn.proj``
torch ``nn.MultiheadAttention``        ``in_proj_*`` → ``qkv.*``, or ``{q,k,v}_proj_weight`` +
                                       ``in_proj_bias`` → ``{q,k,v}_proj.*``; ``out_proj`` → ``proj``
=====================================  =========================================================

:func:`negative_pooling` gives MViTv2's DnA form its negative pooling from the positive one.
"""

from __future__ import annotations

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
    separate ``q_proj`` / ``k_proj`` / ``v_proj`` → ``attn.qkv``; ``proj`` → ``attn.proj``."""
    if not any(k.startswith(('qkv.', 'q_proj.', 'q_bias', 'proj.')) for k in sd):
        return sd  # already the form's layout
    out = {f'attn.{k}': v for k, v in sd.items() if k.startswith('proj.')}
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


def negative_pooling(
    sd: StateDict, own: tuple[bool, bool], init: NegativeInit
) -> tuple[StateDict, list[str]]:
    """The negative branch's pooling of a DnA MViTv2 attention (keys relative to it) from the
    positive one's in ``sd``: the convolution copied, the norm's affine times the scale
    (``Q-``: ``q_neg_scale``, ``V-``: ``v_neg_scale``). ``own``: whether the module has its own
    ``(Q-, V-)`` pooling; keys of a negative pooling it lacks are dropped, pooling keys already
    in ``sd`` are kept. Returns the new state dict and the keys generated."""
    out, generated = dict(sd), []
    for name, has_own in zip('qv', own, strict=True):
        prefixes = (f'pool_{name}_neg.', f'norm_{name}_neg.')
        if not has_own:
            out = {k: v for k, v in out.items() if not k.startswith(prefixes)}
            continue
        if any(k.startswith(prefixes) for k in out):
            continue
        scale = init.q_neg_scale if name == 'q' else init.v_neg_scale
        for key in [k for k in sd if k.startswith((f'pool_{name}.', f'norm_{name}.'))]:
            new = key.replace(f'_{name}.', f'_{name}_neg.', 1)
            out[new] = sd[key].clone() if key.startswith('pool_') else sd[key] * scale
            generated.append(new)
    return out, generated
