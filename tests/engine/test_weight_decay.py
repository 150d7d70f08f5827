"""What the shipped schedules decay: an attention member's gains (DnA's per-head ``alpha``,
differential attention's ``lambda_*`` vectors) are not decayed in any of them, the projections
are; the video recipe decays TimeSformer's embeddings, as the authors' code does; and every key
a schedule names reaches a parameter. The models are the shipped configs' own, tiny, built
through the registries; the optimizer is built from the config's ``optim_wrapper`` as the
runner builds it."""

from __future__ import annotations

from pathlib import Path

import mmaction
import pytest
from conftest import REPO, TINY_MASK_RCNN
from mmengine.optim import build_optim_wrapper

from dna_mm.config.model import model_from_config

TINY_VIDEO = {
    'model.backbone.embed_dims': 32,
    'model.backbone.num_heads': 2,
    'model.backbone.num_transformer_layers': 1,
    'model.backbone.pretrained': None,
    'model.cls_head.in_channels': 32,
}

#: the tiny Mask R-CNN's 2 blocks in the layer decay (which refuses another depth)
TINY_LSJ = {**TINY_MASK_RCNN, 'optim_wrapper.paramwise_cfg.num_layers': 2}


def decays(config: str, options: dict) -> dict[str, float]:
    """parameter name → its weight decay, from ``config``'s optimizer on its (tiny) model."""
    cfg, model = model_from_config(str(REPO / 'configs' / config), options, clear_pretrained=True)
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    names = {id(p): n for n, p in model.named_parameters()}
    base = wrapper.optimizer.defaults['weight_decay']
    return {
        names[id(p)]: g.get('weight_decay', base) for g in wrapper.optimizer.param_groups for p in g['params']
    }


@pytest.mark.parametrize(
    'config, options, gains, decayed',
    [
        ('vitdet_diff_coco.py', TINY_MASK_RCNN, ('attn.lambda_q1', 'attn.lambda_k2'), 'attn.qkv.weight'),
        ('vitdet_dna_coco.py', TINY_MASK_RCNN, ('attn.alpha',), 'attn.q_neg.weight'),
        (  # the layer-decay constructor
            'vitdet_dna_coco_lsj.py',
            {**TINY_LSJ, 'model.backbone.attn_cfg': 'diff', 'model.backbone.use_rel_pos': False},
            ('attn.lambda_q1', 'attn.lambda_k2'),
            'attn.qkv.weight',
        ),
        ('vitdet_dna_coco_lsj.py', TINY_LSJ, ('attn.alpha',), 'attn.v_neg.weight'),
        ('timesformer_diff_ntu60.py', TINY_VIDEO, ('attn.lambda_q1', 'attn.lambda_k2'), 'attn.qkv.weight'),
        ('timesformer_dna_ntu60.py', TINY_VIDEO, ('attn.alpha',), 'attn.q_neg.weight'),
    ],
    ids=[
        'COCO Diff',
        'COCO DnA',
        'COCO LSJ (layer decay) Diff',
        'COCO LSJ (layer decay) DnA',
        'NTU Diff',
        'NTU DnA',
    ],
)
def test_a_members_gains_are_not_decayed_its_projections_are(config, options, gains, decayed) -> None:
    wd = decays(config, options)
    for gain in gains:
        found = {n: d for n, d in wd.items() if n.endswith(gain)}
        assert found and set(found.values()) == {0.0}, (gain, found)
    projections = {n: d for n, d in wd.items() if n.endswith(decayed)}
    assert projections and all(d > 0 for d in projections.values()), projections


def matched_name(name: str) -> str:
    """What mmengine's ``DefaultOptimWrapperConstructor`` looks for a ``custom_keys`` key in: the
    owning module's dotted name, a dot and the parameter's own name (``'.x'`` at the top)."""
    return name if '.' in name else f'.{name}'


@pytest.mark.parametrize(
    'configs, options',
    [
        (('timesformer_dna_ntu60.py', 'timesformer_diff_ntu60.py'), TINY_VIDEO),
        (('vitdet_dna_coco.py', 'vitdet_diff_coco.py'), TINY_MASK_RCNN),
        (('imagenet/dna_vit-t16_in1k.py', 'imagenet/vit-b16_diff_in1k.py'), {}),
    ],
    ids=['video (sgd_15e)', 'COCO (vitdet_adamw_184k)', 'ImageNet (adamw_cosine_300e)'],
)
def test_every_key_a_schedule_names_reaches_a_parameter(configs, options) -> None:
    """mmengine ignores a key that matches no parameter name: a key written for a name the model
    does not have would look like a rule of the recipe and change nothing. Each key of each
    schedule reaches a parameter of DnA's model or of differential attention's (whose
    ``lambda_`` keys DnA's model lacks)."""
    names, keys = set(), set()
    for config in configs:
        cfg, model = model_from_config(str(REPO / 'configs' / config), options, clear_pretrained=True)
        names |= {matched_name(n) for n, _ in model.named_parameters()}
        keys |= set(cfg.optim_wrapper.paramwise_cfg.get('custom_keys', {}))
    assert keys
    unmatched = sorted(k for k in keys if not any(k in n for n in names))
    assert not unmatched, unmatched


EMBEDDINGS = ('backbone.cls_token', 'backbone.pos_embed', 'backbone.time_embed')


def test_the_video_recipe_decays_timesformers_embeddings_as_the_authors_code() -> None:
    """One weight decay for every parameter but the members' gains: the authors' TimeSformer
    optimizer decays every parameter whose name has no ``bn``, the embeddings included."""
    wd = decays('timesformer_dna_ntu60.py', TINY_VIDEO)
    assert {n: wd[n] for n in EMBEDDINGS} == dict.fromkeys(EMBEDDINGS, 1e-4)
    assert {d for n, d in wd.items() if not n.endswith('.alpha')} == {1e-4}


def test_mmaction2s_own_embedding_keys_exempt_nothing() -> None:
    """Why the recipe does not carry MMAction2's ``'.backbone.cls_token'`` keys: built by
    mmengine's constructor on MMAction2's own TimeSformer config, they leave the embeddings
    decayed (the key looks for ``.backbone.cls_token`` in ``backbone.cls_token``)."""
    stock = Path(mmaction.__file__).parent / '.mim/configs/recognition/timesformer'
    config = stock / 'timesformer_spaceOnly_8xb8-8x32x1-15e_kinetics400-rgb.py'
    options = {**TINY_VIDEO, 'model.backbone.attention_type': 'space_only'}
    cfg, model = model_from_config(str(config), options, clear_pretrained=True)
    assert set(cfg.optim_wrapper.paramwise_cfg.custom_keys) == {f'.{n}' for n in EMBEDDINGS}
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    decay = {id(p): g['weight_decay'] for g in wrapper.optimizer.param_groups for p in g['params']}
    params = dict(model.named_parameters())
    embeddings = [n for n in EMBEDDINGS if n in params]
    assert embeddings and all(decay[id(params[n])] == 1e-4 for n in embeddings), embeddings
