"""``_base_ = ['mmaction::…']`` with mmaction2 1.1.0 and mmengine 0.10.7.

mmengine resolves ``package::path`` through the package's ``.mim/model-index.yml`` and its
metafiles, calling ``model['Config'].partition('/')`` on every model entry. mmaction2
1.1.0's ``configs/localization/bsn/metafile.yml`` has one entry whose ``Config`` is a *list*
(BSN's three stage configs), so every ``mmaction::`` base fails with ``AttributeError:
'list' object has no attribute 'partition'`` before the config is read.

Two fixes, because the failure happens while the config is parsed, before any
``custom_imports`` run:

* :func:`patch_mmengine` — in memory: mmengine's metafile reader takes a list's entries one
  by one. Applied by ``import dna_mm``, so every tool or script that imports dna_mm first
  (``tools/train.py``, ``tools/test.py``, the Python API) parses such configs.
* :func:`fix_installed_metafiles` — in the environment, for tools that parse a config before
  importing anything of ours (``mmaction/.mim/tools/train.py``, ``mim train``): rewrites a
  list-valued ``Config`` of the installed packages' metafiles into its first entry (the one
  mmengine would pick: "Some config could have multiple weights, we only pick the first
  one"), keeping the others under ``Configs``. ``make install`` runs it
  (``python -m dna_mm.utils.mim_compat``); it is idempotent.
"""

from __future__ import annotations

import argparse
import importlib.util
import os.path as osp
from typing import Any

OPENMMLAB_PACKAGES = ('mmaction', 'mmdet', 'mmengine', 'mmcv', 'mmpretrain')


def _normalised(model_cfg: dict) -> list[dict]:
    """A metafile model entry with one ``Config`` string per returned entry."""
    cfg = model_cfg.get('Config')
    if isinstance(cfg, (list, tuple)):
        return [dict(model_cfg, Config=c) for c in cfg if isinstance(c, str)]
    return [model_cfg]


def patch_mmengine() -> None:
    """Make mmengine's ``_get_cfg_metainfo`` accept list-valued ``Config`` entries
    (idempotent)."""
    from mmengine.config import utils

    if getattr(utils._get_cfg_metainfo, '_dna_mm_patched', False):
        return
    from mmengine.fileio import load

    def _get_cfg_metainfo(package_path: str, cfg_path: str) -> dict:
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

    _get_cfg_metainfo._dna_mm_patched = True  # type: ignore[attr-defined]
    utils._get_cfg_metainfo = _get_cfg_metainfo
    from mmengine.hub import hub  # imports the name itself (get_config / get_model)

    hub._get_cfg_metainfo = _get_cfg_metainfo


def fix_installed_metafiles(packages: tuple[str, ...] = OPENMMLAB_PACKAGES) -> list[str]:
    """Rewrite list-valued ``Config`` entries in the installed packages' metafiles; returns
    the files changed."""
    import yaml

    changed = []
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = osp.join(list(spec.submodule_search_locations)[0], '.mim')
        index = osp.join(root, 'model-index.yml')
        if not osp.isfile(index):
            continue
        with open(index, encoding='utf-8') as f:
            imports = (yaml.safe_load(f) or {}).get('Import', [])
        for rel in imports:
            path = osp.join(root, rel)
            if not osp.isfile(path):
                continue
            with open(path, encoding='utf-8') as f:
                meta = yaml.safe_load(f) or {}
            dirty = False
            for entry in meta.get('Models', []):
                cfg = entry.get('Config')
                if isinstance(cfg, (list, tuple)) and cfg:
                    entry['Config'], entry['Configs'] = cfg[0], list(cfg)
                    dirty = True
            if dirty:
                with open(path, 'w', encoding='utf-8') as f:
                    yaml.safe_dump(meta, f, sort_keys=False, allow_unicode=True)
                changed.append(path)
    return changed


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    changed = fix_installed_metafiles()
    print(
        'mim_compat: '
        + (
            f'normalised {len(changed)} metafile(s): ' + ', '.join(changed)
            if changed
            else 'installed metafiles already readable by mmengine'
        )
    )


if __name__ == '__main__':
    main()
