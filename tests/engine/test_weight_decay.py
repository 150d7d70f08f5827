"""What the shipped schedules decay: an attention member's gains (DnA's per-head ``alpha``,
differential attention's ``lambda_*`` vectors) are not decayed in any of them, the projections
are. The models are the shipped configs' own, tiny, built through the registries; the optimizer
is built from the config's ``optim_wrapper`` as the runner builds it."""

from __future__ import annotations

import pytest
from conftest import REPO, TINY_MASK_RCNN
from mmengine.optim import build_optim_wrapper

from dna_mm.config.build import model_from_config

TINY_VIDEO = {
    'model.backbone.embed_dims': 32,
    'model.backbone.num_heads': 2,
    'model.backbone.num_transformer_layers': 1,
    'model.backbone.pretrained': None,
    'model.cls_head.in_channels': 32,
}


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
            {**TINY_MASK_RCNN, 'model.backbone.attn_cfg': 'diff', 'model.backbone.use_rel_pos': False},
            ('attn.lambda_q1', 'attn.lambda_k2'),
            'attn.qkv.weight',
        ),
        ('vitdet_dna_coco_lsj.py', TINY_MASK_RCNN, ('attn.alpha',), 'attn.v_neg.weight'),
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
