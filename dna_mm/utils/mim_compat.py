"""``_base_ = ['mmaction::…']`` and ``_base_ = ['dna_mm::…']`` with mmaction2 1.1.0 and mmengine
0.10.7.

**mmaction::** mmengine resolves ``package::path`` through the package's ``.mim/model-index.yml`` and its
metafiles, calling ``model['Config'].partition('/')`` on every model entry. mmaction2
1.1.0's ``configs/localization/bsn/metafile.yml`` has one entry whose ``Config`` is a *list*
(BSN's three stage configs), so every ``mmaction::`` base fails with ``AttributeError:
'list' object has no attribute 'partition'`` before the config is read.

:func:`patch_mmengine` wraps mmengine's metafile reader (``_get_cfg_metainfo``, in
``mmengine.config.utils`` and ``mmengine.hub.hub``) in memory: the original runs first, and only
when it fails on such an entry is the index read again with a list's entries taken one by one.
``import dna_mm`` applies it (set ``DNA_MM_NO_MMENGINE_PATCH=1`` to leave mmengine untouched);
nothing is written to any installed package.

**dna_mm::** mmengine accepts ``package::path`` only for the packages of a fixed table
(``mmengine.config.utils.MODULE2PACKAGE``: ``AssertionError: mmengine does not support to load
dna_mm config``) and only as ``package::folder/file``. dna_mm ships its configs as OpenMMLab's
packages do, in ``dna_mm/.mim/configs`` (the wheel's copy; in a checkout a link to the repo's
``configs/``), and :func:`patch_mmengine` also wraps ``Config._get_cfg_path``: a ``dna_mm::`` base
(``dna_mm::timesformer_dna_ntu60.py``, ``dna_mm::_base_/models/…``) is that file, and every other
base goes to mmengine as before. The base is read like a local one, without a ``_scope_``: dna_mm
has no registry scope of its own, its configs build in the scope they name (``default_scope``,
``mmaction`` or ``mmdet``), where ``import dna_mm`` registers its types.

A stock script that parses a config before it
imports dna_mm (``mmaction/.mim/tools/train.py``, ``mim train``) is run through
``python -m dna_mm.launch SCRIPT ARGS…``, which imports dna_mm first.
"""

from __future__ import annotations

import difflib
import functools
import os
import os.path as osp
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mmengine.config import Config

#: ``_base_`` prefix of the configs that dna_mm ships
PREFIX = 'dna_mm::'


def mim_folder(name: str) -> Path:
    """dna_mm's shipped ``configs`` or ``tools`` folder: ``dna_mm/.mim/<name>`` (the wheel's
    copy, or in a checkout the link to the repo's folder), else the checkout's ``<name>/`` beside
    the package (a checkout whose links were not made, e.g. git without symlinks)."""
    package = Path(__file__).resolve().parents[1]
    for folder in (package / '.mim' / name, package.parent / name):
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        f'dna_mm ships no {name}/ folder: neither {package / ".mim" / name} nor {package.parent / name}'
    )


def packaged_config(cfg_path: str) -> str:
    """The file of a ``dna_mm::`` config name (``dna_mm::timesformer_dna_ntu60.py`` or
    ``dna_mm::_base_/models/…``), from the shipped configs."""
    name = cfg_path[len(PREFIX) :] if cfg_path.startswith(PREFIX) else cfg_path
    root = mim_folder('configs')
    path = root / name
    if not name or not path.is_file():
        shipped = sorted(p.relative_to(root).as_posix() for p in root.rglob('*.py'))
        near = difflib.get_close_matches(name, shipped, n=1)
        hint = f'did you mean {PREFIX}{near[0]}? ' if near else ''
        raise FileNotFoundError(
            f'{PREFIX}{name}: dna_mm ships no such config ({hint}the shipped ones are in {root})'
        )
    return str(path)


def read_package_config(name: str) -> 'Config':
    """The config of a ``package::path`` name: one dna_mm ships (:func:`packaged_config`) or an
    OpenMMLab zoo config (``mmaction::…``, ``mmdet::…``, ``mmpretrain::…``: MMEngine's
    ``get_config``)."""
    from mmengine.config import Config

    if name.startswith(PREFIX):
        return Config.fromfile(packaged_config(name))
    from mmengine.hub import get_config

    return get_config(name)


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
    """Wrap mmengine's ``_get_cfg_metainfo`` so that list-valued ``Config`` entries are read, and
    ``Config._get_cfg_path`` so that ``dna_mm::`` bases are (idempotent). Returns whether the
    wrappers are in place (``DNA_MM_NO_MMENGINE_PATCH=1``: no)."""
    from mmengine.config import utils
    from mmengine.hub import hub  # imports the name itself (get_config / get_model)

    if os.environ.get('DNA_MM_NO_MMENGINE_PATCH') == '1':
        return False
    _patch_package_bases()
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


def _patch_package_bases() -> None:
    """Wrap ``Config._get_cfg_path`` (a static method) so that a ``dna_mm::`` base is the shipped
    file, read without a scope; any other base goes to mmengine's own (idempotent)."""
    from mmengine.config import Config

    original = Config._get_cfg_path
    if getattr(original, '__wrapped__', None) is not None:
        return

    @functools.wraps(original)
    def _get_cfg_path(cfg_path: str, filename: str) -> tuple[str, str | None]:
        if cfg_path.startswith(PREFIX):
            return packaged_config(cfg_path), None
        return original(cfg_path, filename)

    Config._get_cfg_path = staticmethod(_get_cfg_path)
