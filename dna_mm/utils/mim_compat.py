"""``_base_ = ['mmaction::…']`` with mmaction2 1.1.0 and mmengine 0.10.7.

mmengine resolves ``package::path`` through the package's ``.mim/model-index.yml`` and its
metafiles, calling ``model['Config'].partition('/')`` on every model entry. mmaction2
1.1.0's ``configs/localization/bsn/metafile.yml`` has one entry whose ``Config`` is a *list*
(BSN's three stage configs), so every ``mmaction::`` base fails with ``AttributeError:
'list' object has no attribute 'partition'`` before the config is read.

:func:`patch_mmengine` wraps mmengine's metafile reader (``_get_cfg_metainfo``, in
``mmengine.config.utils`` and ``mmengine.hub.hub``) in memory: the original runs first, and only
when it fails on such an entry is the index read again with a list's entries taken one by one.
``import dna_mm`` applies it (set ``DNA_MM_NO_MMENGINE_PATCH=1`` to leave mmengine untouched);
nothing is written to any installed package. A stock script that parses a config before it
imports dna_mm (``mmaction/.mim/tools/train.py``, ``mim train``) is run through
``python -m dna_mm.launch SCRIPT ARGS…``, which imports dna_mm first.
"""

from __future__ import annotations

import functools
import os
import os.path as osp
from typing import Any


def _normalised(model_cfg: dict) -> list[dict]:
    """A metafile model entry with one ``Config`` string per returned entry."""
    cfg = model_cfg.get('Config')
    if isinstance(cfg, (list, tuple)):
        return [dict(model_cfg, Config=c) for c in cfg if isinstance(c, str)]
    return [model_cfg]


def _tolerant_cfg_metainfo(package_path: str, cfg_path: str) -> dict:
    """mmengine's ``_get_cfg_metainfo`` with list-valued ``Config`` entries read one by one."""
    from mmengine.fileio import load

    meta_index = load(osp.join(package_path, '.mim', 'model-index.yml'))
    cfg_dict: dict[str, Any] = {}
    for meta_path in meta_index['Import']:
        cfg_meta = load(osp.join(package_path, '.mim', meta_path))
        for entry in cfg_meta['Models']:
            for model_cfg in _normalised(entry):
                if 'Config' not in model_cfg:
                    continue
                cfg_dict.setdefault(model_cfg['Config'].partition('/')[-1], model_cfg)
    if cfg_path not in cfg_dict:
        raise ValueError(f'Expected configs: {cfg_dict.keys()}, but got {cfg_path}')
    return cfg_dict[cfg_path]


def patch_mmengine() -> bool:
    """Wrap mmengine's ``_get_cfg_metainfo`` so that list-valued ``Config`` entries are read
    (idempotent). Returns whether the wrapper is in place (``DNA_MM_NO_MMENGINE_PATCH=1``: no)."""
    from mmengine.config import utils
    from mmengine.hub import hub  # imports the name itself (get_config / get_model)

    if os.environ.get('DNA_MM_NO_MMENGINE_PATCH') == '1':
        return False
    original = utils._get_cfg_metainfo
    if getattr(original, '__wrapped__', None) is not None:
        return True

    @functools.wraps(original)
    def _get_cfg_metainfo(package_path: str, cfg_path: str) -> dict:
        try:
            return original(package_path, cfg_path)
        except AttributeError:  # a list-valued ``Config`` (``.partition`` of a list)
            return _tolerant_cfg_metainfo(package_path, cfg_path)

    utils._get_cfg_metainfo = hub._get_cfg_metainfo = _get_cfg_metainfo
    return True
