"""The run's environment, randomness and compilation, and the keys mmengine reads only as it
merges, checked before anything is built (:func:`dna_mm.config.check.check_config`):

* ``randomness``' keys: those of mmengine's ``Runner.set_randomness``; ``randomness.seed`` an int
  in [0, 2**32) (NumPy's seeds) or None, with ``diff_rank_seed`` one that leaves room for every
  rank's ``seed + rank`` (``WORLD_SIZE``);
* ``env_cfg``'s keys: those mmengine's ``Runner.setup_env`` reads, ``env_cfg.mp_cfg``'s (its
  ``set_multi_processing``) and ``env_cfg.dist_cfg``'s (mmengine's ``init_dist`` and torch's
  ``init_process_group``, which take them in a distributed run only: a typo such as ``timeot``
  would be silent on one machine and stop every rank on a cluster);
* ``_delete_`` in a dict that is an item of a list (``param_scheduler = [dict(_delete_=True,
  ...)]``): mmengine reads ``_delete_`` only as it merges a child's dict into its base's, a
  child's list replaces the base's whole, so the item would pass it on to what it builds (a
  ``TypeError`` traceback); in ``mode='test'``, outside the keys only training reads;
* ``compile`` (mmengine compiles ``train_step`` with it): ``True`` / ``False``, or a dict of
  ``torch.compile``'s keyword arguments (``backend``, ``mode``, ...), a misspelt one with the
  closest valid name; mmengine would stop on it with an assertion after building everything.
* a top-level key close to one that mmengine's runner or dna_mm reads but not one of them
  (``randomnes``, ``load_fro``, ``resum``): dropped without a word otherwise.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Any, Iterator

from .values import unknown_keys


def randomness_problems(randomness: Any) -> list[str]:
    """``randomness``' keys against mmengine's ``Runner.set_randomness`` (a typo would be a
    ``TypeError`` as the runner is made) and its ``seed`` (NumPy refuses a float, a string or one
    outside [0, 2**32), there too)."""
    import inspect

    from mmengine.runner import Runner

    if not isinstance(randomness, dict):
        return []
    valid = [p for p in inspect.signature(Runner.set_randomness).parameters if p != 'self']
    out = unknown_keys(randomness, valid, 'randomness', "an argument of mmengine's Runner.set_randomness")
    seed = randomness.get('seed')
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32):
        out.append(
            f"randomness.seed must be an int in [0, 2**32) (NumPy's seeds) or None (a random one), "
            f'got {seed!r}'
        )
    elif seed is not None and randomness.get('diff_rank_seed'):
        ranks = int(os.environ.get('WORLD_SIZE', '1'))  # torchrun's; 1 on one process
        if seed + ranks - 1 >= 2**32:
            out.append(
                f'randomness.seed {seed} with diff_rank_seed: rank r seeds with seed + r, so on {ranks} '
                f"processes the seed must be below {2**32 - ranks + 1} (NumPy's seeds end at 2**32 - 1)"
            )
    return out


def env_problems(env_cfg: Any) -> list[str]:
    """``env_cfg``'s keys, its ``mp_cfg``'s and its ``dist_cfg``'s, against what mmengine's runner
    passes them to (the module docstring)."""
    import inspect

    import torch.distributed as dist
    from mmengine.dist import utils as dist_utils
    from mmengine.runner import Runner
    from mmengine.utils.dl_utils import set_multi_processing

    if not isinstance(env_cfg, dict):
        return []
    read = list(dict.fromkeys(re.findall(r"env_cfg\.get\('(\w+)'", inspect.getsource(Runner.setup_env))))
    out = unknown_keys(env_cfg, read, 'env_cfg', "a key mmengine's Runner.setup_env reads") if read else []
    mp_cfg, dist_cfg = env_cfg.get('mp_cfg'), env_cfg.get('dist_cfg')
    if isinstance(mp_cfg, dict):
        valid = [p for p in inspect.signature(set_multi_processing).parameters if p != 'distributed']
        out += unknown_keys(mp_cfg, valid, 'env_cfg.mp_cfg', "an argument of mmengine's set_multi_processing")
    if isinstance(dist_cfg, dict):
        launchers = (dist_utils.init_dist, dist_utils._init_dist_pytorch, dist_utils._init_dist_slurm)
        valid = [
            p for fn in launchers for p in inspect.signature(fn).parameters if p not in ('launcher', 'kwargs')
        ]
        valid = list(dict.fromkeys(valid + list(inspect.signature(dist.init_process_group).parameters)))
        what = "an argument of mmengine's init_dist or torch's init_process_group"
        out += unknown_keys(dist_cfg, [v for v in valid if not v.startswith('_')], 'env_cfg.dist_cfg', what)
    return out


#: the top-level keys only training reads (a test run's config may keep them as trained)
TRAINING_ONLY_KEYS = (
    'train_dataloader',
    'val_dataloader',
    'train_cfg',
    'val_cfg',
    'val_evaluator',
    'optim_wrapper',
    'param_scheduler',
    'auto_scale_lr',
)


def list_delete_problems(node: Any, key: str, in_list: bool = False) -> Iterator[str]:
    """Each ``_delete_`` in a dict that lies in a list (or a tuple) under ``node`` at ``key``
    (``param_scheduler = [dict(_delete_=True, ...)]``): mmengine's ``Config`` reads ``_delete_``
    only where it merges a child's dict into its base's dict, and a child's list replaces the
    base's whole, so the key stays in the item and is passed on to what it builds (a
    ``TypeError``, ``unexpected keyword argument '_delete_'``, a traceback). A ``_delete_`` in a
    dict value (not in a list) is mmengine's to read as it merges the dict into its base's, and is
    left alone here."""
    if isinstance(node, dict):
        if in_list and '_delete_' in node:
            yield (
                f"{key}._delete_: a list in a child config replaces the base's list whole: its items take "
                'no _delete_ (drop it)'
            )
        for name, value in node.items():
            if name != '_delete_':
                yield from list_delete_problems(value, f'{key}.{name}' if key else str(name), in_list)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from list_delete_problems(value, f'{key}[{i}]', True)


def compile_problems(value: Any) -> list[str]:
    """``compile``: ``None`` / a bool, or a dict whose keys ``torch.compile`` takes."""
    if value is None or isinstance(value, bool):
        return []
    if not isinstance(value, dict):
        return [
            f'compile must be True / False or a dict of torch.compile arguments '
            f"(e.g. dict(mode='max-autotune')), got {value!r}"
        ]
    import inspect

    import torch

    valid = [n for n in inspect.signature(torch.compile).parameters if n != 'model']
    out = unknown_keys(value, valid, 'compile', 'an argument of torch.compile')
    mode, backend = value.get('mode'), value.get('backend', 'inductor')
    if mode is not None:
        from torch._inductor import list_mode_options

        modes = list(list_mode_options())
        if mode not in modes:
            out.append(f'compile.mode must be one of {", ".join(modes)} (or None), got {mode!r}')
    if isinstance(backend, str):
        import torch._dynamo

        backends = torch._dynamo.list_backends(exclude_tags=())
        if backend not in backends:
            near = difflib.get_close_matches(backend, backends, n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            out.append(f'compile.backend {backend!r} is not one of torch\'s ({hint}{", ".join(backends)})')
    return out


def unread_key_problems(cfg: Any) -> list[str]:
    """Each top-level key of the config that neither mmengine's runner nor dna_mm reads and that is
    close to one they do (:func:`dna_mm.config.options.read_keys`): a misspelt ``randomnes``,
    ``load_fro`` or ``resum`` is dropped without a word (the run takes the default seed, no
    weights, no resume). The config file's own variables (``data_root``, ``clip_len``) are close to
    no read key and pass, as does a dict or list the file uses inside another key (MMAction2's
    omnisource ``image_dataloader``, in its ``train_cfg``)."""
    from ..options import STOCK_TOOL_KEYS, read_keys  # noqa: PLC0415

    read = read_keys()
    written = dict(dict.items(getattr(cfg, '_cfg_dict', cfg)))  # as written: imports unbuilt
    out = []
    for key, value in written.items():
        data = isinstance(value, (dict, list, tuple, str, int, float, bool)) or value is None
        taken = key in read or key in STOCK_TOOL_KEYS or str(key).startswith('_')
        if taken or not data:  # not data: a new-style config's import
            continue
        near = difflib.get_close_matches(str(key), read, n=1, cutoff=0.8)
        inside = [c for k, v in written.items() if k != key for c in _children(v)]  # not a twin of a key
        if near and not (isinstance(value, (dict, list, tuple)) and value and _held(value, inside)):
            out.append(  # (one the file uses inside another key is a variable: MMAction2's image_dataloader)
                f"{key} is not a key that mmengine's runner or dna_mm reads (did you mean {near[0]!r}?): "
                'its value would change nothing'
            )
    return out


def _children(node: Any) -> list:
    """The values of a dict, the items of a list; none for anything else."""
    return (
        list(node.values())
        if isinstance(node, dict)
        else list(node)
        if isinstance(node, (list, tuple))
        else []
    )


def _held(value: Any, nodes: list) -> bool:
    """Whether ``value`` is one of ``nodes`` or inside one of them (dicts and lists, at any depth)."""
    return any(node == value or _held(value, _children(node)) for node in nodes)
