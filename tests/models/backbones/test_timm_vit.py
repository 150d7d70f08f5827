"""timm's own model checks (``tests/test_models.py`` of pytorch-image-models), restated for the
DnA ViTs: ``dna_vit_*`` and a stock timm ViT built with ``attn_layer=DnAAttention``.

Each test names the timm check it stands for and asserts what that check asserts, at the input
size timm would use: the config's ``input_size``, reduced per side to the check's target size
unless the config says ``fixed_input_size`` (``dna_vit_*`` take any size, so they run at
128 / 96; the stock ViT's config is fixed). The default-config check is the one timm applies
to ``vit_*`` models (token output ``[B, N, C]``, no ``pool_size``). Plus
``torch.compile(fullgraph=True)`` and ``torch.export`` of the attention and of ViT-Ti, and the
attention's argument checks in a traced graph.

The models keep their width and heads but have :data:`DEPTH` blocks instead of 12 (the blocks
are identical; no check depends on the depth beyond its 3 feature levels), and the stock ViT is
built for 64² inputs, which keeps the module within seconds on 2 CPU cores.
"""

from __future__ import annotations

import math
import pickle
from typing import Any, Optional

import pytest
import timm
import torch
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.models import FeatureInfo, get_notrace_functions, get_notrace_modules
from tolerance import ROUNDING, assert_close_as
from torch import Tensor, nn
from torchvision.models.feature_extraction import (
    NodePathTracer,
    create_feature_extractor,
    get_graph_node_names,
)

import dna_mm  # noqa: F401  (registers dna_vit_*)
from dna_mm.errors import ConfigError
from dna_mm.models import DnAAttention
from dna_mm.models.attention.base import check_inputs

DEPTH = 4
#: id → (timm model name, create_model keywords)
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    'dna_vit_tiny': ('dna_vit_tiny_patch16_224', dict(depth=DEPTH)),
    'dna_vit_small': ('dna_vit_small_patch16_224', dict(depth=DEPTH)),
    'dna_vit_base': ('dna_vit_base_patch16_224', dict(depth=DEPTH)),
    # timm's own ViT-Ti (fixed input size) at 64², its config saying so
    'timm_vit_tiny+DnAAttention': (
        'vit_tiny_patch16_224',
        dict(
            depth=DEPTH,
            attn_layer=DnAAttention,
            img_size=64,
            pretrained_cfg_overlay=dict(input_size=(3, 64, 64)),
        ),
    ),
}
#: timm's target sizes per check (``TARGET_*_SIZE`` in its test module)
FWD_SIZE, BWD_SIZE, FEAT_SIZE, FX_SIZE, JIT_SIZE = 384, 128, 96, 128, 128
#: timm's FX tracer settings (its leaf modules and functions)
TRACER_KWARGS = dict(
    leaf_modules=get_notrace_modules(), autowrap_functions=get_notrace_functions(), param_shapes_constant=True
)

model_cases = pytest.mark.parametrize('case', ['dna_vit_tiny', 'timm_vit_tiny+DnAAttention'])


def create(case: str, **kwargs: Any) -> nn.Module:
    """``timm.create_model`` of a :data:`MODELS` entry, no weights."""
    name, base = MODELS[case]
    return timm.create_model(name, pretrained=False, **dict(base, **kwargs))


def input_size(model: nn.Module, target: Optional[int] = None) -> tuple[int, int, int]:
    """timm's test input size: the config's ``input_size``; unless ``fixed_input_size``, a side
    above ``target`` gives ``min_input_size`` (if set) or the side clipped to ``target``."""
    cfg = model.pretrained_cfg
    size = tuple(cfg['input_size'])
    if cfg.get('fixed_input_size') or not target or max(size) <= target:
        return size
    return tuple(cfg['min_input_size']) if cfg.get('min_input_size') else tuple(min(s, target) for s in size)


def fx_model(model: nn.Module, train: bool = False) -> nn.Module:
    """The model traced as timm's FX checks trace it: torchvision's feature extractor with timm's
    leaf modules / functions, returning the last node of the eval graph and, in training, the
    nodes that feed the train graph's output."""
    train_nodes, eval_nodes = get_graph_node_names(model, tracer_kwargs=TRACER_KWARGS)
    train_return = [train_nodes[-1]]
    if train:
        tracer = NodePathTracer(**TRACER_KWARGS)
        graph = tracer.trace(model)
        output = next(n for n in reversed(graph.nodes) if n.op == 'output')
        train_return = [tracer.node_to_qualname[n] for n in output.all_input_nodes]
    return create_feature_extractor(
        model,
        train_return_nodes=train_return,
        eval_return_nodes=[eval_nodes[-1]],
        tracer_kwargs=TRACER_KWARGS,
    )


def fx_output(outputs: dict[str, Tensor]) -> Tensor:
    return torch.cat(tuple(outputs.values()))


def assert_every_parameter_has_grad(model: nn.Module, num_params: int) -> None:
    for n, p in model.named_parameters():
        assert p.grad is not None, f'no gradient for {n}'
    assert sum(p.grad.numel() for p in model.parameters()) == num_params


def assert_feature_maps(
    maps: list[Tensor], info: FeatureInfo, size: tuple[int, int, int], batch: int
) -> None:
    """timm's feature check: one NCHW map per level, its channels, at most ``ceil(side / r) + 1``
    per side, finite."""
    channels, reductions = info.channels(), info.reduction()
    assert len(maps) == len(channels)
    for c, r, o in zip(channels, reductions, maps, strict=True):
        assert o.shape[0] == batch and o.shape[1] == c
        assert o.shape[2] <= math.ceil(size[1] / r) + 1 and o.shape[3] <= math.ceil(size[2] / r) + 1
        assert not torch.isnan(o).any()


# -- configs ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    'name', ['dna_vit_tiny_patch16_224', 'dna_vit_small_patch16_224', 'dna_vit_base_patch16_224']
)
def test_pretrained_cfg_is_registered_as_the_authors_recipe(name: str) -> None:
    """The config timm resolves for the name: the authors' (DeiT) ImageNet recipe."""
    cfg = timm.models.get_pretrained_cfg(name)
    assert cfg is not None
    assert cfg.input_size == (3, 224, 224) and cfg.num_classes == 1000
    assert (cfg.mean, cfg.std) == (IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD)
    assert (cfg.crop_pct, cfg.interpolation, cfg.crop_mode) == (0.875, 'bicubic', 'center')
    assert (cfg.first_conv, cfg.classifier) == ('patch_embed.proj', 'head')
    assert cfg.fixed_input_size is False


@pytest.mark.parametrize('case', list(MODELS))
def test_model_default_cfgs(case: str) -> None:
    """timm ``test_model_default_cfgs_non_std`` (the form it applies to ``vit_*``): feature and
    pooled widths, classifier reset, head-less model, classifier / first-conv names."""
    model = create(case).eval()
    assert model.num_classes >= 0 and model.num_features > 0 and model.head_hidden_size > 0
    state_dict, cfg = model.state_dict(), model.pretrained_cfg
    x = torch.randn(1, *input_size(model))
    with torch.no_grad():
        features = model.forward_features(x)
        pre_logits = model.forward_head(features, pre_logits=True)
        assert features.ndim == 3 and features.shape[-1] == model.num_features
        assert pre_logits.shape[1] == model.head_hidden_size
        model.reset_classifier(0)
        assert model.num_classes == 0
        pooled = model(x)
        assert pooled.shape[-1] == model.head_hidden_size and pooled.shape == pre_logits.shape
        headless = create(case, num_classes=0).eval()
        assert headless(x).shape[-1] == headless.num_features
    classifiers = cfg['classifier'] if isinstance(cfg['classifier'], (tuple, list)) else (cfg['classifier'],)
    assert all(f'{c}.weight' in state_dict for c in classifiers)
    first_convs = cfg['first_conv'] if isinstance(cfg['first_conv'], (tuple, list)) else (cfg['first_conv'],)
    assert all(f'{c}.weight' in state_dict for c in first_convs)


def test_input_size_is_what_the_config_says() -> None:
    """``fixed_input_size=False`` is true of ``dna_vit_*`` (any multiple of the patch size, not
    square either); ``dynamic_img_size=False`` builds the fixed model and says so."""
    model = create('dna_vit_tiny', depth=1).eval()
    with torch.no_grad():
        for hw in ((224, 224), (128, 128), (64, 96)):
            assert model(torch.randn(1, 3, *hw)).shape == (1, 1000)
        _, maps = model.forward_intermediates(torch.randn(1, 3, 64, 96), indices=1)
        assert maps[0].shape == (1, 192, 4, 6)
    fixed = create('dna_vit_tiny', depth=1, dynamic_img_size=False)
    assert fixed.pretrained_cfg['fixed_input_size'] is True
    with pytest.raises(AssertionError, match="doesn't match model"):
        fixed(torch.randn(1, 3, 128, 128))


# -- forward / backward -------------------------------------------------------------------------
@model_cases
def test_model_forward(case: str) -> None:
    """timm ``test_model_forward``: one eval forward; gradient checkpointing gives the same."""
    model = create(case).eval()
    x = torch.randn(1, *input_size(model, FWD_SIZE))
    with torch.no_grad():
        out = model(x)
        assert out.shape[0] == 1 and not torch.isnan(out).any()
        model.set_grad_checkpointing()
        assert_close_as(model(x), out, ulps=ROUNDING)


@model_cases
def test_model_backward(case: str) -> None:
    """timm ``test_model_backward``: 42 classes, train mode, every parameter gets a gradient."""
    model = create(case, num_classes=42).train()
    num_params = sum(p.numel() for p in model.parameters())
    size = input_size(model, BWD_SIZE)
    out = model(torch.randn(2, *size))
    out.mean().backward()
    assert_every_parameter_has_grad(model, num_params)
    assert out.shape == (2, 42) and not torch.isnan(out).any()
    if case == 'dna_vit_tiny':
        assert size == (3, BWD_SIZE, BWD_SIZE)  # the reduced size, as timm runs it


# -- features -----------------------------------------------------------------------------------
@model_cases
def test_model_forward_features(case: str) -> None:
    """timm ``test_model_forward_features``: ``features_only=True`` gives >= 3 NCHW levels with
    the channels and reductions its ``feature_info`` declares."""
    model = create(case, features_only=True).eval()
    assert len(model.feature_info.channels()) >= 3
    size = input_size(model, FEAT_SIZE)
    with torch.no_grad():
        maps = model(torch.randn(1, *size))
    assert_feature_maps(maps, model.feature_info, size, batch=1)
    assert model.feature_info.module_name() == [f'blocks.{i}' for i in range(DEPTH - 3, DEPTH)]


@model_cases
def test_model_forward_intermediates(case: str) -> None:
    """timm ``test_model_forward_intermediates``: NCHW intermediates of every block as
    ``feature_info`` declares them; the final output equals ``forward_features`` (also with
    gradient checkpointing)."""
    model = create(case).eval()
    info = FeatureInfo(model.feature_info, len(model.feature_info))
    assert len(info.channels()) >= 3
    size = input_size(model, FEAT_SIZE)
    x = torch.randn(1, *size)
    with torch.no_grad():
        out, maps = model.forward_intermediates(x, output_fmt='NCHW')
        assert_feature_maps(maps, info, size, batch=1)
        assert_close_as(out, model.forward_features(x), ulps=ROUNDING)
        model.set_grad_checkpointing()
        assert_close_as(model.forward_intermediates(x, output_fmt='NCHW')[0], out, ulps=ROUNDING)


# -- torch.fx -----------------------------------------------------------------------------------
@model_cases
def test_model_forward_fx(case: str) -> None:
    """timm ``test_model_forward_fx``: the traced model gives exactly the eager output."""
    model = create(case).eval()
    x = torch.randn(1, *input_size(model, FX_SIZE))
    with torch.inference_mode():
        out = model(x)
        fx_out = fx_output(fx_model(model)(x))
    assert torch.equal(fx_out, out)
    assert not torch.isnan(out).any()


@model_cases
def test_model_backward_fx(case: str) -> None:
    """timm ``test_model_backward_fx``: the model traced in train mode trains every parameter."""
    model = create(case, num_classes=42).train()
    num_params = sum(p.numel() for p in model.parameters())
    traced = fx_model(model, train=True)
    out = fx_output(traced(torch.randn(2, *input_size(model, FX_SIZE))))
    out.mean().backward()
    assert_every_parameter_has_grad(traced, num_params)
    assert out.shape == (2, 42) and not torch.isnan(out).any()


@model_cases
def test_model_forward_fx_torchscript(case: str) -> None:
    """timm ``test_model_forward_fx_torchscript``: the traced model scripts and runs."""
    with timm.layers.set_scriptable(True):
        model = create(case).eval()
    scripted = torch.jit.script(fx_model(model))
    x = torch.randn(1, *input_size(model, JIT_SIZE))
    with torch.inference_mode():
        out = fx_output(scripted(x))
        assert_close_as(out, model(x), ulps=ROUNDING)
    assert out.shape[0] == 1 and not torch.isnan(out).any()


def test_model_forward_torchscript() -> None:
    """timm ``test_model_forward_torchscript`` (``torch.jit.script`` of the eager model): not
    supported (README: timm; the FX graph scripts, :func:`test_model_forward_fx_torchscript`).
    Pinned to the first error the compiler meets, ``type(self).__name__`` in the attention's
    ``forward``, so that success or any other failure fails here. (Behind it: ``super().project``,
    the Triton import, the ``Union`` bias, the dropout module passed to ``eager``, and the
    tensor-or-``(tensor, maps)`` return that timm's ``Block`` cannot type.)"""
    with timm.layers.set_scriptable(True):
        model = create('dna_vit_tiny', depth=1).eval()
    first_error = (
        r"(?s)Expected a value of type 'Tensor' for argument '0' but instead found type "
        r"'__torch__\.dna_mm\.models\.[\w.]+\.\w*DnAAttention\w*.*"
        r'check_inputs\(type\(self\)\.__name__'
    )
    with pytest.raises(RuntimeError, match=first_error):
        torch.jit.script(model)


def test_traced_graph_keeps_the_argument_checks_and_run_time_masks() -> None:
    """The checks stay in the traced graph (FX leaves, not traced away), and the traced ViT
    applies a mask or ``is_causal`` given at run time exactly as the eager model does."""
    attn = DnAAttention(32, 4).eval()  # traced as cross-attention with separate values
    traced = torch.fx.symbolic_trace(attn, concrete_args=dict(return_attn=False, attn_bias=None))
    ctx, val = torch.randn(2, 8, 32), torch.randn(2, 8, 32)
    assert traced(torch.randn(2, 3, 32), context=ctx, value=val).shape == (2, 3, 32)
    with pytest.raises(ValueError, match=r'expected x of shape \[B, N, 32\], got \[2, 5, 16\]'):
        traced(torch.randn(2, 5, 16), context=ctx, value=val)
    with pytest.raises(ValueError, match='value has 7 tokens, keys have 8'):
        traced(torch.randn(2, 3, 32), context=ctx, value=val[:, :7])
    model = create('dna_vit_tiny', depth=2).eval()
    graph = fx_model(model)  # dead-code elimination keeps the checks (they have no output)
    assert sum(n.target is check_inputs for n in graph.graph.nodes) == 2
    x, mask = torch.randn(2, 3, 32, 32), torch.rand(2, 1, 5, 5) > 0.3
    mask[..., 0] = True  # every query keeps a key
    with torch.no_grad():
        for kwargs in (dict(attn_mask=mask), dict(is_causal=True)):
            out = model(x, **kwargs)
            assert not torch.allclose(out, model(x), atol=1e-4)
            assert_close_as(fx_output(graph(x, **kwargs)), out, ulps=ROUNDING)


def test_timm_attention_extract_gets_both_maps() -> None:
    """timm's ``AttentionExtract`` (FX nodes) on the eager path: node ``attn.softmax`` is the
    softmax map, ``attn.softmax_1`` the softmin map, as ``return_attn=True`` gives them."""
    model = create('dna_vit_tiny', depth=2, img_size=32).eval()
    for block in model.blocks:
        block.attn.fused_attn = False
    extract = timm.utils.AttentionExtract(model, names=['*attn.softmax', '*attn.softmax_1'])
    inputs: list[Tensor] = []
    model.blocks[1].attn.register_forward_pre_hook(lambda m, args: inputs.append(args[0]))
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        maps = extract(x)
        assert sorted(maps) == [f'blocks.{i}.attn.softmax{s}' for i in (0, 1) for s in ('', '_1')]
        model(x)
        _, ref = model.blocks[1].attn(inputs[-1], return_attn=True)
    assert_close_as(maps['blocks.1.attn.softmax'], ref['pos'], ulps=ROUNDING)
    assert_close_as(maps['blocks.1.attn.softmax_1'], ref['neg'], ulps=ROUNDING)


# -- torch.compile / torch.export ---------------------------------------------------------------
def _attention_inputs() -> tuple[Tensor, dict[str, Any]]:
    """Tokens plus a ``bool`` mask and a ``(b_pos, b_neg)`` bias: every branch of the forward."""
    x = torch.randn(2, 6, 32)
    mask = torch.rand(2, 1, 6, 6) > 0.3
    mask[..., 0] = True
    return x, dict(attn_mask=mask, attn_bias=(torch.randn(1, 4, 6, 6), torch.randn(1, 4, 6, 6)))


def _vit() -> nn.Module:
    return create('dna_vit_tiny', depth=2, img_size=32, num_classes=10).eval()


def test_attention_compiles_fullgraph() -> None:
    """``torch.compile(fullgraph=True)`` captures ``DnAAttention`` in one graph (no break)."""
    attn = DnAAttention(32, 4).eval()
    x, kwargs = _attention_inputs()
    compiled = torch.compile(attn, fullgraph=True, backend='aot_eager')
    with torch.no_grad():
        assert_close_as(compiled(x, **kwargs), attn(x, **kwargs), ulps=ROUNDING)


def test_vit_compiles_fullgraph() -> None:
    """``torch.compile(fullgraph=True)`` captures ``dna_vit_tiny_patch16_224`` in one graph."""
    model = _vit()
    x = torch.randn(2, 3, 32, 32)
    compiled = torch.compile(model, fullgraph=True, backend='aot_eager')
    with torch.no_grad():
        assert_close_as(compiled(x), model(x), ulps=ROUNDING)


def test_attention_exports() -> None:
    """``torch.export`` of ``DnAAttention`` with a mask and a bias pair runs like the module."""
    attn = DnAAttention(32, 4).eval()
    x, kwargs = _attention_inputs()
    exported = torch.export.export(attn, (x,), kwargs).module()
    with torch.no_grad():
        assert_close_as(exported(x, **kwargs), attn(x, **kwargs), ulps=ROUNDING)


def test_vit_exports() -> None:
    """``torch.export`` of ``dna_vit_tiny_patch16_224`` runs like the model."""
    model = _vit()
    x = torch.randn(2, 3, 32, 32)
    exported = torch.export.export(model, (x,)).module()
    with torch.no_grad():
        assert_close_as(exported(x), model(x), ulps=ROUNDING)


def test_a_variant_keeps_every_argument_timm_gave_the_attention() -> None:
    """A non-default variant is built by timm itself with the variant as the attention's
    default: proj bias, dropout, device and dtype are timm's."""
    qpm_v = dict(type='DnAAttention', variant='qpm_v')
    m = timm.create_model(
        'dna_vit_tiny_patch16_224', attn_cfg=qpm_v, alpha_init=0.3, proj_bias=False, attn_drop_rate=0.1
    )
    attn = m.blocks[0].attn
    assert attn.variant == 'qpm_v' and attn.proj.bias is None and attn.attn_drop_p == 0.1
    assert torch.equal(attn.alpha.detach().flatten(), torch.full((3,), 0.3))
    meta = timm.create_model('dna_vit_tiny_patch16_224', attn_cfg=qpm_v, device='meta')
    assert {p.device.type for p in meta.parameters()} == {'meta'}


def test_the_attention_is_attn_cfg_and_dna_variant_a_deprecated_alias() -> None:
    """``attn_cfg`` as every host takes it (DnA only here); ``dna_variant`` warns, naming
    ``attn_cfg``, and builds the same model."""
    torch.manual_seed(0)
    new = create('dna_vit_tiny', depth=2, attn_cfg=dict(type='DnAAttention', variant='Q±V'))
    named = r"dna_variant is deprecated .* use attn_cfg=dict\(type='DnAAttention', variant='Q±V'\)"
    with pytest.warns(FutureWarning, match=named):
        torch.manual_seed(0)
        old = create('dna_vit_tiny', depth=2, dna_variant='Q±V')
    assert new.dna_variant == old.dna_variant == 'qpm_v'
    new_sd, old_sd = new.state_dict(), old.state_dict()
    assert new_sd.keys() == old_sd.keys() and all(torch.equal(new_sd[k], old_sd[k]) for k in new_sd)
    with pytest.raises(ConfigError, match="attn_cfg must be 'dna' or dict"):
        timm.create_model('dna_vit_tiny_patch16_224', attn_cfg='softmax')
    with pytest.raises(ConfigError, match=r"got the keys \['gatd'\] \(did you mean 'gated'\?\)"):
        timm.create_model('dna_vit_tiny_patch16_224', attn_cfg=dict(type='DnAAttention', gatd=True))


def test_a_gated_dna_vit_gates_every_block_and_reads_an_ungated_file(tmp_path) -> None:
    """``attn_cfg=dict(type='DnAAttention', gated=True)`` (docs/attention.md: a gate on any member):
    every block's attention has its gate, of the variant asked for; a file of the same model
    without gates loads (timm's strict load), every tensor but the gates read from it."""
    cfg = dict(type='DnAAttention', variant='qpm_v', gated=True)
    gated = create('dna_vit_tiny', depth=1, img_size=32, attn_cfg=cfg).eval()
    assert all(b.attn.gated and b.attn.variant == 'qpm_v' and b.attn.gate is not None for b in gated.blocks)
    plain = create('dna_vit_tiny', depth=1, img_size=32, attn_cfg=dict(variant='qpm_v')).eval()
    assert not plain.blocks[0].attn.gated
    torch.save(plain.state_dict(), tmp_path / 'plain.pth')
    loaded = timm.create_model(
        'dna_vit_tiny_patch16_224',
        depth=1,
        img_size=32,
        num_classes=plain.num_classes,
        attn_cfg=cfg,
        pretrained=True,
        pretrained_cfg_overlay=dict(file=str(tmp_path / 'plain.pth')),
    ).eval()
    own = {k: v for k, v in loaded.state_dict().items() if '.gate.' not in k}
    assert all(torch.equal(v, plain.state_dict()[k]) for k, v in own.items())


@pytest.mark.parametrize('variant', ['qpm_vpm', 'qpm_v'])
def test_timm_initialisation_is_kept(variant: str) -> None:
    """The attentions are built once, by timm, before its weight init: ``fix_init`` divides each
    block's ``attn.proj`` by sqrt(2 (i + 1)) for every variant, and the rest of the init is
    the same draw (same seed, same weights)."""
    kw = dict(depth=3, attn_cfg=dict(type='DnAAttention', variant=variant))
    torch.manual_seed(0)
    plain = timm.create_model('dna_vit_tiny_patch16_224', **kw)
    torch.manual_seed(0)
    fixed = timm.create_model('dna_vit_tiny_patch16_224', fix_init=True, **kw)
    for i, (a, b) in enumerate(zip(plain.blocks, fixed.blocks, strict=True)):
        assert_close_as(b.attn.proj.weight, a.attn.proj.weight / math.sqrt(2.0 * (i + 1)), ulps=ROUNDING)
        assert torch.equal(b.attn.qkv.weight, a.attn.qkv.weight)  # the same draw
        assert torch.equal(b.attn.q_neg.weight, a.attn.q_neg.weight)
    assert all(blk.attn.variant == variant for blk in fixed.blocks)


def test_fused_attention_follows_timms_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """``dna_vit_*`` read timm's fused-attention switch when built, as timm's ``Attention`` does."""
    from timm.layers import config as timm_config

    for fused in (False, True):
        monkeypatch.setattr(timm_config, '_USE_FUSED_ATTN', int(fused))
        m = timm.create_model('dna_vit_tiny_patch16_224', depth=2, attn_cfg=dict(variant='q_vpm'))
        stock = timm.create_model('vit_tiny_patch16_224', depth=2)
        assert [b.attn.fused_attn for b in m.blocks] == [fused] * 2
        assert [b.attn.fused_attn for b in stock.blocks] == [fused] * 2


def test_one_attention_class_built_through_timms_own_attn_layer() -> None:
    """``dna_vit_*`` hand timm ``attn_layer='dna'``, the name they hold in timm's own lookup of
    attention layers (``ATTN_LAYERS``; the class itself with a timm without one): one class for
    every variant, the variant the model's, and a stock timm ViT takes the name too."""
    from dna_mm.models.backbones import timm_vit

    layers = getattr(timm.models.vision_transformer, 'ATTN_LAYERS', None)
    if layers is not None:
        assert layers['dna'] is timm_vit.TimmDnAAttention and timm_vit.TIMM_ATTN_LAYER == 'dna'
    variants = sorted(timm_vit.DNA_VARIANTS)
    models = [create('dna_vit_tiny', depth=1, attn_cfg=dict(variant=v)) for v in variants]
    assert {type(m.blocks[0].attn) for m in models} == {timm_vit.TimmDnAAttention}
    assert [m.blocks[0].attn.variant for m in models] == variants
    stock = timm.create_model('vit_tiny_patch16_224', depth=1, attn_layer=timm_vit.TIMM_ATTN_LAYER)
    assert type(stock.blocks[0].attn) is timm_vit.TimmDnAAttention
    assert stock.blocks[0].attn.variant == timm_vit.TimmDnAAttention(32, 4).variant == 'qpm_vpm'


def test_a_model_pickles_and_its_weights_load_weights_only(tmp_path) -> None:
    """A built ``dna_vit_*`` pickles (its attentions keep their variant), its state dict loads
    with ``torch.load(weights_only=True)`` into a new model strictly and gives its output; the
    class names of earlier releases (one class per variant) name the one class, for their
    pickles."""
    from dna_mm.models.backbones import timm_vit

    model = create('dna_vit_tiny', depth=2, img_size=32, attn_cfg=dict(variant='q_vpm')).eval()
    x = torch.randn(1, 3, 32, 32)
    again = pickle.loads(pickle.dumps(model))
    assert [b.attn.variant for b in again.blocks] == ['q_vpm', 'q_vpm']
    torch.save(model.state_dict(), tmp_path / 'weights.pth')
    fresh = create('dna_vit_tiny', depth=2, img_size=32, attn_cfg=dict(variant='q_vpm')).eval()
    fresh.load_state_dict(torch.load(tmp_path / 'weights.pth', weights_only=True), strict=True)
    with torch.no_grad():
        assert torch.equal(again(x), model(x)) and torch.equal(fresh(x), model(x))
    assert timm_vit.TimmDnAAttention_qpm_v is timm_vit.TimmDnAAttention
    with pytest.raises(AttributeError):
        timm_vit.TimmDnAAttention_other  # noqa: B018
