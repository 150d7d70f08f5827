"""A member's names are its own (issue #61): a class that claims a short name or a class name
another member holds is refused when it is created, with one line naming both classes and their
modules (``MemberError``, a ``ConfigError``: the tools print it as one line); ``replaces=`` takes
a member's place on purpose; the same class imported again is not refused; cross forms and
subclasses that declare no short name of their own keep working."""

from __future__ import annotations

import importlib.util

import pytest
from mmengine.registry import MODELS

import dna_mm  # noqa: F401  (registers the family)
from dna_mm.errors import ConfigError, MemberError, UserError, error_line
from dna_mm.models.attention import (
    AttentionBase,
    DnAAttention,
    DnACrossAttention,
    SoftmaxAttention,
    attention_class,
    build_attention,
    short_names,
)
from dna_mm.models.attention.base import CrossAttentionMixin
from dna_mm.models.attention.functional import single_bias

C, H = 16, 2
SHIPPED = 'dna_mm.models.attention.dna.DnAAttention'


def _one_line_naming(err: pytest.ExceptionInfo, *names: str) -> str:
    text = str(err.value)
    assert isinstance(err.value, ConfigError) and isinstance(err.value, UserError)
    assert '\n' not in text and error_line(err.value) == text
    for name in names:
        assert name in text, (name, text)
    return text


@pytest.fixture
def unregister():
    """Names registered by a test, removed after it (the shipped ones put back, in their order:
    the order messages list the members in)."""
    shipped = dict(MODELS.module_dict)
    yield
    MODELS.module_dict.clear()
    MODELS.module_dict.update(shipped)


def test_a_short_name_another_member_holds_is_refused() -> None:
    with pytest.raises(MemberError) as err:

        class Mine(AttentionBase):
            short_name = 'dna'
            attend = SoftmaxAttention.attend

    text = _one_line_naming(err, f'{__name__}.', 'Mine', SHIPPED, "'dna'", "replaces='dna'")
    assert text.startswith(f'{__name__}.test_a_short_name_another_member_holds_is_refused.<locals>.Mine:')
    assert attention_class('dna') is DnAAttention  # nothing taken over


def test_a_class_name_another_member_is_registered_by_is_refused_before_mmengine() -> None:
    """Not mmengine's ``KeyError`` traceback at the decorator: the class statement is refused."""
    with pytest.raises(MemberError) as err:

        @MODELS.register_module()
        class DnAAttention(AttentionBase):  # noqa: F811
            pass

    _one_line_naming(err, f'{__name__}.', SHIPPED, "'DnAAttention'", "replaces='DnAAttention'")
    assert MODELS.get('DnAAttention').__module__ == 'dna_mm.models.attention.dna'


def test_a_short_name_that_is_another_members_type_is_refused() -> None:
    with pytest.raises(MemberError) as err:

        class Mine(AttentionBase):
            short_name = 'SoftmaxAttention'
            attend = SoftmaxAttention.attend

    _one_line_naming(err, 'Mine', 'dna_mm.models.attention.softmax.SoftmaxAttention')
    assert attention_class('SoftmaxAttention') is SoftmaxAttention


def test_replaces_takes_a_short_name_and_leaves_the_type(unregister) -> None:
    """``class Mine(DnAAttention, replaces='dna')``: ``'dna'`` builds ``Mine`` (its short name
    now, its own), ``type='DnAAttention'`` still builds DnA; its cross form and another
    subclass that declares no short name are accepted."""

    @MODELS.register_module()
    class Mine(DnAAttention, replaces='dna'):
        pass

    assert Mine.own_short_name() == 'dna' and short_names()['dna'] == 'Mine'
    assert type(build_attention('dna', C, H)) is Mine
    assert type(build_attention('DnAAttention', C, H)) is DnAAttention

    @MODELS.register_module()
    class MineCross(CrossAttentionMixin, Mine):
        pass

    @MODELS.register_module()
    class Tuned(DnAAttention):  # a subclass without a short name of its own
        pass

    assert MineCross.own_short_name() is None and Tuned.own_short_name() is None
    assert short_names()['dna'] == 'Mine' and MineCross.short_name == 'dna'  # inherited, as DnA's cross form
    with pytest.raises(MemberError) as err:  # its short name is held by Mine now

        class Other(AttentionBase):
            short_name = 'dna'
            attend = SoftmaxAttention.attend

    _one_line_naming(err, 'Other', f'{__name__}.', 'Mine')


def test_replaces_a_class_name(unregister) -> None:
    """Taking a member's registered name: the earlier class is unregistered, the plain decorator
    registers the new one, which takes its short name too."""

    @MODELS.register_module()
    class DnAAttention(SoftmaxAttention, replaces='DnAAttention'):  # noqa: F811
        pass

    assert MODELS.get('DnAAttention') is DnAAttention and DnAAttention.own_short_name() == 'dna'
    assert type(build_attention('dna', C, H)) is DnAAttention


def test_replaces_must_name_a_member_and_keep_its_short_name() -> None:
    with pytest.raises(MemberError) as err:

        class Mine(AttentionBase, replaces='dnaa'):
            attend = SoftmaxAttention.attend

    _one_line_naming(err, 'Mine', "replaces='dnaa'")
    with pytest.raises(MemberError) as err:

        class Mine2(AttentionBase, replaces='dna'):
            short_name = 'mine'
            attend = SoftmaxAttention.attend

    _one_line_naming(err, 'Mine2', SHIPPED, "'mine'", "'dna'")


def test_the_shipped_cross_forms_declare_no_short_name_of_their_own() -> None:
    assert DnACrossAttention.own_short_name() is None and DnACrossAttention.short_name == 'dna'
    assert short_names()['dna'] == 'DnAAttention'


MEMBER = '''
from mmengine.registry import MODELS

from dna_mm.models.attention import AttentionBase
from dna_mm.models.attention.functional import single_bias


@MODELS.register_module()
class HalvedAttention(AttentionBase):
    short_name = 'halved'

    def attend(self, heads, attn_mask, attn_bias, eager):
        bias = single_bias(attn_bias, type(self).__name__)
        out, attn = self.softmax_branch(heads['q'], heads['k'], heads['v'], attn_mask, bias, eager)
        return out / 2, ({'attn': attn} if eager else {})
'''


def _import(path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_same_file_imported_again_under_its_name_is_not_refused(tmp_path, unregister) -> None:
    """A reload (the same module and class names): the new class is registered in place of the
    earlier one. The same file under another module name is another member: refused."""
    path = tmp_path / 'halved_attention.py'
    path.write_text(MEMBER)
    first = _import(path, 'halved_attention')
    second = _import(path, 'halved_attention')
    assert first.HalvedAttention is not second.HalvedAttention
    assert MODELS.get('HalvedAttention') is second.HalvedAttention
    assert type(build_attention('halved', C, H)) is second.HalvedAttention
    with pytest.raises(MemberError) as err:
        _import(path, 'another_name')
    _one_line_naming(err, 'another_name.HalvedAttention', 'halved_attention.HalvedAttention')


def test_two_members_registered_after_their_creation_are_refused_when_names_are_read(unregister) -> None:
    """``MODELS.register_module(module=cls)`` after the class exists: a short name two members
    then hold is one line when the names are read (by every build)."""

    class First(AttentionBase):
        short_name = 'twice'
        attend = SoftmaxAttention.attend

    class Second(AttentionBase):
        short_name = 'twice'
        attend = SoftmaxAttention.attend

    MODELS.register_module(module=First)
    MODELS.register_module(module=Second)
    with pytest.raises(MemberError) as err:
        build_attention('twice', C, H)
    _one_line_naming(err, f'{__name__}.', 'First', 'Second', "'twice'")


def test_a_member_defined_in_the_test_runs(unregister) -> None:
    """The names check leaves an ordinary new member alone."""

    @MODELS.register_module()
    class Plain(AttentionBase):
        short_name = 'plain'

        def attend(self, heads, attn_mask, attn_bias, eager):
            bias = single_bias(attn_bias, type(self).__name__)
            out, attn = self.softmax_branch(heads['q'], heads['k'], heads['v'], attn_mask, bias, eager)
            return out, ({'attn': attn} if eager else {})

    import torch

    assert build_attention('plain', C, H)(torch.randn(1, 3, C)).shape == (1, 3, C)
