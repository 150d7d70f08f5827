"""Every config of the OpenMMLab packages' own zoos (MMAction2, MMDetection, MMPretrain, as
installed in ``<package>/.mim/configs``) passes the config check (:func:`dna_mm.config.check_config`,
both modes), or is refused only for what it gets wrong itself (:data:`UPSTREAM`): a user who
inherits one must not meet a refusal for a shape that works. Also a config made for testing
(train mode) and mmengine's ``AmpOptimWrapper`` on a machine without a GPU are refused, as they
would stop the run. Slow (some 1,500 configs): ``make test-slow``."""

from __future__ import annotations

import fnmatch
import importlib.util
import re
from pathlib import Path

import pytest
from mmengine.config import Config

import dna_mm  # noqa: F401
from dna_mm.config.check import config_problems

pytestmark = pytest.mark.slow

#: package -> (config glob under .mim/configs, what the check says, what the config gets wrong)
UPSTREAM = {
    'mmaction': [
        (
            'recognition/mvit/mvit-large-p244_*',
            r'val_dataloader\.batch_size must be 1 with model\.test_cfg\.max_testing_views=5',
            'it splits the views of a video of 8 into 5s',
        ),
        (
            'recognition/mvit/mvit-large-p244_u40_sthv2-rgb.py',
            r'blending\.augments\[\d\]\.num_classes \(400\) must be model\.cls_head\.num_classes \(174\)',
            "its Something-Something blendings keep Kinetics' 400 classes",
        ),
        (
            'recognition/tsm/tsm_imagenet-pretrained-r50_8xb16-1x1x16-50e_kinetics400-rgb.py',
            r'pipeline\[2\]\.io_backend is not an argument of DecordDecode',
            'its DecordDecode is given the file client of DecordInit: a TypeError',
        ),
        (
            'recognition/tsm/tsm_imagenet-pretrained-r50_8xb16-1x1x16-50e_sthv2-rgb.py',
            r'test_dataloader\.(pipeline|test_mode) is not a key of a dataloader',
            "its test loader holds the dataset's keys: a TypeError",
        ),
    ],
    'mmdet': [
        (
            'pascal_voc/faster-rcnn_r50_fpn_1x_voc0712-cocofmt.py',
            r'(val|test)_evaluator\.eval_mode is not an argument of CocoMetric',
            "its CocoMetric keeps the base's VOCMetric eval_mode: a TypeError",
        ),
        (
            'solov2/solov2-light_*_fpn_ms-3x_coco.py',
            r'train_cfg has both type and by_epoch',
            "its train_cfg=dict(by_epoch=True) merges into the base's typed loop: mmengine's RuntimeError",
        ),
    ],
    'mmpretrain': [
        (
            'maskfeat/benchmarks/vit-base-p16_8xb256-coslr-100e_in1k.py',
            r'train_cfg has both type and by_epoch',
            "as MMDetection's SOLOv2-light",
        ),
        (
            'mff/benchmarks/vit-base-p16_8xb2048-linear-coslr-90e_in1k.py',
            r"model\.backbone\.init_cfg \(PretrainedInit\) needs 'checkpoint'",
            'the checkpoint is yours to give: a TypeError at init_weights without it',
        ),
        (
            'twins/twins-*.py',
            r"optim_wrapper\.paramwise_cfg\._delete is not a key",
            "_delete for _delete_: the base's paramwise_cfg is merged in",
        ),
    ],
}
#: refused as they would stop the run, in any zoo
EXPECTED = [
    (('train',), r': not in the config, so it cannot train'),  # a config made for testing
    (
        ('train', 'test'),
        r"optim_wrapper\.type='AmpOptimWrapper' needs a GPU",
    ),  # said on a machine without one
]


def _configs(package: str) -> list[Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f'{package} is not installed')
    root = Path(spec.submodule_search_locations[0]) / '.mim' / 'configs'
    return sorted(p for p in root.rglob('*.py') if '_base_' not in p.parts)


@pytest.mark.parametrize('package', sorted(UPSTREAM))
def test_every_zoo_config_passes_or_is_refused_for_its_own_mistake(package: str) -> None:
    unexplained, hit, checked = [], set(), 0
    for path in _configs(package):
        name = path.as_posix().split('/.mim/configs/', 1)[1]
        try:
            cfg = Config.fromfile(str(path))
        except Exception:  # noqa: BLE001 (mmengine's own: a base the package does not ship)
            continue
        checked += 1
        for mode in ('train', 'test'):
            for problem in config_problems(cfg, mode):
                known = [
                    i
                    for i, (glob, said, _) in enumerate(UPSTREAM[package])
                    if fnmatch.fnmatch(name, glob) and re.search(said, problem)
                ]
                hit.update(known)
                if not known and not any(
                    mode in modes and re.search(said, problem) for modes, said in EXPECTED
                ):
                    unexplained.append(f'{name} ({mode}): {problem}')
    assert checked > 150
    assert not unexplained, '\n'.join(unexplained)
    stale = [glob for i, (glob, _, _) in enumerate(UPSTREAM[package]) if i not in hit]
    assert not stale, f'no longer refused (fixed upstream? remove them): {stale}'
