"""DnA into other models by config: ``with_attention`` over MMAction2 / MMDetection / timm
models, the host adapters' exactness, zoo-shaped checkpoints, ``mmaction::`` / ``mmdet::``
bases (in process and with the stock tools)."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import timm
import torch
from conftest import REPO, run_cmd, run_main, tiny_backbone
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import MODELS, init_default_scope
from tolerance import REORDERED, ROUNDING, assert_close_as

from dna_mm.checkpoint import weights_only_loads
from dna_mm.models import DnAAttention, SoftmaxAttention
from dna_mm.models.adapters import swap_attention

EXAMPLES = REPO / 'configs' / 'examples'
#: MMAction2 UniFormerV2 / MViTv2 backbones, small (the zoo's options otherwise)
TINY_UNIFORMERV2 = dict(
    type='UniFormerV2',
    input_resolution=32,
    patch_size=8,
    width=32,
    layers=2,
    heads=4,
    t_size=4,
    no_lmhra=False,
    double_lmhra=True,
    return_list=[0, 1],
    n_layers=2,
    n_dim=32,
    n_head=4,
    mlp_dropout=[0.5, 0.5],
    clip_pretrained=False,
)
TINY_MVIT = dict(
    type='MViT',
    arch=dict(embed_dims=16, num_layers=3, num_heads=1, downscale_indices=[1]),
    spatial_size=32,
    temporal_size=4,
    adaptive_kv_stride=(1, 4, 4),
)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


@contextlib.contextmanager
def _mmengine_log(caplog):
    """``print_log(logger='current')`` writes to MMLogger's current instance, which does not
    propagate to the root logger ``caplog`` listens on: attach ``caplog``'s handler to it."""
    logger = MMLogger.get_current_instance()
    logger.addHandler(caplog.handler)
    try:
        yield
    finally:
        logger.removeHandler(caplog.handler)


def _randomise(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial values where hosts initialise zeros (q/v biases, bias tables)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(('q_bias', 'v_bias', 'relative_position_bias_table', 'gamma1.weight')):
                p.normal_(std=0.5)
    model.eval()  # (Swin's train() returns None)
    return model


def _divided_timesformer():
    """MMAction2's divided space-time TimeSformer, its zero-initialised ``temporal_fc`` and
    embeddings drawn, so both steps reach the output."""
    model = _mmaction_timesformer('divided_space_time')
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'temporal_fc' in name or name in ('cls_token', 'pos_embed', 'time_embed'):
                p.normal_(std=0.2)
    return model


def _videomae():
    init_default_scope('mmaction')
    return _randomise(MODELS.build(tiny_backbone('VisionTransformer', num_heads=4, qkv_bias=True)))


def _swin():
    init_default_scope('mmaction')
    return _randomise(
        MODELS.build(
            dict(
                type='SwinTransformer3D',
                arch=dict(embed_dims=16, depths=[2, 2], num_heads=[2, 4]),
                patch_size=(2, 4, 4),
                window_size=(2, 4, 4),
                out_indices=(1,),
                pretrained=None,
                drop_path_rate=0.0,
            )
        )
    )


def _timm_vit():
    return timm.create_model('vit_tiny_patch16_224', img_size=32, patch_size=8, num_classes=3).eval()


class _DetrLayers(torch.nn.Module):
    """MMDetection's DETR encoder + decoder, called as ``DETR.forward_transformer`` does."""

    def __init__(self) -> None:
        super().__init__()
        from mmdet.models.layers import DetrTransformerDecoder, DetrTransformerEncoder

        attn = dict(embed_dims=32, num_heads=4, dropout=0.1, batch_first=True)
        ffn = dict(embed_dims=32, feedforward_channels=64, num_fcs=2, ffn_drop=0.1)
        self.encoder = DetrTransformerEncoder(num_layers=2, layer_cfg=dict(self_attn_cfg=attn, ffn_cfg=ffn))
        self.decoder = DetrTransformerDecoder(
            num_layers=2,
            layer_cfg=dict(self_attn_cfg=attn, cross_attn_cfg=attn, ffn_cfg=ffn),
            return_intermediate=False,
        )

    def forward(self, inputs):
        feat, pos, mask, query, query_pos = inputs
        memory = self.encoder(query=feat, query_pos=pos, key_padding_mask=mask)
        return self.decoder(
            query=query, key=memory, value=memory, query_pos=query_pos, key_pos=pos, key_padding_mask=mask
        )


def _detr():
    init_default_scope('mmdet')
    return _DetrLayers().eval()


def _detr_inputs():
    g = torch.Generator().manual_seed(0)
    mask = torch.zeros(2, 12, dtype=torch.bool)
    mask[1, -4:] = True  # a padded image
    return (
        torch.randn(2, 12, 32, generator=g),
        torch.randn(2, 12, 32, generator=g),
        mask,
        torch.randn(2, 5, 32, generator=g),
        torch.randn(2, 5, 32, generator=g),
    )


def _timm_eva(qkv_fused: bool = True):
    from timm.models.eva import Eva

    eva = Eva(
        img_size=32,
        patch_size=8,
        embed_dim=32,
        depth=2,
        num_heads=4,
        num_classes=0,  # pooled features [B, 32] (EVA's head starts at 1e-3 scale)
        use_rot_pos_emb=False,
        qkv_fused=qkv_fused,
    )
    with torch.no_grad():  # non-zero separate biases too
        for name, p in eva.named_parameters():
            if name.endswith(('q_proj.bias', 'v_proj.bias')):
                p.normal_(std=0.5)
    return _randomise(eva)


def _torchvision_vit():
    """torchvision's ``VisionTransformer`` (the class of ``vit_b_16``), small."""
    from torchvision.models import VisionTransformer

    vit = VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=32, mlp_dim=64, num_classes=3
    )
    with torch.no_grad():
        vit.heads.head.weight.normal_(std=0.2)  # zero-initialised: the output would be constant
    return vit.eval()


def _torch_transformer_encoder():
    """``nn.TransformerEncoder`` of ``nn.TransformerEncoderLayer`` (its eval-mode fast path
    reads the attention's packed weights)."""
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()


def _uniformerv2():
    """MMAction2's UniFormerV2, small: CLIP blocks (``nn.MultiheadAttention``) with local MHRA,
    and two global UniBlocks (``Extractor``) whose zero-initialised output layers are made
    non-zero (else they would start as the identity and the comparison would not see them)."""
    init_default_scope('mmaction')
    model = MODELS.build(TINY_UNIFORMERV2)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith(('transformer.dec.', 'transformer.temporal_cls_token', 'transformer.balance')):
                p.normal_(std=0.3)
    return model.eval()


def _mvit():
    """MMAction2's MViTv2, small: a stage change (pooled queries, ``in_dims != out_dims``), pooled
    keys / values, relative positions (made non-zero), residual pooling, a CLS token. In float64:
    its final norms (eps 1e-6) amplify fp32 round-off to ~2e-6."""
    init_default_scope('mmaction')
    model = _LastScale(MODELS.build(TINY_MVIT))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(('rel_pos_h', 'rel_pos_w', 'rel_pos_t')):
                p.normal_(std=0.5)
    return model.double().eval()


class _LastScale(torch.nn.Module):
    """MViT's last-scale patch tokens ``[B, C, T, H, W]`` (its output is a tuple of lists)."""

    def __init__(self, mvit: torch.nn.Module) -> None:
        super().__init__()
        self.mvit = mvit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        patch, cls = self.mvit(x)[-1]
        return torch.cat([patch.flatten(2), cls[..., None]], dim=2)


class _LastOutput(torch.nn.Module):
    """An MMPretrain / MMDetection backbone's last output (they return a tuple)."""

    def __init__(self, backbone: torch.nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)[-1]


_TINY_VIT_ARCH = dict(embed_dims=32, num_layers=2, num_heads=4, feedforward_channels=64)


def _mmpretrain(cfg: dict, library: str = 'mmpretrain'):
    """An MMPretrain (or MMDetection) backbone, built in its library's scope."""
    init_default_scope(library)
    return _LastOutput(_randomise(MODELS.build(cfg)))


HOSTS = {
    'timm ViT': (_timm_vit, lambda: torch.randn(2, 3, 32, 32)),
    'timm EVA': (_timm_eva, lambda: torch.randn(2, 3, 32, 32)),
    'timm EVA q/k/v_proj': (functools.partial(_timm_eva, qkv_fused=False), lambda: torch.randn(2, 3, 32, 32)),
    'MMAction2 TimeSformer (divided)': (_divided_timesformer, lambda: torch.randn(2, 3, 4, 32, 32)),
    'VideoMAE': (_videomae, lambda: torch.randn(2, 3, 4, 32, 32)),
    'Video Swin': (_swin, lambda: torch.randn(1, 3, 4, 32, 32)),
    'DETR layers': (_detr, _detr_inputs),
    'torchvision ViT': (_torchvision_vit, lambda: torch.randn(2, 3, 32, 32)),
    'nn.TransformerEncoder': (_torch_transformer_encoder, lambda: torch.randn(2, 7, 32)),
    'UniFormerV2': (_uniformerv2, lambda: torch.randn(2, 3, 4, 32, 32)),
    'MViTv2': (_mvit, lambda: torch.randn(2, 3, 4, 32, 32, dtype=torch.float64)),
    'MMPretrain ViT': (
        functools.partial(
            _mmpretrain,
            dict(
                type='VisionTransformer', arch=_TINY_VIT_ARCH, img_size=32, patch_size=8, drop_path_rate=0.1
            ),
        ),
        lambda: torch.randn(2, 3, 32, 32),
    ),
    'MMPretrain DeiT III': (
        functools.partial(_mmpretrain, dict(type='DeiT3', arch=_TINY_VIT_ARCH, img_size=32, patch_size=8)),
        lambda: torch.randn(2, 3, 32, 32),
    ),
    'MMPretrain BEiT': (
        functools.partial(
            _mmpretrain,
            dict(type='BEiTViT', arch=_TINY_VIT_ARCH, img_size=32, patch_size=8, layer_scale_init_value=0.1),
        ),
        lambda: torch.randn(2, 3, 32, 32),
    ),
    'MMPretrain BEiT shared bias': (
        functools.partial(
            _mmpretrain,
            dict(
                type='BEiTViT',
                arch=_TINY_VIT_ARCH,
                img_size=32,
                patch_size=8,
                use_rel_pos_bias=False,
                use_shared_rel_pos_bias=True,
            ),
        ),
        lambda: torch.randn(2, 3, 32, 32),
    ),
    'MMPretrain Swin': (
        functools.partial(
            _mmpretrain,
            dict(
                type='SwinTransformer',
                arch=dict(embed_dims=16, depths=[2, 2], num_heads=[2, 4]),
                img_size=32,
                window_size=2,
                patch_size=4,
                out_indices=(1,),
            ),
        ),
        lambda: torch.randn(2, 3, 32, 32),
    ),
    'MMDetection Swin': (
        functools.partial(
            _mmpretrain,
            dict(
                type='SwinTransformer',
                embed_dims=16,
                depths=[2, 2],
                num_heads=[2, 4],
                window_size=2,
                patch_size=4,
                strides=(4, 2),
                out_indices=(1,),
            ),
            'mmdet',
        ),
        lambda: torch.randn(2, 3, 32, 32),
    ),
}


def _run(model, x):
    with torch.no_grad():
        return model(x)


@pytest.mark.parametrize('host', list(HOSTS))
def test_softmax_inside_equals_the_host_and_dna_stays_close(host: str) -> None:
    build, make_input = HOSTS[host]
    torch.manual_seed(0)
    original = build()
    x = make_input()
    ref = _run(original, x)
    soft = copy.deepcopy(original)
    names = swap_attention(soft, 'softmax')
    assert names and all(
        isinstance(m, SoftmaxAttention)
        for m in soft.modules()
        if type(m).__name__.endswith('Attention') and hasattr(m, 'qkv')
    )
    soft.eval()
    assert_close_as(_run(soft, x), ref, ulps=REORDERED, what=host)
    dna = copy.deepcopy(original)
    swap_attention(dna, 'dna')
    assert sum(isinstance(m, DnAAttention) for m in dna.modules()) == len(names)
    dna.eval()
    assert _rel(_run(dna, x), ref) < 1e-3


@pytest.mark.parametrize('host', list(HOSTS))
def test_host_checkpoint_loads_strictly_into_the_swapped_model(host: str, caplog) -> None:
    """The host's own ``state_dict()`` (a zoo checkpoint's layout: ``in_proj_*``, ``q_bias`` /
    ``v_bias``, ``q/k/v_proj``, ``qkv`` beside the bias table) loads strictly; the negative
    branch is generated from it, one log line reports it, and the result equals swapping the
    loaded host."""
    build, make_input = HOSTS[host]
    torch.manual_seed(0)
    original = build()
    zoo = copy.deepcopy(original.state_dict())
    torch.manual_seed(1)
    fresh = build()  # other weights
    names = swap_attention(fresh, 'dna')
    soft = build()
    swap_attention(soft, 'softmax')
    generated = len(set(fresh.state_dict()) - set(soft.state_dict()))  # the negative branch, α
    assert generated >= 4 * len(names)
    converted = 0 if host in ('timm ViT', 'MViTv2') else len(names)  # the hosts' keys are the family's
    with _mmengine_log(caplog):
        fresh.load_state_dict(zoo, strict=True)
    line = (
        f'with_attention (dna): {converted} attention(s) read from the host layout; '
        f'generated {generated} tensors: '
    )
    assert caplog.text.count('with_attention (') == 1 and line in caplog.text, caplog.text
    x = make_input()
    expected = copy.deepcopy(original)
    swap_attention(expected, 'dna')
    fresh.eval()
    expected.eval()
    assert_close_as(_run(fresh, x), _run(expected, x), ulps=ROUNDING, what=host)
    # and the swapped model's own checkpoint round-trips
    again = build()
    swap_attention(again, 'dna')
    with _mmengine_log(caplog):
        again.load_state_dict(fresh.state_dict(), strict=True)
    assert caplog.text.count('with_attention (') == 1  # nothing to read or generate: no line
    again.eval()
    assert_close_as(_run(again, x), _run(fresh, x), ulps=ROUNDING, what=host)


def test_swin_mask_and_table_reach_both_branches() -> None:
    """Shifted-window blocks: a key of another window leaves both DnA branches (mask as an
    exclusion mask), the table shifts both branches' logits (bias inside the formula)."""
    model = _swin()
    swap_attention(model, 'dna')
    adapter = model.layers[0].blocks[1].attn
    x = torch.randn(4, 32, 16)
    mask = torch.zeros(2, 32, 32).masked_fill_(torch.rand(2, 32, 32) < 0.3, -100.0)
    mask.diagonal(dim1=1, dim2=2).zero_()
    captured = {}
    attend = adapter.attn.attend

    def spy(heads, attn_mask, attn_bias, eager):
        out, maps = attend(heads, attn_mask, attn_bias, True)
        captured.update(maps)
        return out, maps

    adapter.attn.attend = spy
    adapter.attn.fused_attn = False
    adapter(x, mask)
    excluded = (mask.repeat(2, 1, 1) < 0)[:, None].expand_as(captured['neg'])
    for branch in ('pos', 'neg'):
        assert captured[branch][excluded].max() < 1e-30
    # the table is a bias inside both branches' logits: changing it changes both maps
    before = {k: v.detach().clone() for k, v in captured.items()}
    with torch.no_grad():
        adapter.relative_position_bias_table.add_(torch.randn_like(adapter.relative_position_bias_table))
    adapter(x, mask)
    for branch in ('pos', 'neg'):
        assert (captured[branch] - before[branch]).abs().max() > 1e-2, branch
    # and the table is trained through the negative branch alone
    table = adapter.relative_position_bias_table
    for branch in ('pos', 'neg'):
        table.grad = None
        adapter(x, mask)
        (captured[branch] * torch.randn_like(captured[branch])).sum().backward()
        assert table.grad is not None and table.grad.abs().max() > 1e-4, branch


def test_unsupported_attention_is_named() -> None:
    with pytest.raises(ValueError, match='no attention to swap'):
        swap_attention(torch.nn.Linear(3, 3), 'dna')
    with pytest.raises(ValueError, match='qk_norm'):
        swap_attention(
            timm.create_model('vit_tiny_patch16_224', img_size=32, patch_size=8, qk_norm=True), 'dna'
        )


@pytest.mark.parametrize('cls_name', ['WindowMSAV2', 'ChannelMultiheadAttention'])
def test_an_unsupported_attention_is_named_beside_a_supported_one(cls_name: str) -> None:
    """MMPretrain's Swin V2 window attention (cosine logits; "MSA" in its name) and its channel
    attention beside a supported DETR attention: an error naming the class and its path, and
    nothing is swapped."""
    from mmpretrain.models.utils.attention import ChannelMultiheadAttention, WindowMSAV2

    msa = (
        WindowMSAV2(embed_dims=16, num_heads=2, window_size=(2, 2))
        if cls_name == 'WindowMSAV2'
        else ChannelMultiheadAttention(embed_dims=16, num_heads=2)
    )
    mixed = torch.nn.ModuleDict(dict(swin=torch.nn.Sequential(msa), detr=_DetrLayers()))
    before = [type(m) for m in mixed.modules()]
    with pytest.raises(
        ValueError, match=rf'unsupported attention module\(s\): swin\.0 \(mmpretrain\.\S+\.{cls_name}\)'
    ):
        swap_attention(mixed, 'dna')
    assert [type(m) for m in mixed.modules()] == before


def _eva_refusal(kind: str) -> torch.nn.Module:
    from timm.models.eva import Eva, EvaAttention

    small = dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=4)
    if kind == 'attn_head_dim':
        return torch.nn.Sequential(EvaAttention(32, num_heads=4, attn_head_dim=16, scale_norm=False))
    return Eva(**small, **{kind: True})


@pytest.mark.parametrize(
    'kind,match',
    [
        (
            'use_rot_pos_emb',
            r'rotary position embeddings .*rope \(RotaryEmbeddingCat\).*use_rot_pos_emb=False',
        ),
        ('qk_norm', r'EvaAttention: qk_norm is not supported'),
        ('scale_attn_inner', r'EvaAttention: scale_norm'),
        ('attn_head_dim', r'EvaAttention: attn_head_dim different'),
    ],
)
def test_eva_what_the_family_lacks_is_refused(kind: str, match: str) -> None:
    """Refused by name, and a supported attention before the refused one is left as it was."""
    from timm.layers import Attention

    model = torch.nn.ModuleDict(dict(first=Attention(32, num_heads=4), eva=_eva_refusal(kind)))
    with pytest.raises(ValueError, match=match):
        swap_attention(model, 'dna')
    assert type(model['first']) is Attention


def test_eva_rope_at_call_time_is_refused_and_masks_are_exact() -> None:
    """A ``rope`` tensor reaching a swapped ``EvaAttention`` is refused; EVA's ``attn_mask``
    (``bool``, True = attend) and ``is_causal`` reach the family attention as in timm."""
    eva = _timm_eva()
    soft = copy.deepcopy(eva)
    swap_attention(soft, 'softmax')
    with pytest.raises(ValueError, match='rotary position embeddings'):
        soft.blocks[0].attn(torch.randn(1, 5, 32), rope=torch.randn(4, 16))
    x = torch.randn(2, 3, 32, 32)
    keep = torch.rand(2, 1, 17, 17) < 0.7  # [B, 1, N, N], N = 16 patches + cls
    keep |= torch.eye(17, dtype=torch.bool)
    for kwargs in (dict(attn_mask=keep), dict(is_causal=True)):
        with torch.no_grad():
            ref = eva.forward_features(x, **kwargs)  # [B, N, C]
            assert _max_diff(ref, eva.forward_features(x)) > 1e-3  # the mask matters
            assert_close_as(soft.forward_features(x, **kwargs), ref, ulps=REORDERED, what=str(kwargs))


def test_with_attention_builds_without_a_wrapper_prefix() -> None:
    init_default_scope('mmaction')
    backbone = dict(
        type='VisionTransformer', img_size=32, patch_size=8, embed_dims=32, depth=2, num_heads=4, num_frames=4
    )
    plain = MODELS.build(backbone)
    swapped = MODELS.build(dict(type='with_attention', model=backbone, attn_cfg='dna'))
    assert type(swapped) is type(plain)
    outside = {k for k in plain.state_dict() if '.attn.' not in k}
    assert outside <= set(swapped.state_dict())
    with pytest.raises(TypeError, match='put the model'):
        MODELS.build(dict(type='with_attention', model=backbone, depth=3))


# -- mmaction:: / mmdet:: bases ---------------------------------------------------------------
def test_mmengine_patch_reads_list_valued_configs(tmp_path) -> None:
    """A package whose metafile has a list-valued ``Config`` (as mmaction2 1.1.0's BSN entry):
    mmengine's own reader fails on it, the wrapped one resolves its configs; the file is
    left as it is."""
    pkg = tmp_path / 'fakemm'
    (pkg / '.mim' / 'configs' / 'bsn').mkdir(parents=True)
    (pkg / '.mim' / 'model-index.yml').write_text('Import:\n  - configs/bsn/metafile.yml\n')
    meta = pkg / '.mim' / 'configs' / 'bsn' / 'metafile.yml'
    meta.write_text(
        'Models:\n  - Name: bsn\n    Config:\n      - configs/bsn/tem.py\n      - configs/bsn/pem.py\n'
        '  - Name: other\n    Config: configs/bsn/other.py\n'
    )
    before = meta.read_text()
    from mmengine.config import utils

    with pytest.raises(AttributeError, match='partition'):
        utils._get_cfg_metainfo.__wrapped__(str(pkg), 'bsn/pem.py')
    assert utils._get_cfg_metainfo(str(pkg), 'bsn/pem.py')['Name'] == 'bsn'
    assert utils._get_cfg_metainfo(str(pkg), 'bsn/other.py')['Name'] == 'other'
    assert meta.read_text() == before


@pytest.mark.integration
def test_stock_parse_of_zoo_bases_needs_dna_mm_first(tmp_path) -> None:
    """What a stock tool does first: parse the config. Without dna_mm mmengine fails on
    mmaction2 1.1.0's metafile; through ``python -m dna_mm.launch`` the same script parses the
    examples (and with ``DNA_MM_NO_MMENGINE_PATCH=1`` mmengine is left alone)."""
    script = tmp_path / 'stock_parse.py'
    script.write_text(
        'import sys; from mmengine.config import Config\n'
        'for f in sys.argv[1:]: print(Config.fromfile(f, import_custom_modules=False).model.get("type"))\n'
    )
    files = [
        str(EXAMPLES / n)
        for n in ('videomae_vit-b_dna_k400.py', 'swin-t_dna_k400.py', 'detr_r50_dna_coco.py')
    ]
    plain = subprocess.run([sys.executable, str(script), files[0]], capture_output=True, text=True)
    assert plain.returncode != 0 and "'list' object has no attribute 'partition'" in plain.stderr
    out = run_cmd([sys.executable, '-m', 'dna_mm.launch', str(script), *files]).stdout.split()
    assert out == ['Recognizer3D', 'Recognizer3D', 'with_attention']
    off = subprocess.run(
        [sys.executable, '-m', 'dna_mm.launch', str(script), files[0]],
        capture_output=True,
        text=True,
        env={**os.environ, 'DNA_MM_NO_MMENGINE_PATCH': '1'},
    )
    assert off.returncode != 0 and 'partition' in off.stderr


@pytest.mark.parametrize(
    'name,scope,kind',
    [
        ('videomae_vit-b_dna_k400.py', 'mmaction', 'Recognizer3D'),
        ('swin-t_dna_k400.py', 'mmaction', 'Recognizer3D'),
        ('detr_r50_dna_coco.py', 'mmdet', 'DETR'),
        ('mmpretrain_vit-b16_dna_in1k.py', 'mmpretrain', 'ImageClassifier'),
    ],
)
def test_examples_build_offline_with_dna(name: str, scope: str, kind: str) -> None:
    cfg = Config.fromfile(str(EXAMPLES / name))
    init_default_scope(scope)
    model = MODELS.build(cfg.model)  # no weights are fetched at build
    assert type(model).__name__ == kind
    n = sum(isinstance(m, DnAAttention) for m in model.modules())
    assert n == {'mmaction': 12, 'mmdet': 18, 'mmpretrain': 12}[scope]


# -- one real train step per example (tiny) --------------------------------------------------
TINY_RUN = """
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=1, val_interval=1)
param_scheduler = []
val_cfg = val_dataloader = val_evaluator = None
test_cfg = test_dataloader = test_evaluator = None
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.01))
auto_scale_lr = dict(enable=False)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1))
"""


def _video_config(tmp_path, example: str, root, backbone: str, in_channels: int) -> str:
    """A tiny version of an example config: a file inheriting it (as a user would)."""
    text = (
        f"""_base_ = ['{EXAMPLES / example}']
model = dict(backbone=dict(model=dict({backbone})),
             cls_head=dict(in_channels={in_channels}, num_classes=4))
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=True), dataset=dict(type='VideoDataset',
    ann_file='{root}/train.txt', data_prefix=dict(video='{root}/videos'), pipeline=[
        dict(type='DecordInit'), dict(type='SampleFrames', clip_len=4, frame_interval=1, num_clips=1),
        dict(type='DecordDecode'), dict(type='Resize', scale=(32, 32), keep_ratio=False),
        dict(type='FormatShape', input_format='NCTHW'), dict(type='PackActionInputs')]))
"""
        + TINY_RUN
    )
    path = tmp_path / f'tiny_{example}'
    path.write_text(text)
    return str(path)


def _losses(work_dir) -> list[float]:
    logs = list(work_dir.rglob('*.json'))
    vals = [json.loads(line) for p in logs for line in p.read_text().splitlines() if line.strip()]
    return [v['loss'] for v in vals if 'loss' in v]


def _stock_tool(package: str):
    """The ``tools/train.py`` an MMAction2 / MMDetection wheel ships."""
    from pathlib import Path

    return str(Path(__import__(package).__file__).parent / '.mim' / 'tools' / 'train.py')


@pytest.mark.parametrize('tool', ['ours', pytest.param('stock', marks=pytest.mark.integration)])
def test_videomae_example_trains_a_step(tiny_video_set, tmp_path, tool: str) -> None:
    cfg = _video_config(
        tmp_path,
        'videomae_vit-b_dna_k400.py',
        tiny_video_set,
        'img_size=32, patch_size=8, embed_dims=32, depth=2, num_heads=4, num_frames=4',
        32,
    )
    if tool == 'ours':
        run_main(['tools/train.py', cfg, '--work-dir', str(tmp_path / 'work')])
    else:  # the stock script parses the zoo base before importing dna_mm: through dna_mm.launch
        launch = [sys.executable, '-m', 'dna_mm.launch', _stock_tool('mmaction')]
        run_cmd([*launch, cfg, '--work-dir', str(tmp_path / 'work')])
    losses = _losses(tmp_path / 'work')
    assert losses and all(np.isfinite(losses))
    with weights_only_loads():
        ckpt = torch.load(next((tmp_path / 'work').glob('epoch_1.pth')), map_location='cpu')
    assert any(k.endswith('blocks.1.attn.q_neg.weight') for k in ckpt['state_dict'])


def test_swin_example_trains_a_step(tiny_video_set, tmp_path) -> None:
    cfg = _video_config(
        tmp_path,
        'swin-t_dna_k400.py',
        tiny_video_set,
        "arch=dict(_delete_=True, embed_dims=16, depths=[2, 2], num_heads=[2, 4]), "
        "window_size=(2, 4, 4), out_indices=(1,), pretrained=None, pretrained2d=False",
        32,
    )
    run_main(['tools/train.py', cfg, '--work-dir', str(tmp_path / 'work')])
    losses = _losses(tmp_path / 'work')
    assert losses and all(np.isfinite(losses))


def _tiny_coco(root) -> None:
    """Two real JPEG images with one box each, in COCO format."""
    from PIL import Image

    (root / 'images').mkdir(parents=True)
    images, anns = [], []
    for i in range(2):
        Image.fromarray((np.random.RandomState(i).rand(64, 64, 3) * 255).astype(np.uint8)).save(
            root / 'images' / f'{i}.jpg'
        )
        images.append(dict(id=i, file_name=f'{i}.jpg', height=64, width=64))
        anns.append(dict(id=i, image_id=i, category_id=1, bbox=[8, 8, 24, 30], area=720, iscrowd=0))
    (root / 'ann.json').write_text(
        json.dumps(dict(images=images, annotations=anns, categories=[dict(id=1, name='thing')]))
    )


@pytest.mark.integration
def test_detr_example_trains_a_step_with_the_stock_mmdet_tool(tmp_path) -> None:
    _tiny_coco(tmp_path / 'coco')
    attn = 'dict(embed_dims=32, num_heads=4)'
    text = (
        f"""_base_ = ['{EXAMPLES / 'detr_r50_dna_coco.py'}']
model = dict(model=dict(
    num_queries=5,
    backbone=dict(depth=18, init_cfg=None, frozen_stages=-1),
    neck=dict(in_channels=[512], out_channels=32),
    encoder=dict(num_layers=1, layer_cfg=dict(self_attn_cfg={attn},
                                              ffn_cfg=dict(embed_dims=32, feedforward_channels=64))),
    decoder=dict(num_layers=1, layer_cfg=dict(self_attn_cfg={attn}, cross_attn_cfg={attn},
                                              ffn_cfg=dict(embed_dims=32, feedforward_channels=64))),
    positional_encoding=dict(num_feats=16),
    bbox_head=dict(num_classes=1, embed_dims=32)))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{tmp_path}/coco/', ann_file='ann.json', data_prefix=dict(img='images/'),
    metainfo=dict(classes=('thing',)), pipeline=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
        dict(type='Resize', scale=(64, 64), keep_ratio=True), dict(type='PackDetInputs')]))
"""
        + TINY_RUN
    )
    cfg = tmp_path / 'tiny_detr.py'
    cfg.write_text(text)
    run_cmd([sys.executable, _stock_tool('mmdet'), str(cfg), '--work-dir', str(tmp_path / 'work')])
    losses = _losses(tmp_path / 'work')
    assert losses and all(np.isfinite(losses))


@pytest.mark.parametrize(
    'base,scope',
    [
        (
            'mmaction::recognition/timesformer/timesformer_divST_8xb8-8x32x1-15e_kinetics400-rgb.py',
            'mmaction',
        ),
        ('mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py', 'mmdet'),
    ],
)
def test_the_zoo_bases_named_in_the_docs_parse_and_build(base: str, scope: str, tmp_path) -> None:
    """A config inheriting the zoo file by ``mmaction::`` / ``mmdet::`` parses (the metafile
    fix) and its model builds offline (pretrained weights are read at init, not at build)."""
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = ['{base}']\n")
    cfg = Config.fromfile(str(child))
    init_default_scope(scope)
    model = MODELS.build(cfg.model)
    assert type(model).__name__ == {'mmaction': 'Recognizer3D', 'mmdet': 'MaskRCNN'}[scope]


def _mmaction_timesformer(attention_type: str):
    init_default_scope('mmaction')
    return MODELS.build(
        dict(
            type='TimeSformer',
            num_frames=4,
            img_size=32,
            patch_size=8,
            embed_dims=32,
            num_heads=4,
            num_transformer_layers=2,
            attention_type=attention_type,
            pretrained=None,
        )
    ).eval()


@pytest.mark.parametrize('attention_type', ['joint_space_time', 'space_only'])
def test_mmaction_joint_and_space_only_timesformer_swap_exactly(attention_type: str) -> None:
    """MMAction2's own TimeSformer in its mmcv-MHA forms: softmax inside equals it (float64:
    exact up to round-off; fp32 round-off alone reaches ~2e-6 at joint 65 tokens), DnA close."""
    torch.manual_seed(0)
    original = _mmaction_timesformer(attention_type).double()
    x = torch.randn(2, 3, 4, 32, 32, dtype=torch.float64)
    ref = _run(original, x)
    soft = copy.deepcopy(original)
    names = swap_attention(soft, 'softmax')
    assert len(names) == 2
    assert_close_as(_run(soft.eval(), x), ref, ulps=REORDERED)
    dna = copy.deepcopy(original)
    swap_attention(dna, 'dna')
    assert _rel(_run(dna.eval(), x), ref) < 1e-3


def test_the_joint_timesformer_example_builds_with_dna() -> None:
    cfg = Config.fromfile(str(EXAMPLES / 'mmaction_timesformer_jointST_dna_k400.py'))
    init_default_scope('mmaction')
    model = MODELS.build(cfg.model)
    assert type(model.backbone).__name__ == 'TimeSformer'
    assert sum(isinstance(m, DnAAttention) for m in model.modules()) == 12


def test_the_joint_timesformer_example_with_softmax_inside_is_mmactions_own() -> None:
    """The example's backbone, shrunk, with ``attn_cfg='softmax'``: MMAction2's own joint
    TimeSformer's state dict (mmcv ``MultiheadAttention`` keys) loads strictly and it computes
    the same (float64: fp32 round-off alone reaches ~2e-6 at 17 × 4 + 1 tokens, see above)."""
    cfg = Config.fromfile(str(EXAMPLES / 'mmaction_timesformer_jointST_dna_k400.py'))
    backbone = cfg.model.backbone
    host = backbone.model
    dims, heads, layers = 32, 4, 2
    host.update(num_frames=4, img_size=32, patch_size=8, embed_dims=dims, num_heads=heads)
    host.update(num_transformer_layers=layers)
    host.transformer_layers.num_layers = layers
    block = host.transformer_layers.transformerlayers
    block.attn_cfgs[0].update(embed_dims=dims, num_heads=heads)
    block.ffn_cfgs.update(embed_dims=dims, feedforward_channels=4 * dims)
    backbone.attn_cfg = 'softmax'
    init_default_scope('mmaction')
    example = MODELS.build(backbone).double().eval()
    torch.manual_seed(0)
    stock = _mmaction_timesformer('joint_space_time').double()
    with torch.no_grad():
        for p in (stock.cls_token, stock.pos_embed, stock.time_embed):
            p.normal_(std=0.5)
    example.load_state_dict(stock.state_dict(), strict=True)
    x = torch.randn(2, 3, 4, 32, 32, dtype=torch.float64)
    assert_close_as(_run(example, x), _run(stock, x), ulps=REORDERED)
