"""timm ViTs with DnA attention: ``dna_vit_{tiny,small,base}_patch16_224``.

Built on timm's :class:`~timm.models.vision_transformer.VisionTransformer`, so every key of a
timm ViT checkpoint maps 1:1 except the attention's negative branch. After ``import dna_mm``::

    timm.create_model('dna_vit_base_patch16_224', num_classes=400)  # Q±V±, attn_cfg='dna'
    timm.create_model('dna_vit_base_patch16_224', attn_cfg=dict(type='DnAAttention', variant='qpm_v'))
    # a softmax timm ViT or the authors' DnA ViT as initialisation (local file, no download):
    timm.create_model('dna_vit_base_patch16_224', pretrained=True,
                      pretrained_cfg_overlay=dict(file='vit_base_patch16_224.pth'))

Pretrained files go through :func:`checkpoint_filter_fn`: the authors' layouts are mapped by
:func:`~dna_mm.converters.official_to_dna_mm`, softmax attentions get a negative branch by
:func:`~dna_mm.converters.softmax_to_dna` (the authors' initialisation, :data:`~dna_mm.family.NEGATIVE_INIT`).

They behave as timm's own ViTs do (``tests/models/backbones/test_timm_vit.py`` runs timm's model checks on
them): any input size that is a multiple of the patch size (``dynamic_img_size=True``: the
position embedding is resampled on the fly; ``dynamic_img_size=False`` gives the fixed-size
model and a config that says so), ``features_only=True`` / ``forward_intermediates`` (timm's
``'getter'`` feature wrapper, the last 3 blocks by default, ``out_indices`` to choose),
``torch.fx`` tracing (timm's feature extraction; the traced graph also scripts),
``torch.compile(fullgraph=True)`` and ``torch.export``. Not ``torch.jit.script`` of the eager
model: the attention's forward returns a tensor or ``(tensor, maps)`` by a run-time flag
(``return_attn``), which TorchScript cannot type; script the FX-traced model instead.
"""

from __future__ import annotations

import contextlib
import difflib
from contextvars import ContextVar
from typing import Any, Iterator, Optional, Union

from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import use_fused_attn
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models import vision_transformer as timm_vit
from timm.models.vision_transformer import VisionTransformer
from timm.models.vision_transformer import checkpoint_filter_fn as vit_filter_fn

from ...converters import official_to_dna_mm
from ...converters.whole_model import timm_classifier_state_dict
from ...errors import ConfigError
from ...family import DNA_VARIANTS, NEGATIVE_INIT, canonical_variant, check_combine
from ..attention.builder import AttnCfg, attention_cfg, deprecated_key
from ..attention.dna import DnAAttention
from ..fitting import adapt_attentions, fill_own_start

#: what a ``dna_vit_*`` model's ``attn_cfg`` may set besides its type: the arguments of
#: :class:`DnAAttention` that timm's ``Block`` does not pass (it passes the width, heads, biases,
#: dropouts, norms)
TIMM_ATTN_KEYS = ('variant', 'gated', 'kernel')
#: the DnA arguments (name, value) of the attentions timm builds now (:func:`timm_builds`);
#: outside a ``dna_vit_*`` model's construction, the paper's Q±V±
_DNA_ARGS: ContextVar[tuple[tuple[str, Any], ...]] = ContextVar(
    'dna_vit_attention', default=(('variant', 'qpm_vpm'),)
)


@contextlib.contextmanager
def timm_builds(variant: str, **dna_args: Any) -> Iterator[None]:
    """Inside the block, every :class:`TimmDnAAttention` timm builds has ``variant`` and
    ``dna_args`` (``gated``, ``kernel``: :data:`TIMM_ATTN_KEYS`) as its arguments' defaults:
    :class:`DnAVisionTransformer` builds its blocks in it. Per thread and task (a
    :class:`~contextvars.ContextVar`); restored on exit."""
    token = _DNA_ARGS.set(tuple(dict(dna_args, variant=canonical_variant(variant)).items()))
    try:
        yield
    finally:
        _DNA_ARGS.reset(token)


class TimmDnAAttention(DnAAttention):
    """:class:`DnAAttention` as timm's ``Block`` builds it: one class for every variant (timm
    takes a class as ``attn_layer``, inspects it with ``issubclass`` and passes it only its own
    arguments). ``fused_attn`` follows timm's switch (``timm.layers.set_fused_attn`` /
    ``TIMM_FUSED_ATTN``) when the model is built, as timm's own ``Attention`` does, and the
    variant (and ``gated``, ``kernel``) are those of the model being built (:func:`timm_builds`;
    ``qpm_vpm`` outside one), so every attention is built once, by timm, before its weight initialisation
    (``fix_init`` included). In timm's own registry of attention layers (timm 1.0.23+,
    ``timm.models.vision_transformer.ATTN_LAYERS``) as ``'dna'``: ``attn_layer='dna'``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault('fused_attn', use_fused_attn())
        for name, value in _DNA_ARGS.get():
            kwargs.setdefault(name, value)
        super().__init__(*args, **kwargs)


def _timm_attn_layer() -> Union[str, type[TimmDnAAttention]]:
    """What ``dna_vit_*`` pass timm as ``attn_layer``: the name ``'dna'``, registered in timm's
    own lookup of attention layers where the installed timm has one (``ATTN_LAYERS``, timm
    1.0.23+); the class itself with an older timm (its ``Block`` calls ``attn_layer``)."""
    layers = getattr(timm_vit, 'ATTN_LAYERS', None)
    if not isinstance(layers, dict):
        return TimmDnAAttention
    if layers.setdefault('dna', TimmDnAAttention) is not TimmDnAAttention:  # another 'dna': ours by class
        return TimmDnAAttention
    return 'dna'


TIMM_ATTN_LAYER = _timm_attn_layer()


def __getattr__(name: str) -> type[TimmDnAAttention]:
    """``TimmDnAAttention_<variant>``, one class per variant in earlier releases: the one class
    now, so that a model pickled by them loads (its attentions keep their variant)."""
    prefix = 'TimmDnAAttention_'
    if name.startswith(prefix) and name[len(prefix) :] in DNA_VARIANTS:
        return TimmDnAAttention
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def dna_arguments(attn_cfg: AttnCfg) -> dict[str, Any]:
    """The DnA arguments an ``attn_cfg`` of a ``dna_vit_*`` model sets (:data:`TIMM_ATTN_KEYS`;
    a config without a type is DnA's), ``variant`` always; a :class:`~dna_mm.errors.ConfigError`
    for an attention of another kind or another argument."""
    if isinstance(attn_cfg, dict):
        attn_cfg = dict(attn_cfg, type=attn_cfg.get('type', 'DnAAttention'))
    cfg = attention_cfg(attn_cfg)
    other = sorted(set(cfg) - {'type', *TIMM_ATTN_KEYS})
    if cfg['type'] != 'DnAAttention' or other:
        near = [difflib.get_close_matches(k, TIMM_ATTN_KEYS, n=1) for k in other]
        hint = ''.join(f' (did you mean {n[0]!r}?)' for n in near if n)
        what = f'the keys {other}{hint}' if cfg['type'] == 'DnAAttention' else repr(attn_cfg)
        raise ConfigError(
            f"dna_vit_*: attn_cfg must be 'dna' or dict(type='DnAAttention', "
            f"{'=..., '.join(TIMM_ATTN_KEYS)}=...), got {what} (another attention in a timm ViT: "
            "type='with_attention'; alpha_init is the model's argument; timm's Block gives the rest)"
        )
    return {'variant': 'qpm_vpm'} | {k: v for k, v in cfg.items() if k != 'type'}


class DnAVisionTransformer(VisionTransformer):
    """timm ``VisionTransformer`` whose blocks use :class:`DnAAttention`.

    Args:
        attn_cfg: The attention of every block, DnA: ``'dna'`` (the paper's Q±V±) or
            ``dict(type='DnAAttention', variant='qpm_v', gated=True, kernel='sdpa')`` (any of
            :data:`TIMM_ATTN_KEYS`; another attention in a timm ViT: ``with_attention`` /
            :func:`~dna_mm.models.adapters.swap_attention`).
        dna_variant: Deprecated alias of ``attn_cfg=dict(type='DnAAttention', variant=...)`` (a
            ``FutureWarning``; removed in the next release).
        alpha_init: Initial ``α`` (default: :data:`~dna_mm.family.NEGATIVE_INIT`).
        pretrained_combine: Sign of the branch sum in the authors' pretrained file
            (``'add'`` or ``'sub'``, see :func:`~dna_mm.converters.official_to_dna_mm`).
        *args, **kwargs: timm ``VisionTransformer`` arguments.
    """

    def __init__(
        self,
        *args: Any,
        attn_cfg: AttnCfg = 'dna',
        dna_variant: Optional[str] = None,
        alpha_init: float = NEGATIVE_INIT.alpha,
        pretrained_combine: str = 'add',
        **kwargs: Any,
    ) -> None:
        check_combine(pretrained_combine)
        kwargs.setdefault('qkv_bias', True)
        if dna_variant is not None:
            new = f"attn_cfg=dict(type='DnAAttention', variant={dna_variant!r})"
            deprecated_key('DnAVisionTransformer', 'dna_variant', new)
            attn_cfg = dict(type='DnAAttention', variant=dna_variant)
        dna_args = dna_arguments(attn_cfg)
        variant = canonical_variant(dna_args.pop('variant'))
        with timm_builds(variant, **dna_args):  # each attention timm builds: TimmDnAAttention of these
            super().__init__(*args, attn_layer=TIMM_ATTN_LAYER, **kwargs)
        for block in self.blocks:  # a constant: no random draw, the same weights as built with it
            if block.attn.alpha is not None:
                block.attn.alpha.data.fill_(float(alpha_init))
        self.dna_variant = variant
        self.pretrained_combine = pretrained_combine


def checkpoint_filter_fn(state_dict: dict, model: DnAVisionTransformer) -> dict:
    """The authors' layouts mapped (:func:`~dna_mm.converters.official_to_dna_mm`, with the
    model's ``pretrained_combine``), timm's ViT filter (prefixes, position-embedding resize,
    ...), then every attention fitted to the model's variant
    (:func:`~dna_mm.models.backbones.adapt_attentions`); what an attention starts itself and the
    file lacks (a gate, for a file of an ungated model) keeps its start. An MMPretrain
    classifier's file (``configs/imagenet/``) is read as the timm model it holds."""
    state_dict = state_dict.get('model', state_dict.get('state_dict', state_dict))
    state_dict = timm_classifier_state_dict(state_dict) or state_dict
    state_dict = official_to_dna_mm(state_dict, combine=model.pretrained_combine, strict=False)
    state_dict = vit_filter_fn(state_dict, model)
    state_dict = adapt_attentions(model, state_dict, source='pretrained checkpoint')[0]
    for name, attn in model.named_modules():  # what a member starts itself and the file lacks: its start
        if isinstance(attn, DnAAttention):
            fill_own_start(attn, state_dict, f'{name}.')
    return state_dict


def _create(name: str, pretrained: bool, arch: dict, kwargs: dict) -> DnAVisionTransformer:
    """timm's ViT builder for a 16-patch, 12-block ``arch`` (``embed_dim``, ``num_heads``),
    overridden by ``kwargs``: ``features_only=True`` wraps the model in timm's ``'getter'``
    feature net (:meth:`forward_intermediates` of blocks ``out_indices``, default the last 3); a
    model built with ``dynamic_img_size=False`` gets ``fixed_input_size=True`` in its config."""
    kwargs = dict(patch_size=16, depth=12, dynamic_img_size=True, **arch) | kwargs
    out_indices = kwargs.pop('out_indices', 3)
    overlay = kwargs.get('pretrained_cfg_overlay') or {}
    if pretrained and overlay.get('file') and overlay.get('state_dict') is None:
        # read as every dna_mm load is (weights_only, mmengine's objects allow-listed: timm's own
        # torch.load refuses an mmengine checkpoint, its message hub), the weights picked by
        # timm's rule (an EMA first, then state_dict, then model; module. stripped)
        from mmengine.runner.checkpoint import _load_checkpoint
        from timm.models import clean_state_dict

        checkpoint = _load_checkpoint(overlay['file'], 'cpu')
        keys = ('state_dict_ema', 'model_ema', 'state_dict', 'model')
        key = next((k for k in keys if isinstance(checkpoint, dict) and checkpoint.get(k) is not None), None)
        state = clean_state_dict(checkpoint[key] if key else checkpoint)
        kwargs['pretrained_cfg_overlay'] = dict(overlay, state_dict=state)
    if not kwargs.get('dynamic_img_size', True):
        overlay = kwargs.get('pretrained_cfg_overlay') or {}
        kwargs['pretrained_cfg_overlay'] = dict(overlay, fixed_input_size=True)
    return build_model_with_cfg(
        DnAVisionTransformer,
        name,
        pretrained,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(out_indices=out_indices, feature_cls='getter'),
        **kwargs,
    )


# The authors' ImageNet recipe (DeiT's, ``rjccv/DnA`` ``vit/datasets.py``): ImageNet mean / std,
# evaluation resize 224 / 0.875 (bicubic) and 224 centre crop. The models take any input size
# (``dynamic_img_size``), hence ``fixed_input_size=False``. No hosted weights:
# ``pretrained=True`` needs ``pretrained_cfg_overlay=dict(file=...)``.
default_cfgs = generate_default_cfgs(
    {
        f'dna_vit_{size}_patch16_224': dict(
            num_classes=1000,
            input_size=(3, 224, 224),
            pool_size=None,
            crop_pct=0.875,
            interpolation='bicubic',
            fixed_input_size=False,
            mean=IMAGENET_DEFAULT_MEAN,
            std=IMAGENET_DEFAULT_STD,
            first_conv='patch_embed.proj',
            classifier='head',
            license='apache-2.0',
        )
        for size in ('tiny', 'small', 'base')
    }
)


@register_model
def dna_vit_tiny_patch16_224(pretrained: bool = False, **kwargs: Any) -> DnAVisionTransformer:
    """DnA ViT-Ti/16 (192 wide, 12 blocks, 3 heads)."""
    return _create('dna_vit_tiny_patch16_224', pretrained, dict(embed_dim=192, num_heads=3), kwargs)


@register_model
def dna_vit_small_patch16_224(pretrained: bool = False, **kwargs: Any) -> DnAVisionTransformer:
    """DnA ViT-S/16 (384 wide, 12 blocks, 6 heads)."""
    return _create('dna_vit_small_patch16_224', pretrained, dict(embed_dim=384, num_heads=6), kwargs)


@register_model
def dna_vit_base_patch16_224(pretrained: bool = False, **kwargs: Any) -> DnAVisionTransformer:
    """DnA ViT-B/16 (768 wide, 12 blocks, 12 heads): 100.7M parameters with Q±V±."""
    return _create('dna_vit_base_patch16_224', pretrained, dict(embed_dim=768, num_heads=12), kwargs)


__all__ = [
    'DnAVisionTransformer',
    'checkpoint_filter_fn',
    'dna_vit_tiny_patch16_224',
    'dna_vit_small_patch16_224',
    'dna_vit_base_patch16_224',
]
