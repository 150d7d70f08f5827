"""``optim_wrapper.paramwise_cfg.custom_keys`` as a user writes them: a key for DnA's ``alpha``
reaches it on top of the shipped schedule's; a key that gives no parameter its settings (a
typo, a key a longer one takes the place of) is one warning as the optimizer is built; a resume
whose optimizer groups the parameters otherwise than the checkpoint's is one line."""

from __future__ import annotations

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, run_main, tiny_run_options

from dna_mm.checkpoint.sources import read_checkpoint
from dna_mm.config.model import model_from_config
from dna_mm.engine.param_groups import custom_key_notes

TINY = {
    'model.backbone.embed_dims': 32,
    'model.backbone.num_heads': 2,
    'model.backbone.num_transformer_layers': 1,
    'model.backbone.pretrained': None,
    'model.cls_head.in_channels': 32,
}


@pytest.fixture(scope='module')
def dna_model() -> torch.nn.Module:
    return model_from_config(DEMO_CONFIG, TINY, clear_pretrained=True)[1]


def test_a_key_that_gives_no_parameter_its_settings_is_named(dna_model) -> None:
    keys = {'alpha': dict(lr_mult=10.0), '.attn.alpha': dict(decay_mult=0.0), 'qkv': {}}
    (shadowed,) = custom_key_notes(dna_model, keys)
    assert shadowed.startswith("optim_wrapper.paramwise_cfg.custom_keys['alpha'] applies to no parameter: ")
    assert (
        'each of the 2 it matches (backbone.transformer_layers.layers.0.attentions.0.attn.alpha, ...)'
        in shadowed
    )
    assert "takes the key '.attn.alpha'" in shadowed and shadowed.endswith(
        "put its settings in '.attn.alpha'"
    )
    (typo,) = custom_key_notes(dna_model, {'alpah': {}, 'alpha': {}})
    assert typo.startswith(
        "optim_wrapper.paramwise_cfg.custom_keys['alpah'] matches no parameter of the model"
    )
    assert typo.endswith("did you mean 'alpha'?")
    (dotted,) = custom_key_notes(dna_model, {'.backbone.cls_token': {}})  # MMAction2's TimeSformer keys
    assert dotted.endswith("without its leading dot it matches 'backbone.cls_token'")
    assert custom_key_notes(dna_model, {'alpha': {}, 'lambda_': {}, 'cls_head': {}, '.cls_token': {}}) == []


def test_the_shipped_schedules_gain_keys_serve_a_softmax_model_without_a_note() -> None:
    softmax = model_from_config(
        DEMO_CONFIG, {**TINY, 'model.backbone.attn_cfg': 'softmax'}, clear_pretrained=True
    )
    assert (
        custom_key_notes(softmax[1], {'alpha': dict(decay_mult=0.0), 'lambda_': dict(decay_mult=0.0)}) == []
    )


def test_a_child_configs_alpha_key_reaches_alpha_on_top_of_the_schedules() -> None:
    """``--cfg-options optim_wrapper.paramwise_cfg.custom_keys.alpha.lr_mult=10`` on the NTU
    recipe: α's lr is 10x, and still not decayed (the schedule's own ``alpha`` key, merged)."""
    from mmengine.optim import build_optim_wrapper

    options = {**TINY, 'optim_wrapper.paramwise_cfg.custom_keys.alpha.lr_mult': 10.0}
    cfg, model = model_from_config(
        str(REPO / 'configs/timesformer_dna_ntu60.py'), options, clear_pretrained=True
    )
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {names[id(p)]: g for g in wrapper.optimizer.param_groups for p in g['params']}
    alphas = [n for n in groups if n.endswith('.alpha')]
    assert alphas and all(
        groups[n]['lr'] == pytest.approx(0.05) and groups[n]['weight_decay'] == 0 for n in alphas
    )
    assert {groups[n]['lr'] for n in groups if n not in alphas} == {0.005}


def test_training_warns_of_a_dead_key_and_a_regrouped_resume_is_one_line(tiny_video_set, tmp_path) -> None:
    work = tmp_path / 'work'
    train = ['tools/train.py', DEMO_CONFIG, '--work-dir', str(work), '--cfg-options']
    proc = run_main(
        [
            *train,
            *tiny_run_options(tiny_video_set),
            'optim_wrapper.paramwise_cfg.custom_keys.alpah.lr_mult=10',
        ]
    )
    out = proc.stdout + proc.stderr
    assert (
        "custom_keys['alpah'] matches no parameter of the model" in out and "did you mean 'alpha'?" in out
    ), out[-3000:]
    # a checkpoint whose optimizer grouped the parameters otherwise (one group fewer)
    checkpoint = read_checkpoint(str(work / 'epoch_1.pth'))
    groups = checkpoint['optimizer']['param_groups']
    groups[0]['params'] += groups.pop()['params']
    torch.save(checkpoint, tmp_path / 'regrouped.pth')
    resume = [*tiny_run_options(tiny_video_set, epochs=2)]
    proc = run_main(
        [
            'tools/train.py',
            DEMO_CONFIG,
            '--work-dir',
            str(tmp_path / 'w2'),
            '--resume',
            str(tmp_path / 'regrouped.pth'),
            '--cfg-options',
            *resume,
        ],
        check=False,
    )
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    assert (
        f'cannot resume from {tmp_path / "regrouped.pth"}: its optimizer state groups the parameters'
        in proc.stderr
    )
    assert f'load_from={tmp_path / "regrouped.pth"}' in proc.stderr
