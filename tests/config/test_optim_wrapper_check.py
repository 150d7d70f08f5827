"""``optim_wrapper.clip_grad`` and ``optim_wrapper.paramwise_cfg`` are checked before anything is
built (:func:`dna_mm.config.check_config`, ``mode='train'``): mmengine's ``OptimWrapper`` passes
``clip_grad`` on to torch's ``clip_grad_norm_`` / ``clip_grad_value_``, where a typo (``norm_typ``)
is a ``TypeError`` at the first iteration; its ``DefaultOptimWrapperConstructor`` reads the
``paramwise_cfg`` keys it knows and drops the others, and copies a ``custom_keys`` entry's
options into the parameter group, where torch ignores a typo (``lr_mul``): both train silently
without the setting. Each is one line naming the key, the closest valid name suggested."""

from __future__ import annotations

import glob
import inspect
import re

import pytest
import torch
from conftest import DEMO_CONFIG, REPO
from mmengine.config import Config
from mmengine.optim import DefaultOptimWrapperConstructor, OptimWrapper

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.config.check.optim import PARAMWISE_KEYS
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


@pytest.mark.parametrize('wrapper, message', REFUSED)
def test_a_clip_grad_or_paramwise_mistake_is_named(wrapper, message) -> None:
    assert _refused(_demo(**wrapper)) == message


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
