"""The names a member holds: its registered name (its class name) and its :attr:`short_name`.

A member's class claims both when it is created, before MMEngine registers it
(:meth:`AttentionBase.__init_subclass__ <.base.AttentionBase.__init_subclass__>` calls
:func:`claim_names`). A name another registered member holds is refused there, with one line
naming both classes (:class:`~dna_mm.errors.MemberError`), instead of the short name silently
building the newcomer or MMEngine's ``KeyError`` traceback for a class name:

=================================================  ============================================
the new class                                      when it is created
=================================================  ============================================
declares a ``short_name`` another member holds     refused
is named as another member is registered           refused
declares a short name that is another's type       refused (configs of that type would build it)
either, with ``replaces=NAME`` naming the holder   takes the holder's place (below)
is the same class again (a reload, a second        accepted: the earlier copy's registrations
import of one file under one module name)          are released for the new one
=================================================  ============================================

``class Mine(Base, replaces='dna')`` (``NAME``: the member's short name or registered name) takes
the place of that member: ``Mine`` holds its short name (``short_name`` inherited or set: it
may not declare another) and, where ``Mine`` has the same class name, its registered name (the
earlier class is unregistered, so ``@MODELS.register_module()`` takes the new one). The replaced
member keeps any other registered name (``type='DnAAttention'`` still builds DnA when ``Mine`` is
its own class name). A ``replaces`` that names no registered member is refused: an override
that would do nothing is a mistake.

Members are looked up in MMEngine's root ``MODELS`` and every registry below it (each library's
``MODELS``). A class registered after its creation (``MODELS.register_module(module=cls)``) is
checked when names are read: two members still holding one short name then make
:func:`short_name_owner` raise the same one line.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Optional

from mmengine.registry import MODELS, Registry

from ...errors import MemberError

#: the attribute a class that replaces another member keeps that member in (its own, not inherited)
REPLACED = '_replaced_member'


def where(cls: type) -> str:
    """``module.QualifiedName``: how a message names a class."""
    return f'{cls.__module__}.{cls.__qualname__}'


def same_class(a: Optional[type], b: Optional[type]) -> bool:
    """``a`` and ``b`` are one class, or two copies of it (one module and qualified name: a
    module imported again)."""
    if a is None or b is None:
        return a is b
    return a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def registries(root: Registry = MODELS) -> list[Registry]:
    """``root`` and every registry below it (each library's ``MODELS``)."""
    found, todo = [], [root]
    while todo:
        registry = todo.pop(0)
        found.append(registry)
        todo.extend(registry.children.values())
    return found


def registered_members(family: type) -> list[tuple[Registry, str, type]]:
    """``(registry, name, class)`` of every subclass of ``family`` (the members' base class)
    registered now, in any of :func:`registries`."""
    return [
        (registry, name, obj)
        for registry in registries()
        for name, obj in registry.module_dict.items()
        if inspect.isclass(obj) and issubclass(obj, family)
    ]


def short_name_owner(short: str, classes: Iterable[type]) -> Optional[type]:
    """The class of ``classes`` that ``short`` builds: the one that declares it, or, of several,
    the one that replaced the others (``replaces=``, :data:`REPLACED`); None if none declares it.

    Raises:
        MemberError: two classes declare ``short`` and neither replaced the other (both
            registered after their classes were created).
    """
    holders: list[type] = []
    for cls in classes:
        if cls.own_short_name() == short and not any(cls is held for held in holders):
            holders.append(cls)
    left = [c for c in holders if not any(same_class(vars(r).get(REPLACED), c) for r in holders)]
    if len(left) > 1:
        a, b = left[:2]
        raise MemberError(
            f'short_name {short!r} is held by both {where(a)} and {where(b)}; give one another '
            f'short name, or let one take the place of the other: class {b.__name__}(..., replaces={short!r})'
        )
    return left[0] if left else (holders[-1] if holders else None)


def claim_names(cls: type, replaces: Optional[str], family: type) -> None:
    """Check the names ``cls`` claims (its class name, its own short name) against the
    registered members (subclasses of ``family``, the members' base class), as the module
    docstring says; release the registrations of an earlier copy of ``cls`` and, with
    ``replaces``, of the member it takes the place of by class name.

    Raises:
        MemberError: a name another member holds, or a ``replaces`` that names no member or
            disagrees with the short name ``cls`` declares; one line naming both classes.
    """
    members = registered_members(family)
    for registry, name, obj in members:  # an earlier copy of this class (a module imported again)
        if obj is not cls and same_class(obj, cls):
            registry.module_dict.pop(name, None)
    others = [(registry, name, obj) for registry, name, obj in members if not same_class(obj, cls)]
    replaced = None if replaces is None else _take_place(cls, replaces, others)
    if replaced is not None and replaced.__name__ == cls.__name__:
        for registry, name, obj in others:
            if obj is replaced and name == cls.__name__:
                registry.module_dict.pop(name, None)
        others = [m for m in others if not (m[2] is replaced and m[1] == cls.__name__)]
    for _, name, obj in others:
        if name == cls.__name__:
            raise MemberError(
                f'{where(cls)}: the class name {name!r} is the registered name of the attention member '
                f'{where(obj)}; rename the class, or take its place: '
                f'class {cls.__name__}(..., replaces={name!r})'
            )
    short = cls.own_short_name()
    if short is None:
        return
    owner = short_name_owner(short, [obj for _, _, obj in others])
    if owner is not None and owner is not replaced:
        raise MemberError(
            f'{where(cls)}: short_name {short!r} is held by {where(owner)}; choose another, or take '
            f'its place: class {cls.__name__}(..., replaces={short!r})'
        )
    typed = next((obj for _, name, obj in others if name == short and obj is not replaced), None)
    if typed is not None:
        raise MemberError(
            f'{where(cls)}: short_name {short!r} is the registered name of {where(typed)} (configs '
            f'naming that type would build {cls.__name__}); choose another'
        )


def _take_place(cls: type, replaces: str, others: list[tuple[Registry, str, type]]) -> type:
    """The member ``replaces`` names (its short name, else its registered name), recorded on
    ``cls`` (:data:`REPLACED`); ``cls`` takes its short name where it declares none."""
    if not isinstance(replaces, str) or not replaces:
        raise MemberError(
            f'{where(cls)}: replaces must name a member (its short or registered name), got {replaces!r}'
        )
    classes = [obj for _, _, obj in others]
    replaced = short_name_owner(replaces, classes) or next(
        (obj for _, name, obj in others if name == replaces), None
    )
    if replaced is None:
        raise MemberError(
            f'{where(cls)}: replaces={replaces!r}, but no registered attention member has that short or '
            f'registered name (import the module that registers it first)'
        )
    theirs, own = replaced.own_short_name(), cls.own_short_name()
    if own is None and theirs is not None:
        cls.short_name = theirs  # its own from now on: the name it takes over
    elif own != theirs and replaces == theirs:
        raise MemberError(
            f'{where(cls)}: replaces={replaces!r} ({where(replaced)}) but declares short_name {own!r}; '
            f'a member takes the place of another under its short name (drop short_name, or set it '
            f'to {theirs!r})'
        )
    setattr(cls, REPLACED, replaced)
    return replaced
