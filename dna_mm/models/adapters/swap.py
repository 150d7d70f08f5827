"""Swap the attention of a model MMAction2 / MMDetection / MMPretrain / timm builds: one config line.

    model = dict(_delete_=True, type='with_attention', model={{_base_.model}}, attn_cfg='dna')

builds the base's model unchanged, then replaces every supported host attention
(:mod:`.hosts`) with a family attention initialised from the host's weights. Every parameter
name outside the attention is kept and there is no wrapper prefix, so the zoo checkpoint of
the base config loads: each replacement carries a load hook that reads the host's layout
(``in_proj_*``, ``q_bias`` / ``v_bias``, ...) and, for DnA, generates the negative branch
from the softmax weights (``Q- = q_neg_scale · Q``, ``V- = v_neg_scale · V``, ``α`` of
:data:`~dna_mm.family.NEGATIVE_INIT`, the authors' defaults), and fills what the member starts
itself (its ``own_start`` groups the file lacks: Diff's ``λ`` and sub-norm, a gate) with the
member's own values, so that a softmax checkpoint loads strictly; one log line per load reports
what was generated and what kept its start. A DnA negative branch in the file that the
member has no place for (a DnA file into a softmax model) is not dropped: its keys are
unexpected, which a strict load refuses. An attention class the swap does not know is an
error naming it and its path, never skipped.

The negative branch starts by the same rule from the host's own weights at the swap, and again
after the host's ``init_weights`` (MMEngine's initialisation of a model trained from scratch
re-draws every projection and resets every norm): each replacement's ``init_weights`` runs its
class's own, then regenerates the negative branch from the positive one
(:class:`NegativeStart`).

The ``i``-th replaced attention (model order) is built as layer ``i`` of ``n``: Diff's
``λ_init`` follows it, Cog keeps softmax in the first and last one.
"""

from __future__ import annotations

import re
from typing import Callable, Optional, Union

import torch
from mmengine.logging import print_log
from mmengine.registry import MODELS, Registry
from torch import Tensor, nn

from ...errors import UnsupportedModelError
from ...family import NEGATIVE_INIT, NegativeInit, is_negative_key
from ..attention.builder import AttnCfg
from ..fitting import abbreviate, fill_own_start
from ..scopes import build_model, library_registries
from .hosts import CONTAINER_NAMES, HostSpec, StateDict, container_classes, host_specs


class _LoadReport:
    """Collects what the replacements' load hooks generated during one load; logs it once
    every replacement of the model has been loaded."""

    def __init__(self, total: int, attn_cfg: AttnCfg) -> None:
        self.total, self.attn_cfg = total, attn_cfg
        self.seen = 0
        self.converted: list[str] = []
        self.generated: list[str] = []
        self.started: list[str] = []

    def done_one(self) -> None:
        self.seen += 1
        if self.seen < self.total:
            return
        if self.converted or self.generated or self.started:
            shown = f': {abbreviate(self.generated, 6)}' if self.generated else ''
            kept = f'; kept {len(self.started)} at their start: {abbreviate(self.started, 6)}'
            print_log(
                f'with_attention ({self.attn_cfg}): {len(self.converted)} attention(s) read '
                f'from the host layout; generated {len(self.generated)} tensors{shown}'
                + (kept if self.started else ''),
                logger='current',
            )
        self.seen, self.converted, self.generated, self.started = 0, [], [], []

    def __call__(self, module: nn.Module, incompatible_keys: object) -> None:
        """The replacements' load post-hook: one more of them loaded."""
        self.done_one()


def _fit_family(
    replacement: nn.Module, spec: HostSpec, mapped: StateDict, neg_init: NegativeInit, source: str
) -> tuple[dict[str, Tensor], list[str], list[str]]:
    """Replacement-layout weights (``spec.to_replacement`` of the host's) with the family
    attention's part fitted to its class (:func:`adapt_attentions`: for DnA, the negative branch
    generated from softmax weights; ``spec.fit``) and, where ``mapped`` has the family's weights,
    completed by what the member starts itself (:func:`~dna_mm.models.fitting.own_start_keys`:
    each ``own_start`` group ``mapped`` has none of, at the member's current values, its start).
    Returns them, the keys generated and the keys kept at their start."""
    fp = spec.family_prefix
    family = spec.family(replacement)
    fam = {k[len(fp) :]: v for k, v in mapped.items() if k.startswith(fp)}
    fam, generated = spec.fit(family, fam, neg_init, source=source)
    started = fill_own_start(family, fam) if fam else []
    out = {k: v for k, v in mapped.items() if not k.startswith(fp)}
    out.update({fp + k: v for k, v in fam.items()})
    return out, [fp + k for k in generated], [fp + k for k in started]


class _LoadHook:
    """A replacement's load pre-hook: the keys under its prefix read from the host's layout
    (``spec.to_replacement``) and fitted (:func:`_fit_family`: DnA's negative branch generated,
    the member's ``own_start`` groups the file lacks kept at their start), so that every load,
    strict ones included, finds each key of the replacement; what it converted, generated and
    kept goes to ``report``. A negative branch the replacement has no place for (a DnA file into
    a softmax, sigmoid, ... model, or into a DnA variant without ``Q-`` / ``V-``) is not loaded and
    its keys are *unexpected*, as any key a model lacks: a strict load stops on them (a file
    converted on purpose: ``tools/model_converters/convert_checkpoint.py``). A module-level
    class, so a swapped model pickles."""

    def __init__(self, spec: HostSpec, report: _LoadReport, neg_init: NegativeInit) -> None:
        self.spec, self.report, self.neg_init = spec, report, neg_init

    def __call__(
        self,
        module: nn.Module,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        keys = [k for k in state_dict if k.startswith(prefix)]
        if not keys:
            return
        sub = {k[len(prefix) :]: state_dict[k] for k in keys}
        mapped = self.spec.to_replacement(sub)
        source = f'state dict of {prefix[:-1] or "the model"}'
        weights, generated, started = _fit_family(module, self.spec, mapped, self.neg_init, source)
        for k in keys:
            del state_dict[k]
        state_dict.update({prefix + k: v for k, v in weights.items()})
        unexpected_keys += [prefix + k for k in mapped if k not in weights]  # dropped by the fit
        if mapped.keys() != sub.keys():
            self.report.converted.append(prefix[:-1])
        self.report.generated += [prefix + k for k in generated]
        self.report.started += [prefix + k for k in started]


class NegativeStart:
    """A replacement's ``init_weights``: its class's own (if it has one), then its family
    attention's negative branch regenerated from the positive one by the swap's rule (the
    replacement's own weights fitted as softmax weights: ``Q- = q_neg_scale · Q``, ``V- =
    v_neg_scale · V``, ``α``; MViTv2's negative pooling from the positive one). MMEngine calls it
    after the host's own initialisation (a parent's ``init_cfg``), so a DnA model trained from
    scratch starts where one swapped from softmax weights does."""

    def __init__(self, module: nn.Module, spec: HostSpec, neg_init: NegativeInit) -> None:
        self.module, self.spec, self.neg_init = module, spec, neg_init

    def __call__(self) -> None:
        module, fp = self.module, self.spec.family_prefix
        own_init = getattr(type(module), 'init_weights', None)
        if own_init is not None:
            own_init(module)
        family = module.get_submodule(fp[:-1]) if fp else module
        if not getattr(family, 'has_negative_branch', False):
            return
        tensors = module.state_dict(keep_vars=True)
        positive = {
            k: v.detach()
            for k, v in tensors.items()
            if not (k.startswith(fp) and is_negative_key(k[len(fp) :]))
        }
        weights, generated, _ = _fit_family(module, self.spec, positive, self.neg_init, 'init_weights')
        with torch.no_grad():
            for k in generated:
                tensors[k].copy_(weights[k])


def _is_ours(module: nn.Module) -> bool:
    return type(module).__module__.startswith('dna_mm.')


_ATTENTION_WORDS = re.compile(r'attention|attn', re.IGNORECASE)  # *Attention*, *SelfAttn*, ...
_ATTENTION_ACRONYMS = re.compile(r'MSA|MHSA|MHA(?![a-z])')  # WindowMSA, ShiftWindowMSA, MHSA, MHA
_ROTARY = re.compile(r'[Rr]otary|RoPE|Rope(?![a-z])')  # RotaryEmbeddingCat, MRoPE, ...; not Europe


def is_container(module: nn.Module, containers: Optional[tuple[type, ...]] = None) -> bool:
    """A block whose class name looks like attention but which reaches its attention only by
    calling it, so the swap walks through it: MMAction2 UniFormerV2's
    ``ResidualAttentionBlock``, and any class named as in
    :data:`~.hosts.CONTAINER_NAMES` (CLIP's block, OpenCLIP's attentional pooler) whose ``attn``
    is an ``nn.MultiheadAttention``. ``containers``: :func:`~.hosts.container_classes`, when the
    caller has them (the swap resolves them once, not per module)."""
    if type(module) in (container_classes() if containers is None else containers):
        return True
    return (
        type(module).__name__ in CONTAINER_NAMES
        and type(getattr(module, 'attn', None)) is nn.MultiheadAttention
    )


def _looks_like_attention(module: nn.Module) -> bool:
    """Attention by its class name: containing "Attention" or "Attn" (any case; mmcv / torch
    ``MultiheadAttention``, ``*SelfAttention``, timm ``AttentionPoolLatent``, ...), or one of
    the acronyms "MSA" / "MHSA" / "MHA" in capitals (MMDetection's Swin ``WindowMSA`` /
    ``ShiftWindowMSA``), or any ``nn.MultiheadAttention`` subclass whatever its name."""
    name = type(module).__name__
    return bool(_ATTENTION_WORDS.search(name) or _ATTENTION_ACRONYMS.search(name)) or isinstance(
        module, nn.MultiheadAttention
    )


def _rotary_modules(model: nn.Module) -> list[str]:
    """Paths of rotary position embedding modules (timm ``RotaryEmbedding*``: an EVA built
    with ``use_rot_pos_emb=True`` hands their output to every attention as ``rope``)."""
    return [
        f'{name or "<root>"} ({type(m).__name__})'
        for name, m in model.named_modules()
        if _ROTARY.search(type(m).__name__) and not _is_ours(m)
    ]


def swap_attention(
    model: nn.Module,
    attn_cfg: AttnCfg = 'dna',
    q_neg_scale: float = NEGATIVE_INIT.q_neg_scale,
    v_neg_scale: float = NEGATIVE_INIT.v_neg_scale,
) -> list[str]:
    """Replace every supported host attention of ``model`` in place; returns their names.

    Raises:
        ValueError: ``model`` has an attention-like module (:func:`_looks_like_attention`,
            outside dna_mm's own modules) the swap does not support: the message names each
            class and path and lists the supported hosts; or ``model`` has rotary position
            embeddings (the family attention has none); or a host uses what the family
            attention lacks (``qk_norm``, ...); or a host adds a position bias (a bias table,
            relative positions, a shared bias) and the member declares
            ``takes_position_bias = False``; or ``model`` has no attention at all. Nothing is
            replaced when it raises.
    """
    specs, containers = host_specs(), container_classes()
    hosts: list[tuple[str, nn.Module]] = []
    unsupported: list[str] = []
    skip: list[str] = []  # subtrees already handled (hosts, dna_mm modules)
    for name, module in model.named_modules():
        if any(name.startswith(p + '.') for p in skip):
            continue
        if type(module) in specs:
            hosts.append((name, module))
            skip.append(name)
        elif _is_ours(module):
            skip.append(name)
        elif is_container(module, containers):
            continue
        elif _looks_like_attention(module):
            unsupported.append(f'{name or "<root>"} ({type(module).__module__}.{type(module).__name__})')
            skip.append(name)
    if unsupported:
        raise UnsupportedModelError(
            f'with_attention: unsupported attention module(s): {abbreviate(unsupported, 8, "; ", " ")}. '
            f'Supported hosts: {", ".join(s.name for s in specs.values())}'
        )
    rotary = _rotary_modules(model) if hosts else []
    if rotary:
        raise UnsupportedModelError(
            'with_attention: rotary position embeddings are not supported by the swapped '
            f'attention (found {"; ".join(rotary[:4])}); build the model without them '
            '(timm EVA: use_rot_pos_emb=False)'
        )
    if not hosts:
        raise UnsupportedModelError(
            f'with_attention: {type(model).__name__} has no attention to swap '
            f'(supported hosts: {", ".join(s.name for s in specs.values())})'
        )
    report = _LoadReport(len(hosts), attn_cfg)
    neg_init = NegativeInit(q_neg_scale, v_neg_scale)
    built: list[nn.Module] = []  # every replacement first: a host refused leaves the model as it was
    shared = {spec: spec.shared_bias(model) for spec in {specs[type(host)] for _, host in hosts}}
    for i, (name, host) in enumerate(hosts):
        spec = specs[type(host)]
        new = spec.build(host, attn_cfg, i, len(hosts), shared[spec])
        like = next(host.parameters(), None)
        if like is not None:  # the host's device and dtype (a float64 or CUDA model stays so)
            new.to(device=like.device, dtype=like.dtype)
        new.train(host.training)
        mapped = spec.to_replacement(host.state_dict())  # the host's weights, read as a checkpoint
        weights, _, _ = _fit_family(new, spec, mapped, neg_init, f'the host {name or "<root>"}')
        new.load_state_dict({**new.state_dict(), **weights})  # what the host lacks keeps its init
        new._register_load_state_dict_pre_hook(_LoadHook(spec, report, neg_init), with_module=True)
        new.register_load_state_dict_post_hook(report)
        new.init_weights = NegativeStart(new, spec, neg_init)  # after the host's own (MMEngine)
        built.append(new)
    for (name, _), new in zip(hosts, built, strict=True):
        parent, _, child = name.rpartition('.')
        setattr(model.get_submodule(parent) if parent else model, child, new)
    return [name for name, _ in hosts]


def with_attention(
    model: Union[dict, nn.Module],
    attn_cfg: AttnCfg = 'dna',
    q_neg_scale: float = NEGATIVE_INIT.q_neg_scale,
    v_neg_scale: float = NEGATIVE_INIT.v_neg_scale,
    registry: Registry = MODELS,
    **kwargs,
) -> nn.Module:
    """Build ``model`` (a config of any library, or a module) and swap its attention.

    Args:
        model: The model or backbone config of the base (``{{_base_.model}}``), or a module.
        attn_cfg: The attention: ``'dna' | 'softmax' | 'diff' | 'cog'`` or a config such as
            ``dict(type='DnAAttention', variant='qpm_v')``.
        q_neg_scale, v_neg_scale: Scales of the negative branch generated from softmax
            weights (default: the authors', :data:`~dna_mm.family.NEGATIVE_INIT`).
        registry: The registry ``with_attention`` was reached through (each library's
            ``MODELS`` holds its own ``with_attention``, :func:`register_in_libraries`); the
            ``model`` config is built as :func:`~dna_mm.models.scopes.build_model` says.

    Returns:
        The built model itself (no wrapper), its attentions replaced.
    """
    if kwargs:
        raise TypeError(
            f'with_attention: unexpected arguments {sorted(kwargs)} (put the model\'s '
            f'own arguments inside model=dict(...))'
        )
    if isinstance(model, dict):
        model = build_model(model, registry)
    swap_attention(model, attn_cfg, q_neg_scale, v_neg_scale)
    return model


def _reached_through(registry: Registry) -> Callable[..., nn.Module]:
    """:func:`with_attention` as registered in ``registry``: its ``model`` is looked up there."""

    def with_attention_in(model: Union[dict, nn.Module], **kwargs: object) -> nn.Module:
        return with_attention(model, registry=registry, **kwargs)

    with_attention_in.__doc__ = with_attention.__doc__
    return with_attention_in


def register_in_libraries() -> None:
    """``with_attention`` in the root ``MODELS`` and in each installed library's
    (:func:`~dna_mm.models.scopes.library_registries`), so that ``mmaction.registry.MODELS``
    builds its ``model`` from MMAction2's models, without a default scope as with one."""
    MODELS.register_module(name='with_attention', module=with_attention)
    for registry in library_registries().values():
        registry.register_module(name='with_attention', module=_reached_through(registry))


register_in_libraries()
