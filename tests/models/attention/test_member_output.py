"""A member's ``attend`` output is checked once (issue #61): on a module's first call it must be
``[B, H, M, d_v]``; a wrong shape is one line naming the member, the shape it gave and the one
expected, in the member's own call and in a host form's. Later calls, and compiled or traced
graphs, hold no check: ``torch.compile(fullgraph=True)`` stays one graph.

A member must define ``attend`` (its formula): a class without one is one line naming it, when
its class statement names it a member (a short name of its own, ``replaces=``: nothing is
claimed), else when it is built (a base of members is left alone until then); never a bare
``NotImplementedError`` at the first training step."""

from __future__ import annotations

import pytest
import torch
from mmengine.registry import MODELS
from test_member_names import unregister  # noqa: F401  (the fixture)
from tolerance import ROUNDING, assert_close_as

import dna_mm  # noqa: F401  (registers the family)
from dna_mm.errors import ConfigError, MemberError, error_line
from dna_mm.models.attention import (
    AttentionBase,
    SoftmaxAttention,
    attention_class,
    attention_types,
    build_attention,
    short_names,
)
from dna_mm.models.attention.base import check_formula
from dna_mm.models.backbones.vitdet import ViTDet

C, H = 32, 4
M = 5  # tokens: neither the head width (8) nor 1, so every wrong shape below is another shape


class SquareAttention(AttentionBase):
    """A mistake: ``Vᵀ V`` ``[B, H, d, d]`` for ``W V`` (merge_heads and proj would take it)."""

    def attend(self, heads, attn_mask, attn_bias, eager):
        v = heads['v']
        return v.transpose(-2, -1) @ v, {}


class PooledAttention(AttentionBase):
    """A mistake: one row for all the queries, ``[B, H, 1, d]`` (broadcasts downstream)."""

    def attend(self, heads, attn_mask, attn_bias, eager):
        out, _ = self.softmax_branch(heads['q'], heads['k'], heads['v'], attn_mask, None, eager)
        return out.mean(dim=2, keepdim=True), {}


class WrongLaterAttention(AttentionBase):
    """Right on its first call, ``[B, H, 1, d]`` after: only the first call is checked."""

    calls = 0

    def attend(self, heads, attn_mask, attn_bias, eager):
        out, _ = self.softmax_branch(heads['q'], heads['k'], heads['v'], attn_mask, None, eager)
        self.calls += 1
        return (out if self.calls == 1 else out[:, :, :1]), {}


@pytest.mark.parametrize(
    'cls, shape', [(SquareAttention, [2, H, 8, 8]), (PooledAttention, [2, H, 1, 8])], ids=['BHdd', 'BH1d']
)
def test_a_wrong_shape_is_one_line_on_the_first_call(cls, shape) -> None:
    m = cls(C, H)
    with pytest.raises(MemberError) as err:
        m(torch.randn(2, M, C))
    text = str(err.value)
    assert isinstance(err.value, ConfigError) and '\n' not in text and error_line(err.value) == text
    assert text.startswith(f'{__name__}.{cls.__name__}.attend returned {shape};'), text
    assert f'expected [B, H, M, d_v] = [2, {H}, {M}, 8]' in text


def test_the_check_runs_in_a_host_form() -> None:
    """ViTDet's grid form calls the member through ``run_attend``: the same line."""
    model = ViTDet(
        img_size=32, patch_size=8, embed_dim=C, depth=1, num_heads=H, pretrain_img_size=32,
        attn_cfg=dict(type=SquareAttention),
    )  # fmt: skip
    with pytest.raises(MemberError, match=r'SquareAttention\.attend returned \[1, 4, 8, 8\]; expected'):
        model(torch.randn(1, 3, 32, 32))


def test_a_right_member_is_checked_once() -> None:
    m = WrongLaterAttention(C, H)
    assert not m._output_checked
    assert m(torch.randn(2, M, C)).shape == (2, M, C)
    assert m._output_checked
    assert m(torch.randn(2, M, C)).shape == (2, 1, C)  # a second call is not checked again


@pytest.mark.parametrize('short', sorted(short_names()))
def test_every_registered_member_passes_its_check(short: str) -> None:
    from dna_mm.models.attention import build_attention

    m = build_attention(short, C, H).eval()
    for return_attn in (False, True):
        out = m(torch.randn(2, M, C), return_attn=return_attn)
        assert (out[0] if return_attn else out).shape == (2, M, C)
    assert m._output_checked
    ctx = torch.randn(2, 7, C)
    cross = type(m).forward(m, torch.randn(2, M, C), context=ctx)  # queries M, keys 7
    assert cross.shape == (2, M, C)


@pytest.mark.parametrize('gated', [False, True])
def test_the_check_leaves_one_compiled_graph(gated: bool) -> None:
    """Compiled before any eager call (the flag unset) and after (set): one graph, no break,
    the eager output."""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter

    for eager_first in (False, True):
        torch._dynamo.reset()
        m = SoftmaxAttention(C, H, gated=gated).eval()
        x = torch.randn(2, M, C)
        if eager_first:
            m(x)
        counter = CompileCounter()
        got = torch.compile(m, backend=counter, fullgraph=True)(x)
        assert counter.frame_count == 1
        assert_close_as(got, m(x), ulps=ROUNDING)
        explained = torch._dynamo.explain(m)(x)
        assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
    torch._dynamo.reset()


def test_a_symbolic_trace_holds_no_check() -> None:
    """``torch.fx`` traces through the check (its tensors are proxies) and keeps none of it."""
    import torch.fx

    class Calls(torch.nn.Module):  # the member called as a host calls it: x alone
        def __init__(self, attn: torch.nn.Module) -> None:
            super().__init__()
            self.attn = attn

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.attn(x)

    m = SoftmaxAttention(C, H).eval()
    graph = torch.fx.symbolic_trace(Calls(m))
    assert not m._output_checked
    x = torch.randn(2, M, C)
    assert_close_as(graph(x), m(x), ulps=ROUNDING)
    assert all('check_output' not in str(node.target) for node in graph.graph.nodes)


# -- a member without its formula -----------------------------------------------------------------
def _no_formula_line(err: pytest.ExceptionInfo, cls_name: str) -> None:
    text = str(err.value)
    assert isinstance(err.value, ConfigError) and '\n' not in text and error_line(err.value) == text
    assert text.startswith(f'{__name__}.') and f'{cls_name} defines no attend(' in text, text
    assert 'must define attend, its formula' in text, text


def test_a_member_without_attend_is_refused_at_its_class_statement(unregister) -> None:  # noqa: F811
    """Its short name names it a member: refused there, its names not claimed (the decorator
    never runs)."""
    with pytest.raises(MemberError) as err:

        @MODELS.register_module()
        class NoFormulaAttention(AttentionBase):
            short_name = 'noformula'

    _no_formula_line(err, 'NoFormulaAttention')
    assert 'noformula' not in short_names() and 'NoFormulaAttention' not in attention_types()


def test_replaces_without_attend_is_refused_before_it_takes_the_place(unregister) -> None:  # noqa: F811
    with pytest.raises(MemberError) as err:

        @MODELS.register_module()
        class DnAAttention(AttentionBase, replaces='DnAAttention'):  # noqa: F811
            pass

    _no_formula_line(err, 'DnAAttention')
    shipped = attention_class('DnAAttention')  # still registered: the refused class claimed nothing
    assert shipped.__module__ == 'dna_mm.models.attention.dna' and attention_class('dna') is shipped


def test_a_base_without_attend_is_refused_when_built() -> None:
    """A base of members (no short name) is a class like any; built, it is one line naming it;
    its subclass with a formula builds and runs."""

    class HelperBase(AttentionBase):
        def halved(self, t: torch.Tensor) -> torch.Tensor:
            return t / 2

    class Halved(HelperBase):
        def attend(self, heads, attn_mask, attn_bias, eager):
            out, _ = self.softmax_branch(heads['q'], heads['k'], heads['v'], attn_mask, None, eager)
            return self.halved(out), {}

    with pytest.raises(MemberError) as err:
        HelperBase(C, H)
    _no_formula_line(err, 'HelperBase')
    with pytest.raises(MemberError) as err:
        build_attention(dict(type=HelperBase), C, H)
    _no_formula_line(err, 'HelperBase')
    assert Halved(C, H)(torch.randn(2, M, C)).shape == (2, M, C)


@pytest.mark.parametrize('name', sorted(attention_types()))
def test_every_shipped_member_and_cross_form_has_its_formula(name: str) -> None:
    cls = attention_types()[name]
    check_formula(cls)
    m = build_attention(name, C, H)
    x = torch.randn(2, M, C)
    out = m(x, context=torch.randn(2, 7, C)) if 'Cross' in name else m(x)
    assert out.shape == (2, M, C)
