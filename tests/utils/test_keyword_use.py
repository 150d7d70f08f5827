"""What a function does with its ``**kwargs``, read from its bytecode
(:func:`dna_mm.utils.build_errors.keyword_use`): the config checks take a class whose ``__init__``
drops them (MMDetection's ``BaseBBoxCoder``, MMAction2's ``SampleFrames``) to take only the
arguments it names, and leave to its build one that takes some out or looks at some that a class
after it drops (``RandomSampler``: ``rng``). The bytecode differs by Python version: CI runs
3.11, and these cases read the same on 3.12 and 3.13."""

from __future__ import annotations

from typing import Any

import pytest

from dna_mm.config.check.values import class_arguments
from dna_mm.utils.build_errors import accepted_arguments, keyword_use


def _call(*args: Any, **kwargs: Any) -> None:
    del args, kwargs


class Base:
    def __init__(self, use_box_type: bool = False, **kwargs: Any) -> None:  # drops them
        self.use_box_type = use_box_type


class Passes(Base):
    def __init__(self, stds: tuple = (1.0,), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stds = stds


class Reads(Base):
    def __init__(self, num: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rng = kwargs.get('rng')


class Strict:
    def __init__(self, num: int = 1) -> None:
        self.num = num


class LooksThenStrict(Strict):
    def __init__(self, check: bool = True, **kwargs: Any) -> None:
        if check and 'num' in kwargs and kwargs['num'] < 0:
            raise ValueError(kwargs['num'])
        super().__init__(**kwargs)


class TakesOut(Strict):
    def __init__(self, **kwargs: Any) -> None:
        self.rng = kwargs.pop('rng', None)
        super().__init__(**kwargs)


def _passes_with_others(a: int, *args: Any, **kwargs: Any) -> None:
    _call(*args, x=a, **kwargs)


def _keeps(**kwargs: Any) -> dict:
    return kwargs


def _looks_at_locals(a: int, **kwargs: Any) -> dict:
    return locals()


def _closure(**kwargs: Any) -> Any:
    return lambda: kwargs


def _none(a: int) -> int:
    return a


@pytest.mark.parametrize(
    'fn, use',
    [
        (Base.__init__, 'dropped'),
        (Passes.__init__, 'passed'),
        (Reads.__init__, 'looked'),
        (LooksThenStrict.__init__, 'looked'),
        (TakesOut.__init__, 'read'),
        (_passes_with_others, 'passed'),
        (_keeps, 'read'),
        (_looks_at_locals, 'read'),
        (_closure, 'read'),
        (_none, None),
        (len, None),  # no bytecode
    ],
)
def test_keyword_use(fn, use) -> None:
    assert keyword_use(fn) == use


def test_a_class_that_drops_its_keywords_takes_only_the_named_ones() -> None:
    assert class_arguments(Passes) == accepted_arguments(Passes) == ['stds', 'use_box_type']
    assert class_arguments(Reads) is None  # it reads one that Base drops: which, its code says
    assert accepted_arguments(Reads) == ['num', 'use_box_type']
    assert class_arguments(LooksThenStrict) == ['check', 'num']  # Strict refuses any other
    assert class_arguments(TakesOut) is None
