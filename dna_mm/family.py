"""What the DnA family is, in one place: its variants and the keys each has, the negative
branch a softmax attention gets, the signs of the authors' pretrained files, the
``attn_bias`` argument, and one string for a member with its settings (``dna:apm+gated``: the
demo's ``--attn``, the study's ``--methods``). The models (:mod:`dna_mm.models`), the fused
kernel (:mod:`dna_mm.ops`) and the checkpoint converters (:mod:`dna_mm.converters`) all read
these; this module imports only torch (and :mod:`dna_mm.errors`, which imports nothing of
dna_mm's).

Negative branch generated from a softmax attention (the authors' initialisation,
:class:`NegativeInit`)::

    Q- = q_neg_scale · Q,   V- = v_neg_scale · V   (weights and biases),   α = alpha
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass
from typing import Optional, Sequence, Union

from torch import Tensor

from .errors import ConfigError, SettingError

#: canonical DnA variant name → (separate ``Q-`` (``q_neg``), separate ``V-`` (``v_neg``),
#: learnable ``α`` (``alpha``)): the keys each variant has (``DnAAttention`` reads this table)
DNA_VARIANTS: dict[str, tuple[bool, bool, bool]] = {
    'apm': (False, False, False),
    'apm_alpha': (False, False, True),
    'qpm_v': (True, False, True),
    'q_vpm': (False, True, True),
    'qpm_vpm': (True, True, True),
}
#: the variant a DnA attention is when none is named (the paper's Q±V±)
DNA_DEFAULT_VARIANT = 'qpm_vpm'
#: the paper's names, accepted as aliases
DNA_VARIANT_ALIASES: dict[str, str] = {
    'A±': 'apm',
    'Â±': 'apm_alpha',
    'Q±V': 'qpm_v',
    'QV±': 'q_vpm',
    'Q±V±': 'qpm_vpm',
}
#: ``±`` as a keyboard without it writes it: ``A+-`` is ``A±`` wherever a variant is named
ASCII_PM = '+-'

#: the keys of a DnA attention's negative branch (relative to its prefix)
NEGATIVE_KEYS = ('alpha', 'q_neg.weight', 'q_neg.bias', 'v_neg.weight', 'v_neg.bias')
#: the negative-branch keys whose presence marks a DnA attention (biases are optional)
NEGATIVE_MARKERS = tuple(k for k in NEGATIVE_KEYS if not k.endswith('.bias'))


@dataclass(frozen=True)
class NegativeInit:
    """Where the negative branch starts, generated from the positive one: ``Q- = q_neg_scale · Q``,
    ``V- = v_neg_scale · V`` (weights and biases), ``α = alpha`` per head (the authors' defaults:
    ``+1e-4``, ``-1e-4``, ``0.5``). Every module, loader, swap and converter reads it here."""

    q_neg_scale: float = 1e-4
    v_neg_scale: float = -1e-4
    alpha: float = 0.5


#: the authors' initialisation, the default of every loader, swap and converter
NEGATIVE_INIT = NegativeInit()
#: a DnA variant with fewer projections read exactly by one with more: a variant without its own
#: ``Q-`` (``V-``) uses ``Q+`` (``V+``), one without ``α`` has ``α = 1``
EXACT_UPGRADE = NegativeInit(1.0, 1.0, 1.0)


def is_negative_key(key: str) -> bool:
    """Whether ``key`` (relative to its attention) is the negative branch's: ``alpha`` or a
    tensor of a module whose name ends in ``_neg`` (``q_neg``, ``v_neg``, MViTv2's
    ``pool_q_neg`` / ``norm_v_neg``)."""
    head = key.split('.', 1)[0]
    return key == 'alpha' or ('.' in key and head.endswith('_neg'))


#: where the authors' released code puts each sign (github rjccv/DnA)
COMBINE_SIGNS = {
    'add': 'pos + α·neg: vit/dna_models.py (the ViT their main.py trains) and the TimeSformer '
    'fork (timesformer/models/dna.py)',
    'sub': 'pos − α·neg: vit/dna.py (DenoisingAttention and the shared-V qqkv module) and '
    "VisCoP's DnA cross-attention (InteractionModule_CrossDenoisingAttention_FA2, the "
    "q_pos_proj / q_neg_proj / k_proj / v_pos_proj / v_neg_proj / out_proj keys of "
    "'encoder.interaction_modules.{i}.', the only layout read with 'sub' alone)",
}

#: a bias for both branches, or ``(b_pos, b_neg)`` for branch-specific biases
BiasArg = Union[Tensor, tuple[Tensor, Tensor], None]


def canonical_variant(variant: str) -> str:
    """``'Q±V±'`` / ``'Q+-V+-'`` (:data:`ASCII_PM`) / ``'qpm_vpm'`` → ``'qpm_vpm'``; anything else is a
    :class:`~dna_mm.errors.ConfigError` (a ``ValueError``: a variant is always the user's value, a
    config's or a tool's option) naming the closest valid name and the valid ones."""
    if isinstance(variant, str):
        variant = variant.replace(ASCII_PM, '±')
    name = DNA_VARIANT_ALIASES.get(variant, variant) if isinstance(variant, str) else variant
    if not isinstance(name, str) or name not in DNA_VARIANTS:
        valid = [*DNA_VARIANTS, *DNA_VARIANT_ALIASES]
        near = difflib.get_close_matches(variant, valid, n=1) if isinstance(variant, str) else []
        valid = f'expected one of {sorted(DNA_VARIANTS)} or {sorted(DNA_VARIANT_ALIASES)} (± or {ASCII_PM})'
        raise SettingError(
            f'unknown DnA variant {variant!r}; ' + (f'did you mean {near[0]!r}? ({valid})' if near else valid)
        )
    return name


def check_combine(combine: str, key: str = 'pretrained_combine') -> str:
    """``combine`` if it is a sign of :data:`COMBINE_SIGNS`; else a
    :class:`~dna_mm.errors.ConfigError` (a ``ValueError``) naming ``key``."""
    if combine not in COMBINE_SIGNS:
        raise ConfigError(f'{key} must be {" or ".join(map(repr, COMBINE_SIGNS))}, got {combine!r}')
    return combine


def split_bias(bias: BiasArg, name: str) -> tuple[Optional[Tensor], Optional[Tensor]]:
    """``b`` → ``(b, b)``; ``(b_pos, b_neg)`` unchanged; a clear error for anything else."""
    if bias is None or isinstance(bias, Tensor):
        return bias, bias
    if isinstance(bias, (tuple, list)) and len(bias) == 2:
        return bias[0], bias[1]
    raise TypeError(f'{name}: attn_bias must be a tensor or a pair (b_pos, b_neg), got {type(bias).__name__}')


# -- a member with its settings in one string (the demo's --attn, the study's --methods) -----
#: ``NAME+gated``: member ``NAME`` with the sigmoid gate on its output (``gated=True``)
GATED = '+gated'
#: ``NAME:VARIANT``: member ``NAME`` (DnA) as its variant ``VARIANT``
#: (:data:`DNA_VARIANTS` or the paper's name: ``dna:apm``, ``dna:A±``)
VARIANT = ':'
#: canonical DnA variant → the paper's name (``apm`` → ``A±``)
PAPER_NAMES = {name: alias for alias, name in DNA_VARIANT_ALIASES.items()}


def method_attention(method: str) -> tuple[str, dict]:
    """The member a method (the demo's ``--attn``, the study's ``--methods``) names and the
    settings it adds to that member's config: ``'dna'`` → ``('dna', {})``; ``'dna+gated'`` →
    ``('dna', {'gated': True})``, the gate of gated attention (Qiu et al., 2025) on DnA;
    ``'dna:apm'``, ``'dna:A±'`` or the paper's name alone, ``'A±'`` →
    ``('dna', {'variant': 'apm'})``, a DnA variant (:data:`DNA_VARIANTS`; ``±`` written ``+-``
    too: ``'A+-'``; both: ``'dna:apm+gated'`` or ``'dna+gated:apm'``).

    Raises:
        ConfigError: an unknown variant (:func:`canonical_variant`), or a setting other than
            ``+gated``.
    """
    name, sep, variant = method.replace(ASCII_PM, '±').partition(VARIANT)
    gated = name.endswith(GATED) or (bool(sep) and variant.endswith(GATED))
    name, variant = name.removesuffix(GATED), variant.removesuffix(GATED)
    other = next((part.partition('+')[2] for part in (name, variant) if '+' in part), None)
    if other is not None:  # a setting other than the gate: dna+gatd
        raise SettingError(
            f"{method!r}: unknown setting '+{other}' (NAME+gated: the member with the output gate)"
        )
    if not sep and name in DNA_VARIANT_ALIASES:
        name, sep, variant = 'dna', VARIANT, name
    settings: dict = {}
    if sep:
        settings['variant'] = canonical_variant(variant)
    if gated:
        settings['gated'] = True
    return name, settings


def canonical_method(method: str) -> str:
    """One name per method (a study's runs' folder, a demo's work dir): a variant by its canonical name
    (``'A±'``, ``'dna:A±'`` → ``'dna:apm'``), DnA's default variant by the member alone
    (``'dna:Q±V±'``, ``'dna:qpm_vpm'`` → ``'dna'``), softmax with the gate by the gated member
    (``'softmax+gated'`` → ``'gated'``): one model, one name; anything else as it is.

    Raises:
        ConfigError: an unknown variant.
    """
    member, settings = method_attention(method)
    if member == 'dna' and settings.get('variant') == DNA_DEFAULT_VARIANT:
        settings = {k: v for k, v in settings.items() if k != 'variant'}
    if member in ('softmax', 'gated') and settings.get('gated'):
        member, settings = 'gated', {k: v for k, v in settings.items() if k != 'gated'}
    return method_of(member, settings)


def distinct_methods(flag: str, methods: Sequence[str]) -> dict[str, str]:
    """``{canonical name: name as given}`` for the methods of a tool's ``flag`` (the demo's
    ``--attn``, the study's ``--methods``), each model once, in the order given: two names of one
    model (``dna`` and ``dna:Q±V±``, ``A±`` and ``dna:apm``: :func:`canonical_method`)
    keep the first, and one note on stderr says so; an unknown variant is a
    :class:`~dna_mm.errors.ConfigError` naming ``flag`` and the value."""
    kept: dict[str, str] = {}
    for name in methods:
        try:
            method = canonical_method(name)
        except ConfigError as err:
            raise ConfigError(f'{flag} {name}: {err}') from None
        if method not in kept:
            kept[method] = name
        elif kept[method] != name:
            print(f'note: {flag} {name} is {kept[method]} (the same model): run once', file=sys.stderr)
    return kept


def method_of(member: str, settings: dict) -> str:
    """The method of ``member`` with ``settings`` (:func:`method_attention`'s inverse):
    ``('dna', {'variant': 'apm', 'gated': True})`` → ``'dna:apm+gated'``; other settings left out."""
    variant = f'{VARIANT}{settings["variant"]}' if settings.get('variant') else ''
    return member + variant + (GATED if settings.get('gated') else '')
