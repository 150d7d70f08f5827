"""Activation checkpointing of DnATimeSformer (``with_cp=True``): the same outputs and gradients
(drop-path masks included), each layer run again in the backward pass, the stock forward in
evaluation."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_backbone
from mmaction.registry import MODELS
from mmaction.utils import register_all_modules
from tolerance import ROUNDING, assert_close_as

import dna_mm  # noqa: F401

register_all_modules()


def _pair(attention_type: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The same tiny backbone (drop path on, non-zero temporal_fc) without and with ``with_cp``."""
    cfg = tiny_backbone('DnATimeSformer', attention_type=attention_type, drop_path_rate=0.3)
    plain, ckpt = MODELS.build(cfg), MODELS.build(dict(cfg, with_cp=True))
    for m in plain.modules():
        if hasattr(m, 'temporal_fc'):
            torch.nn.init.normal_(m.temporal_fc.weight, std=0.2)
    ckpt.load_state_dict(plain.state_dict())
    return plain.train(), ckpt.train()


def _step(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, dict, int]:
    """Output, parameter gradients and how often layer 0 ran, for ``(out ** 2).sum()``."""
    calls = []
    hook = model.transformer_layers.layers[0].register_forward_pre_hook(lambda *_: calls.append(1))
    model.zero_grad()
    torch.manual_seed(7)  # the same drop-path masks for both models
    out = model(x)
    (out**2).sum().backward()
    hook.remove()
    return (
        out.detach(),
        {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
        len(calls),
    )


@pytest.mark.parametrize('attention_type', ['divided_space_time', 'joint_space_time'])
def test_with_cp_gives_the_same_gradients(attention_type) -> None:
    plain, ckpt = _pair(attention_type)
    x = torch.randn(2, 3, 4, 32, 32)  # [B, C, T, H, W]
    out, grads, runs = _step(plain, x)
    out_cp, grads_cp, runs_cp = _step(ckpt, x)
    assert (runs, runs_cp) == (1, 2)  # checkpointed: the layer runs again in backward
    assert_close_as(out_cp, out, ulps=ROUNDING)
    assert grads_cp.keys() == grads.keys() and len(grads) > 10
    for name in grads:
        assert_close_as(grads_cp[name], grads[name], ulps=ROUNDING, what=name)
    with torch.no_grad():  # evaluation: MMAction2's forward, nothing recomputed
        assert_close_as(ckpt.eval()(x), plain.eval()(x), ulps=ROUNDING)
