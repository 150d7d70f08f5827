"""``--cfg-options`` that would change nothing, found before they are merged
(:func:`~dna_mm.config.build.merge_options`): a new top-level key nothing reads (a typo such as
``train_cfgg.max_epochs``), and a variable of the config file (``num_classes``, ``max_epochs``,
``data_root``), whose values the file's keys took when it was read, so that setting it changes
none of them.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterator

from mmengine.config import Config

#: top-level keys read by mmengine's runner beyond its ``__init__`` arguments (which
#: ``Runner.from_cfg`` takes from the config by name): model wrapping, compiling, its builder
RUNNER_KEYS = (
    'compile',
    'model_wrapper_cfg',
    'find_unused_parameters',
    'sync_bn',
    'activation_checkpointing',
    'efficient_conv_bn_eval',
    'runner_type',
)
#: top-level keys dna_mm's runner and tools read
DNA_MM_KEYS = (
    'custom_imports',
    'label_map',
    'test_pipeline',
    'global_batch_size',
    'test_only',
    'load_partial',
    'log_setup_to_console',
)


def read_keys() -> list[str]:
    """The top-level config keys that code reads: mmengine's runner and dna_mm's."""
    import inspect

    from mmengine.runner import Runner

    init = [p for p in inspect.signature(Runner.__init__).parameters if p not in ('self', 'cfg')]
    return list(dict.fromkeys([*init, *RUNNER_KEYS, *DNA_MM_KEYS]))


def option_problems(cfg: Config, options: dict) -> tuple[list[str], list[str]]:
    """What ``options`` (``--cfg-options``, ``{'a.b': 1}``) would set to no effect in ``cfg``: a
    top-level key that neither mmengine's runner nor dna_mm reads, as ``(errors, notes)``. It is
    an error where what was meant can be named, else a note:

    * a new key close to a key of the config or one that is read (a typo:
      ``train_cfgg.max_epochs`` for ``train_cfg.max_epochs``);
    * a key that only names keys below (``num_classes=10``: ``model.cls_head.num_classes``), or a
      variable of the config file, whose keys took its value when the file was read, so that
      setting it changes none of them (``data_root=/data``: the keys whose value it begins, or of
      its name).
    """
    read = read_keys()
    tree = cfg._cfg_dict.to_dict()
    errors, notes = [], []
    for option in options:
        top = option.split('.', 1)[0]
        if top in read or top.startswith('_'):
            continue
        new = top not in cfg
        near = difflib.get_close_matches(top, [*read, *cfg.keys()], n=1, cutoff=0.75) if new else []
        if new and near:
            errors.append(
                f'--cfg-options {option}: {top!r} is not a key of the config, nor one that mmengine\'s '
                f"runner or dna_mm reads; did you mean {near[0]!r}?"
            )
            continue
        if '.' in option and not new:  # a part of a dict of the config's: its own business
            continue
        uses = _uses(tree, top, None if new else tree[top])
        uses = [u for u in uses if u.split('.', 1)[0] in read] or uses  # those a run reads first
        what = (
            f'{top!r} is not a key of the config, nor one that mmengine\'s runner or dna_mm reads'
            if new
            else f'{top!r} is a variable of the config file, used when the file was read: setting it '
            f'changes nothing'
        )
        if uses:
            more = f' (and {len(uses) - 3} more)' if len(uses) > 3 else ''
            errors.append(f'--cfg-options {option}: {what}; set {" / ".join(uses[:3])}{more} instead')
        else:
            notes.append(f'--cfg-options {option}: {what}')
    return errors, notes


def _uses(tree: dict, name: str, value: Any) -> list[str]:
    """The keys below the top level of ``tree`` that variable ``name`` (of ``value``; ``None``: a
    new key) would have set: of the same name, or (a string value of 3 characters or more)
    whose string value contains it."""
    out = []
    for path, leaf in _leaf_paths(tree, ''):
        named = path.rsplit('.', 1)[-1] == name
        text = isinstance(value, str) and len(value) >= 3 and isinstance(leaf, str) and value in leaf
        if named or text:
            out.append(path)
    return out


def _leaf_paths(node: Any, key: str) -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of every key below the top level of ``node`` (list items by
    index: ``a.0.b``, as ``--cfg-options`` takes them)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for name, value in items:
        path = f'{key}.{name}' if key else str(name)
        if key:
            yield path, value
        yield from _leaf_paths(value, path)
