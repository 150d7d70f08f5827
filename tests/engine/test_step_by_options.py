"""A run's optimizer steps once per set of options (``DnARunner.build_optim_wrapper``): the
shipped recipes' groups (one a parameter, from ``paramwise_cfg``) are merged for the call, the
update is bitwise the one of a step per group, and everything outside the call sees the groups
as built. The models and optimizers are the shipped configs' own (tiny), built through the
registries; the runner's own build is in ``test_the_runner_builds_optimizers_that_step_by_options``."""

from __future__ import annotations

import argparse
import copy

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, TINY_MASK_RCNN, tiny_run_options
from mmengine.optim import build_optim_wrapper

from dna_mm.config.model import model_from_config
from dna_mm.engine.step_by_options import (
    merged_groups,
    options_key,
    step_by_options,
    wrapper_steps_by_options,
)

TINY_VIDEO = {
    'model.backbone.embed_dims': 32,
    'model.backbone.num_heads': 2,
    'model.backbone.num_transformer_layers': 2,
    'model.backbone.img_size': 32,
    'model.cls_head.in_channels': 32,
}
RECIPES = {
    # SGD, momentum, Nesterov, weight decay but on the attention's gains, gradient clipping
    'video SGD': ('timesformer_dna_ntu60.py', TINY_VIDEO),
    # AdamW, no decay on the position embedding and the attention's gains
    'COCO AdamW': ('vitdet_dna_coco.py', {**TINY_MASK_RCNN, 'model.backbone.img_size': 64}),
}


def recipe(name: str, optimizer: dict | None = None):
    """``(model, its optim wrapper config, model → loss)`` of a shipped config, tiny;
    ``optimizer``: keys put into its optimizer's config."""
    config, options = RECIPES[name]
    cfg, model = model_from_config(str(REPO / 'configs' / config), options, clear_pretrained=True)
    cfg.optim_wrapper.optimizer.update(optimizer or {})
    x = torch.randn(2, 3, 8, 32, 32) if name.startswith('video') else torch.randn(1, 3, 64, 64)

    def loss(m: torch.nn.Module) -> torch.Tensor:
        inputs = x.to(next(m.parameters()).device)
        if name.startswith('video'):
            return m.cls_head(m.backbone(inputs)).square().mean()
        return sum(f.square().mean() for f in m.neck(m.backbone(inputs)))

    return model.eval(), cfg.optim_wrapper, loss  # eval: no dropout, the same forward for two copies


def distinct_options(groups: list[dict]) -> int:
    return len({repr(sorted((k, v) for k, v in g.items() if k != 'params')) for g in groups})


@pytest.mark.parametrize('name', RECIPES)
def test_one_call_per_set_of_options_and_the_groups_as_built_outside_it(name: str) -> None:
    model, wrapper_cfg, loss = recipe(name)
    wrapper = wrapper_steps_by_options(build_optim_wrapper(model, wrapper_cfg))
    optimizer = wrapper.optimizer
    built = optimizer.param_groups
    groups_before = [dict(g) for g in built]
    assert len(built) == sum(1 for p in model.parameters() if p.requires_grad)  # mmengine: one a parameter
    seen: list[int] = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(len(opt.param_groups)))
    for _ in range(2):
        wrapper.update_params(loss(model))
    assert seen == [distinct_options(built)] * 2 and 1 < seen[0] < len(built) / 2, (seen, len(built))
    assert optimizer.param_groups is built and built == groups_before
    assert len(optimizer.state_dict()['param_groups']) == len(built)


@pytest.mark.parametrize('foreach', [None, True], ids=['default', 'foreach'])
@pytest.mark.parametrize('name', RECIPES)
def test_the_merged_step_is_bitwise_the_step_per_group(name: str, foreach) -> None:
    """Three steps of the recipe's optimizer stepping by options against the same optimizer
    stepping per group, on copies of one model: the same weights and the same optimizer state,
    bit for bit (``foreach=True``: the multi-tensor updates a GPU takes by default)."""
    model, wrapper_cfg, loss = recipe(name, dict(foreach=foreach))
    ref_model = copy.deepcopy(model)
    wrapper = wrapper_steps_by_options(build_optim_wrapper(model, wrapper_cfg))
    ref_wrapper = build_optim_wrapper(ref_model, wrapper_cfg)
    assert getattr(wrapper.optimizer.step, 'by_options', False)
    assert not getattr(ref_wrapper.optimizer.step, 'by_options', False)
    for _ in range(3):
        wrapper.update_params(loss(model))
        ref_wrapper.update_params(loss(ref_model))
    for (n, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters(), strict=True):
        assert torch.equal(p, q), n
    state, ref_state = wrapper.optimizer.state_dict(), ref_wrapper.optimizer.state_dict()
    assert state['param_groups'] == ref_state['param_groups']
    assert state['state'].keys() == ref_state['state'].keys() and state['state']
    for i, values in state['state'].items():
        for key, value in values.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(ref_state['state'][i][key])), (i, key)


def test_a_failed_step_leaves_the_groups_as_built() -> None:
    a, b = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    optimizer = step_by_options(torch.optim.SGD([{'params': [a]}, {'params': [b]}], lr=0.1, momentum=0.9))
    built = optimizer.param_groups
    seen: list[int] = []

    def closure() -> torch.Tensor:  # called inside the step, where the groups are merged
        seen.append(len(optimizer.param_groups))
        raise RuntimeError('the loss failed')

    with pytest.raises(RuntimeError, match='the loss failed'):
        optimizer.step(closure)
    assert seen == [1]
    assert optimizer.param_groups is built and [g['params'] for g in built] == [[a], [b]]


def test_only_the_listed_optimizers_are_merged_and_uncomparable_options_keep_their_call() -> None:
    p = torch.nn.Parameter(torch.ones(2))
    rms = torch.optim.RMSprop([{'params': [p]}], lr=0.1)
    step = rms.step
    assert step_by_options(rms).step == step  # RMSprop: not in MERGED_OPTIMIZERS, unchanged
    sgd = step_by_options(torch.optim.SGD([p], lr=0.1))
    wrapped = sgd.step
    assert step_by_options(sgd).step is wrapped  # once only
    tensor_lr = {'params': [p], 'lr': torch.tensor(0.1)}
    assert options_key(tensor_lr) is None
    groups = [{'params': [p], 'lr': 0.1}, tensor_lr, {'params': [p], 'lr': 0.1}, {'params': [p], 'lr': 0.2}]
    merged = merged_groups(groups)
    assert [len(g['params']) for g in merged] == [2, 1, 1] and merged[1] is tensor_lr
    assert [len(g['params']) for g in groups] == [1, 1, 1, 1]  # the given groups are not changed


@pytest.mark.cuda
@pytest.mark.parametrize('name', RECIPES)
def test_the_merged_step_is_bitwise_the_step_per_group_on_cuda(name: str) -> None:
    """On CUDA (``foreach`` by default): the merged call's multi-tensor kernels over long lists
    give the weights of one call per group, bit for bit (the recipe's wrapper, AMP included, for
    both)."""
    model, wrapper_cfg, loss = recipe(name)
    model.cuda()
    ref_model = copy.deepcopy(model)
    wrapper = wrapper_steps_by_options(build_optim_wrapper(model, wrapper_cfg))
    ref_wrapper = build_optim_wrapper(ref_model, wrapper_cfg)
    for _ in range(3):
        with wrapper.optim_context(model):
            wrapper.update_params(loss(model))
        with ref_wrapper.optim_context(ref_model):
            ref_wrapper.update_params(loss(ref_model))
    for (n, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters(), strict=True):
        assert torch.equal(p, q), n


def test_the_runner_builds_optimizers_that_step_by_options(tiny_video_set, tmp_path) -> None:
    """``DnARunner`` (every dna_mm config's runner): a real training run of the demo config (its
    AdamW on per-parameter groups) steps by options, writes the groups as built into its
    checkpoint, and resumes from it."""
    from mmengine.config import DictAction
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    from dna_mm.checkpoint.sources import read_checkpoint
    from dna_mm.config.build import read_config
    from dna_mm.engine.runner import DnARunner, build_runner

    def runner(epochs: int, resume: bool) -> DnARunner:
        parser = argparse.ArgumentParser()
        parser.add_argument('--o', nargs='+', action=DictAction)
        cfg = read_config(
            DEMO_CONFIG, parser.parse_args(['--o', *tiny_run_options(tiny_video_set, epochs=epochs)]).o
        )
        cfg.work_dir, cfg.resume = str(tmp_path), resume
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
        cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=1)
        return build_runner(cfg)

    seen: list[int] = []
    handle = register_optimizer_step_pre_hook(lambda opt, args, kwargs: seen.append(len(opt.param_groups)))
    try:
        first = runner(1, resume=False)
        assert isinstance(first, DnARunner)
        first.train()
        params = sum(p.requires_grad for p in first.model.parameters())
        assert getattr(first.optim_wrapper.optimizer.step, 'by_options', False)
        assert seen and set(seen) == {2}, seen  # decayed, and the attention's alpha undecayed
        ckpt = read_checkpoint(str(tmp_path / 'epoch_1.pth'))
        assert len(ckpt['optimizer']['param_groups']) == params
        runner(2, resume=True).train()
        assert (tmp_path / 'epoch_2.pth').is_file()
    finally:
        handle.remove()
