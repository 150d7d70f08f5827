"""``optim_wrapper.clip_grad`` and ``optim_wrapper.paramwise_cfg`` are checked before anything is
built (:func:`dna_mm.config.check_config`, ``mode='train'``): mmengine's ``OptimWrapper`` passes
``clip_grad`` on to torch's ``clip_grad_norm_`` / ``clip_grad_value_``, where a typo (``norm_typ``)
is a ``TypeError`` at the first iteration; its ``DefaultOptimWrapperConstructor`` reads the
``paramwise_cfg`` keys it knows and drops the others, and copies a ``custom_keys`` entry's
options into the parameter group, where torch ignores a typo (``lr_mul``): both train silently
without the setting; it multiplies the lr / weight decay by the ``*_mult`` values, where torch
takes a negative product without a word. A key the wrapper does not take (``clip_gra``) is a
``TypeError`` once the model is built, one naming no valid key from ``AutoAmpOptimWrapper``'s
``**kwargs``. Each is one line naming the key, the closest valid name suggested."""

from __future__ import annotations

import glob
import inspect
import re

import pytest
import torch
from conftest import DEMO_CONFIG, REPO
from mmengine.config import Config
from mmengine.optim import AmpOptimWrapper, DefaultOptimWrapperConstructor, OptimWrapper

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.config.check.optim import PARAMWISE_KEYS
from dna_mm.config.check.optim_wrapper import BUILD_KEYS
from dna_mm.errors import ConfigError

LSJ = str(REPO / 'configs' / 'vitdet_dna_coco_lsj.py')  # LayerDecayOptimizerConstructor
#: AdamW's own options as the message lists them: its keyword arguments, of this torch
ADAMW_OWN = ', '.join(
    p for p in inspect.signature(torch.optim.AdamW.__init__).parameters if p not in ('self', 'params')
)


def _refused(cfg: Config, mode: str = 'train') -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg, mode)
    return str(err.value)


def _demo(**wrapper) -> Config:
    """The demo config (AdamW, ``clip_grad=dict(max_norm=5, norm_type=2)``) with ``wrapper``'s
    keys set on its ``optim_wrapper`` (``None``: removed)."""
    cfg = Config.fromfile(DEMO_CONFIG)
    for key, value in wrapper.items():
        if value is None:
            cfg.optim_wrapper.pop(key)
        else:
            cfg.optim_wrapper[key] = value
    return cfg


#: ``(optim_wrapper keys, what the error says)``
REFUSED = [
    (
        dict(clip_grad=dict(max_norm=5, norm_typ=2)),
        "optim_wrapper.clip_grad.norm_typ is not an argument of torch's clip_grad_norm_ (clip_grad type "
        "'norm') (did you mean 'norm_type'? valid: max_norm, norm_type, error_if_nonfinite, foreach)",
    ),
    (
        dict(clip_grad=dict(type='nrom', max_norm=5)),
        "optim_wrapper.clip_grad.type must be 'norm' (clip_grad_norm_, the default) or 'value' "
        "(clip_grad_value_), got 'nrom' (did you mean 'norm'?)",
    ),
    (
        dict(clip_grad=dict(type='value', clip_vlaue=1.0)),
        "optim_wrapper.clip_grad.clip_vlaue is not an argument of torch's clip_grad_value_ (clip_grad "
        "type 'value') (did you mean 'clip_value'? valid: clip_value, foreach); "
        'optim_wrapper.clip_grad needs clip_value (an argument clip_grad_value_ requires)',
    ),
    (
        dict(clip_grad=dict(norm_type=2)),
        'optim_wrapper.clip_grad needs max_norm (an argument clip_grad_norm_ requires)',
    ),
    (
        dict(clip_grad=5),  # --cfg-options optim_wrapper.clip_grad=5: mmengine's assertion
        "optim_wrapper.clip_grad must be None (no clipping) or a dict of the arguments of torch's "
        "clip_grad_norm_ (e.g. dict(max_norm=1.0)) or, with type='value', of clip_grad_value_, got 5",
    ),
    (
        dict(paramwise_cfg=dict(bias_decay_mul=0.0)),
        "optim_wrapper.paramwise_cfg.bias_decay_mul is not a key mmengine's DefaultOptimWrapperConstructor "
        "reads (did you mean 'bias_decay_mult'? valid: custom_keys, bias_lr_mult, bias_decay_mult, "
        'norm_decay_mult, dwconv_decay_mult, flat_decay_mult, bypass_duplicate, dcn_offset_lr_mult)',
    ),
    (
        dict(paramwise_cfg=dict(custom_keys={'cls_head': dict(lr_mul=10)})),
        "optim_wrapper.paramwise_cfg.custom_keys['cls_head'].lr_mul is not an option of a custom key "
        f"(did you mean 'lr_mult'? valid: lr_mult, decay_mult, or AdamW's own: {ADAMW_OWN})",
    ),
    (
        # SGD's option on AdamW: copied into the group, ignored by AdamW
        dict(paramwise_cfg=dict(custom_keys={'backbone.time_embed': dict(decay_mult=0.0, momentum=0.9)})),
        "optim_wrapper.paramwise_cfg.custom_keys['backbone.time_embed'].momentum is not an option of a "
        f"custom key (valid: lr_mult, decay_mult, or AdamW's own: {ADAMW_OWN})",
    ),
    (
        dict(paramwise_cfg=dict(custom_keys={'cls_head': 10})),
        "optim_wrapper.paramwise_cfg.custom_keys['cls_head'] must be a dict of options (lr_mult, "
        'decay_mult, ...), got 10',
    ),
    (
        dict(paramwise_cfg=dict(custom_keys=['cls_head'])),
        'optim_wrapper.paramwise_cfg.custom_keys must be a dict (a part of a parameter name -> its '
        "options), got ['cls_head']",
    ),
]


def _wrapper_keys(*classes: type) -> str:
    """The keys of a wrapper of ``classes`` (its own, then its parents') as the message lists them:
    mmengine's build keys around the arguments of their ``__init__``, of this mmengine."""
    arguments = [
        p for c in classes for p in inspect.signature(c.__init__).parameters if p not in ('self', 'kwargs')
    ]
    return ', '.join(dict.fromkeys([*BUILD_KEYS[:2], *arguments, *BUILD_KEYS[2:]]))


#: an ``AmpOptimWrapper``'s / ``AutoAmpOptimWrapper``'s (the demo's) keys, an ``OptimWrapper``'s
AMP_KEYS = _wrapper_keys(AmpOptimWrapper, OptimWrapper)
WRAPPER_KEYS = _wrapper_keys(OptimWrapper)
MULTIPLIERS = ('bias_lr_mult', 'bias_decay_mult', 'norm_decay_mult', 'dwconv_decay_mult', 'flat_decay_mult')


def _multiplier(key: str, value: float = -1) -> str:
    setting = 'lr' if key.endswith('lr_mult') else 'weight_decay'
    return (
        f"{key} must be a number >= 0 (it multiplies the optimizer's {setting}: a negative one makes the "
        f"parameters' {setting} negative), got {value}"
    )


#: ``(optim_wrapper keys, what the error says)``: a value of ``paramwise_cfg`` mmengine takes
#: without a word (a negative lr or weight decay), a wrapper key the wrapper does not take
REFUSED_VALUES = [
    *[(dict(paramwise_cfg={k: -1}), _multiplier(f'optim_wrapper.paramwise_cfg.{k}')) for k in MULTIPLIERS],
    (
        dict(paramwise_cfg=dict(dcn_offset_lr_mult=-0.5)),
        _multiplier('optim_wrapper.paramwise_cfg.dcn_offset_lr_mult', -0.5),
    ),
    *[
        (
            dict(paramwise_cfg=dict(custom_keys={'cls_head': {k: -1}})),
            _multiplier(f"optim_wrapper.paramwise_cfg.custom_keys['cls_head'].{k}"),
        )
        for k in ('lr_mult', 'decay_mult')
    ],
    (
        dict(paramwise_cfg=dict(norm_decay_mult='abc')),
        _multiplier('optim_wrapper.paramwise_cfg.norm_decay_mult', "'abc'"),
    ),
    # the audit's: the TypeError of the AutoAmpOptimWrapper (**kwargs) named no valid key
    (
        dict(clip_gra=dict(max_norm=5)),
        "optim_wrapper.clip_gra is not a key of the optim wrapper AutoAmpOptimWrapper (did you mean "
        f"'clip_grad'? valid: {AMP_KEYS})",
    ),
    (
        dict(paramwise_cf=dict(norm_decay_mult=0.0)),
        "optim_wrapper.paramwise_cf is not a key of the optim wrapper AutoAmpOptimWrapper (did you mean "
        f"'paramwise_cfg'? valid: {AMP_KEYS})",
    ),
    (
        dict(type='OptimWrapper', accumulative_count=2, dtype='float16'),
        "optim_wrapper.accumulative_count is not a key of the optim wrapper OptimWrapper (did you mean "
        f"'accumulative_counts'? valid: {WRAPPER_KEYS}); optim_wrapper.dtype is not a key of the optim "
        'wrapper OptimWrapper (full precision): it is an argument of AmpOptimWrapper (mixed precision); '
        "drop it, or set optim_wrapper.type='AutoAmpOptimWrapper'",
    ),
]


@pytest.mark.parametrize('wrapper, message', REFUSED + REFUSED_VALUES)
def test_a_clip_grad_or_paramwise_mistake_is_named(wrapper, message) -> None:
    assert _refused(_demo(**wrapper)) == message


def test_a_key_of_mmengines_amp_wrapper_is_named_with_its_valid_ones() -> None:
    """mmengine's ``AmpOptimWrapper`` (its ``__init__`` takes ``**kwargs`` for ``OptimWrapper``'s):
    the key beside the GPU it needs (this machine's, if it has none); a test run builds no wrapper."""
    cfg = _demo(type='AmpOptimWrapper', clip_gra=dict(max_norm=5))
    assert _refused(cfg).split('; ')[-1] == (
        "optim_wrapper.clip_gra is not a key of the optim wrapper AmpOptimWrapper (did you mean "
        f"'clip_grad'? valid: {AMP_KEYS})"
    )
    check_config(cfg, 'test')


def test_the_layer_decay_constructors_keys_and_custom_keys() -> None:
    cfg = Config.fromfile(LSJ)
    assert cfg.optim_wrapper.constructor == 'LayerDecayOptimizerConstructor'
    cfg.optim_wrapper.paramwise_cfg.decay_rat = 0.7
    cfg.optim_wrapper.paramwise_cfg.custom_keys = {'backbone.pos_embed': dict(decay_mul=0.0)}
    assert _refused(cfg) == (
        "optim_wrapper.paramwise_cfg.decay_rat is not a key dna_mm's LayerDecayOptimizerConstructor "
        "reads (did you mean 'decay_rate'? valid: num_layers, decay_rate, decay_type, custom_keys); "
        "optim_wrapper.paramwise_cfg.custom_keys['backbone.pos_embed'].decay_mul is not an option of "
        f"a custom key (did you mean 'decay_mult'? valid: lr_mult, decay_mult, or AdamW's own: {ADAMW_OWN})"
    )
    cfg = Config.fromfile(LSJ)
    cfg.optim_wrapper.paramwise_cfg.custom_keys = {'backbone.pos_embed': dict(decay_mult=-1.0)}
    assert _refused(cfg) == _multiplier(
        "optim_wrapper.paramwise_cfg.custom_keys['backbone.pos_embed'].decay_mult", -1.0
    )
    # mmengine's keys, which the layer-decay constructor does not read
    cfg = Config.fromfile(LSJ)
    cfg.optim_wrapper.paramwise_cfg.bias_decay_mult = 0.0
    assert "paramwise_cfg.bias_decay_mult is not a key dna_mm's LayerDecayOptimizerConstructor" in _refused(
        cfg
    )


def test_each_wrapper_of_a_multi_optimizer_config() -> None:
    """``optim_wrapper.<name>``: one wrapper per module (its own constructor, mmengine's default)."""
    cfg = _demo()
    cfg.optim_wrapper = dict(
        constructor='MultiOptimWrapperConstructor',  # a user's own (MMagic's): not read
        backbone=dict(
            type='OptimWrapper',
            optimizer=dict(type='SGD', lr=0.1),
            clip_grad=dict(max_norm=1.0, norm_typ=2),
            paramwise_cfg=dict(custom_keys={'layers.0': dict(lr_mul=2.0)}),
        ),
        cls_head=dict(
            type='OptimWrapper', optimizer=dict(type='SGD', lr=0.1), paramwise_cfg=dict(norm_decay_mul=0.0)
        ),
    )
    sgd = 'lr, momentum, dampening, weight_decay, nesterov, maximize, foreach, differentiable, fused'
    assert _refused(cfg).split('; ') == [
        "optim_wrapper.backbone.clip_grad.norm_typ is not an argument of torch's clip_grad_norm_ "
        "(clip_grad type 'norm') (did you mean 'norm_type'? valid: max_norm, norm_type, "
        'error_if_nonfinite, foreach)',
        "optim_wrapper.backbone.paramwise_cfg.custom_keys['layers.0'].lr_mul is not an option of a "
        f"custom key (did you mean 'lr_mult'? valid: lr_mult, decay_mult, or SGD's own: {sgd})",
        "optim_wrapper.cls_head.paramwise_cfg.norm_decay_mul is not a key mmengine's "
        "DefaultOptimWrapperConstructor reads (did you mean 'norm_decay_mult'? valid: custom_keys, "
        'bias_lr_mult, bias_decay_mult, norm_decay_mult, dwconv_decay_mult, flat_decay_mult, '
        'bypass_duplicate, dcn_offset_lr_mult)',
    ]


class _AnyOptions(torch.optim.Optimizer):
    """An optimizer whose options cannot be told from its signature."""

    def __init__(self, params, **defaults) -> None:
        super().__init__(params, defaults)


def test_what_mmengine_and_torch_take_passes() -> None:
    ok = [
        dict(clip_grad=None),
        dict(clip_grad=dict(type='value', clip_value=1.0)),
        dict(clip_grad=dict(type='norm', max_norm=1.0, norm_type='inf', error_if_nonfinite=True)),
        dict(
            paramwise_cfg=dict(
                norm_decay_mult=0.0,
                flat_decay_mult=0.0,
                bypass_duplicate=True,
                custom_keys={'cls_head': dict(lr_mult=10, decay_mult=0.0, lr=1e-3, betas=(0.9, 0.99))},
            )
        ),
        # a user's own constructor reads what it likes
        dict(constructor='MyConstructor', paramwise_cfg=dict(layer_decay=0.75, anything=1)),
        dict(constructor='MyConstructor', my_key=1),
        # multipliers of 0 (frozen, not decayed); the wrappers' own keys
        dict(
            paramwise_cfg=dict(
                bias_lr_mult=0, dcn_offset_lr_mult=0.0, custom_keys={'cls_head': dict(lr_mult=0)}
            )
        ),
        dict(dtype='float16', loss_scale='dynamic', use_fsdp=False, accumulative_counts=2),
        dict(type='OptimWrapper', accumulative_counts=2),
    ]
    for wrapper in ok:
        check_config(_demo(**wrapper), 'train')
    # an optimizer whose options cannot be told: only the shape of custom_keys is checked
    cfg = _demo(paramwise_cfg=dict(custom_keys={'cls_head': dict(lr_mul=10)}))
    cfg.optim_wrapper.optimizer = dict(type=_AnyOptions, lr=0.1)
    check_config(cfg, 'train')
    cfg.optim_wrapper.paramwise_cfg.custom_keys['cls_head'] = 10
    assert _refused(cfg).startswith("optim_wrapper.paramwise_cfg.custom_keys['cls_head'] must be a dict")
    # a test run builds no optimizer
    check_config(
        _demo(clip_grad=dict(max_norm=5, norm_typ=2), paramwise_cfg=dict(bias_decay_mul=0.0)), 'test'
    )


def test_the_mistakes_mmengine_and_torch_would_meet() -> None:
    """What the check refuses: a ``TypeError`` at the first clipped step, or an option copied into
    the parameter group and ignored (the group keeps the base lr)."""
    layer = torch.nn.Linear(2, 2)
    wrapper = OptimWrapper(
        torch.optim.SGD(layer.parameters(), lr=0.1), clip_grad=dict(max_norm=1, norm_typ=2)
    )
    layer(torch.ones(1, 2)).sum().backward()
    with pytest.raises(TypeError, match='norm_typ'):
        wrapper.step()
    constructor = DefaultOptimWrapperConstructor(
        dict(optimizer=dict(type='SGD', lr=0.1)), dict(custom_keys={'weight': dict(lr_mul=10)})
    )
    group = next(g for g in constructor(layer).optimizer.param_groups if g['params'][0] is layer.weight)
    assert group['lr'] == 0.1 and group['lr_mul'] == 10


def test_what_mmengine_does_with_a_negative_multiplier_or_a_wrong_wrapper_key() -> None:
    """A negative multiplier: a negative lr / weight decay in the group, which torch steps with
    without a word; a key the wrapper does not take: a ``TypeError`` (from dna_mm's
    ``AutoAmpOptimWrapper`` too, on this machine's device, whichever it is)."""
    from dna_mm.engine.optim_wrapper import auto_amp_optim_wrapper

    layer = torch.nn.Linear(2, 2)
    constructor = DefaultOptimWrapperConstructor(
        dict(optimizer=dict(type='SGD', lr=0.1, weight_decay=1e-4)),
        dict(bias_decay_mult=-1.0, custom_keys={'weight': dict(lr_mult=-1.0)}),
    )
    wrapper = constructor(layer)
    groups = {id(g['params'][0]): g for g in wrapper.optimizer.param_groups}
    assert groups[id(layer.weight)]['lr'] == -0.1 and groups[id(layer.bias)]['weight_decay'] == -1e-4
    layer(torch.ones(1, 2)).sum().backward()
    wrapper.step()  # no word
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    for build in (OptimWrapper, auto_amp_optim_wrapper):
        with pytest.raises(TypeError, match='clip_gra'):
            build(optimizer=optimizer, clip_gra=dict(max_norm=1.0))


def test_the_paramwise_keys_are_those_the_constructors_read() -> None:
    """mmengine's: the ``paramwise_cfg.get`` calls of its ``add_params`` (an mmengine that reads
    another key fails here); dna_mm's layer decay names its own (its class's ``PARAMWISE_KEYS``,
    what its ``add_params`` checks)."""
    from dna_mm.engine import layer_decay

    source = inspect.getsource(DefaultOptimWrapperConstructor.add_params)
    read = re.findall(r"self\.paramwise_cfg\.get\('(\w+)'", source)
    default = 'mmengine.optim.optimizer.default_constructor.DefaultOptimWrapperConstructor'
    assert PARAMWISE_KEYS[default] == tuple(read)
    assert layer_decay.LayerDecayOptimizerConstructor.PARAMWISE_KEYS == layer_decay.PARAMWISE_KEYS


def test_the_example_configs_optim_wrappers_pass() -> None:
    """configs/examples (the zoo's wrappers: clip_grad, paramwise_cfg; the Swin one with
    MMAction2's own constructor, whose keys are its own); configs/ and configs/imagenet pass whole
    in test_config_values.py."""
    examples = sorted(glob.glob(str(REPO / 'configs' / 'examples' / '*.py')))
    assert len(examples) >= 5
    for path in examples:
        try:
            check_config(Config.fromfile(path), 'train')
        except ConfigError as err:  # a config made for testing; AmpOptimWrapper without a GPU
            assert 'clip_grad' not in str(err) and 'paramwise_cfg' not in str(err), path


def test_every_shipped_configs_wrapper_passes_the_key_and_multiplier_checks() -> None:
    """configs/, configs/imagenet/ and configs/examples/ (the zoo's wrappers: MMAction2's
    ``AmpOptimWrapper`` and constructors, MMDetection's ``OptimWrapper``): their wrapper's keys and
    ``paramwise_cfg`` multipliers pass as they ship (a config made for testing has no wrapper)."""
    from dna_mm.config.check.optim import wrapper_problems

    configs = sorted(
        [
            *(REPO / 'configs').glob('*.py'),
            *(REPO / 'configs' / 'imagenet').glob('*.py'),
            *(REPO / 'configs' / 'examples').glob('*.py'),
        ]
    )
    checked = 0
    for path in configs:
        cfg = Config.fromfile(str(path))
        wrapper = cfg.get('optim_wrapper') or {}
        if isinstance(wrapper.get('optimizer'), dict):
            assert wrapper_problems(cfg, wrapper, 'optim_wrapper.') == [], path
            checked += 1
    assert checked > 40


def test_a_custom_keys_option_of_its_own_passes() -> None:
    """A key of a custom key that is close to no option and is no option of torch's optimizers is
    the parameter group's own, which a hook or the optimizer reads from it (MMPretrain's LARS its
    ``lars_exclude``, its ``SimSiamHook`` ``fix_lr``); SGD's ``momentum`` under AdamW is named."""
    cfg = _demo(paramwise_cfg=dict(custom_keys={'cls_head': dict(lars_exclude=True, fix_lr=True)}))
    cfg.label_map = None
    check_config(cfg, 'train')
    cfg.optim_wrapper.paramwise_cfg.custom_keys.cls_head['momentum'] = 0.9
    assert _refused(cfg).startswith("optim_wrapper.paramwise_cfg.custom_keys['cls_head'].momentum is not an")


@pytest.mark.parametrize(
    'paramwise, named',
    [
        (dict(norm_decay_mult=0.0), 'optim_wrapper.paramwise_cfg.norm_decay_mult'),
        (
            dict(custom_keys={'cls_head': dict(decay_mult=0.0)}),
            "optim_wrapper.paramwise_cfg.custom_keys['cls_head'].decay_mult",
        ),
    ],
)
def test_a_decay_multiplier_without_the_optimizers_weight_decay_is_named(paramwise, named) -> None:
    """mmengine's constructor multiplies the config's ``weight_decay`` (not the optimizer's own
    default): without it, ``ValueError: base_wd should not be None`` once the model is built."""
    cfg = _demo(paramwise_cfg=paramwise)
    cfg.label_map = None
    check_config(cfg, 'train')  # the demo gives weight_decay
    cfg.optim_wrapper.optimizer.pop('weight_decay')
    assert _refused(cfg) == (
        f'{named} multiplies optim_wrapper.optimizer.weight_decay, which the config does not give '
        "(mmengine's DefaultOptimWrapperConstructor raises \"base_wd should not be None\" once the model "
        'is built): set it'
    )
    with pytest.raises(ValueError, match='base_wd should not be None'):
        DefaultOptimWrapperConstructor(dict(cfg.optim_wrapper), cfg.optim_wrapper.paramwise_cfg)
