"""tools/extract_features.py writes its settings file (features.json) with its first features:
a run refused before them (a model that does not build) or stopped before them leaves nothing
that refuses the corrected command."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import DEMO_CONFIG, load_tool
from mmaction.registry import MODELS
from mmengine.config import Config
from mmengine.registry import init_default_scope

extract = load_tool('tools/extract_features.py')


@pytest.fixture(scope='module')
def one_video(tiny_video_set, tmp_path_factory):
    """The demo recognizer (random weights) as a checkpoint, and a folder of one clip."""
    init_default_scope('mmaction')
    root = tmp_path_factory.mktemp('settings_file')
    ckpt = root / 'demo.pth'
    torch.save({'state_dict': MODELS.build(Config.fromfile(DEMO_CONFIG).model).state_dict()}, ckpt)
    (videos := root / 'videos').mkdir()
    shutil.copy(next((tiny_video_set / 'videos').glob('*.mp4')), videos)
    return ckpt, videos


def test_a_refused_model_leaves_no_settings_file(one_video, tmp_path, capsys) -> None:
    ckpt, videos = one_video
    out = tmp_path / 'out'
    args = [DEMO_CONFIG, str(ckpt), '--videos', str(videos), '--out', str(out), '--workers', '0']
    with pytest.raises(SystemExit) as refused:  # a misspelt backbone argument: the model does not build
        extract.main([*args, '--cfg-options', 'model.backbone.num_head=3'])
    assert refused.value.code == 2 and 'num_head' in str(refused.value)
    assert not (out / 'features.json').exists()
    assert extract.main(args) == 0  # the corrected command runs
    record = json.loads((out / 'features.json').read_text())
    assert record['level'] == 'pooled' and record['model'].startswith('sha256:')
    assert len(list(out.glob('*.npy'))) == 1
    capsys.readouterr()


def test_a_settings_file_without_features_does_not_refuse_the_run(one_video, tmp_path) -> None:
    """What a run stopped between its settings file and its first feature leaves."""
    ckpt, videos = one_video
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'features.json').write_text(json.dumps(dict(level='tokens', per='clip')))
    args = [DEMO_CONFIG, str(ckpt), '--videos', str(videos), '--out', str(out), '--workers', '0']
    assert extract.main(args) == 0
    assert json.loads((out / 'features.json').read_text())['level'] == 'pooled'
    with pytest.raises(SystemExit, match=r"holds features made with other settings \(\{'level'"):
        extract.main([*args, '--level', 'tokens'])  # with features there: refused, as before
