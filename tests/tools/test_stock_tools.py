"""OpenMMLab's own scripts on dna_mm configs: MMAction2's dataset browser and video demo
(``--out-filename``, through moviepy < 2) and MMDetection's get_flops.py.

The scripts that ship in the packages (``<package>/.mim/tools``) run as subprocesses.
MMAction2's ``demo/demo.py`` does not ship: its test runs the script from a checkout of MMAction2
1.1.0 named by ``MMACTION2_REPO`` (skipped without one), and the calls it makes
(``init_recognizer``, ``inference_recognizer``, ``ActionVisualizer.add_datasample(...,
out_type='video')``) are tested here directly either way.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, run_tool, tiny_run_options
from mmengine.config import Config, DictAction


def _mim_script(package: str, path: str) -> Path:
    module = pytest.importorskip(package)
    script = Path(module.__file__).parent / '.mim' / path
    if not script.is_file():
        pytest.skip(f'{package} ships no {path}')
    return script


def _tiny_cfg(root) -> Config:
    parser = __import__('argparse').ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *tiny_run_options(root)]).o)
    return cfg


@pytest.fixture(scope='module')
def tiny_checkpoint(tiny_video_set, tmp_path_factory) -> Path:
    from mmaction.registry import MODELS
    from mmengine.registry import init_default_scope

    init_default_scope('mmaction')
    path = tmp_path_factory.mktemp('stock') / 'tiny.pth'
    torch.save(dict(state_dict=MODELS.build(_tiny_cfg(tiny_video_set).model).state_dict()), path)
    return path


def _frames(video: Path) -> int:
    import decord

    return len(decord.VideoReader(str(video)))


def test_moviepy_is_below_2() -> None:
    import moviepy

    assert int(moviepy.__version__.split('.')[0]) < 2  # MMAction2 1.1.0 imports moviepy.editor
    from moviepy.editor import ImageSequenceClip  # noqa: F401


@pytest.mark.integration
def test_mmaction_browse_dataset(tiny_video_set, tmp_path) -> None:
    script = _mim_script('mmaction', 'tools/visualizations/browse_dataset.py')
    out = tmp_path / 'browse'
    run_tool(
        [
            str(script),
            DEMO_CONFIG,
            str(out),
            '--label',
            str(tiny_video_set / 'classes.txt'),
            '-n',
            '2',
            '--cfg-options',
            *tiny_run_options(tiny_video_set),
        ]
    )
    videos = sorted(out.rglob('*.mp4')) + sorted(out.rglob('*.gif'))
    assert len(videos) == 2, list(out.rglob('*'))


def test_mmaction_video_demo_calls(tiny_video_set, tiny_checkpoint, tmp_path) -> None:
    """What MMAction2's demo/demo.py does with --out-filename, call for call."""
    from mmaction.apis import inference_recognizer, init_recognizer
    from mmaction.visualization import ActionVisualizer

    video = str(sorted((tiny_video_set / 'videos').glob('test_*.mp4'))[0])
    model = init_recognizer(_tiny_cfg(tiny_video_set), str(tiny_checkpoint), device='cpu')
    result = inference_recognizer(model, video)
    assert result.pred_scores.item.shape == (4,)
    visualizer = ActionVisualizer(save_dir=str(tmp_path / 'vis'))
    visualizer.dataset_meta = dict(classes=(tiny_video_set / 'classes.txt').read_text().split())
    out = tmp_path / 'out.mp4'
    visualizer.add_datasample(
        'out.mp4', video, result, draw_pred=True, draw_gt=False, fps=8, out_type='video', out_path=str(out)
    )
    assert out.is_file() and _frames(out) == _frames(Path(video))


@pytest.mark.integration
def test_mmaction_video_demo_script(tiny_video_set, tiny_checkpoint, tmp_path) -> None:
    repo = os.environ.get('MMACTION2_REPO')
    if not repo or not (Path(repo) / 'demo' / 'demo.py').is_file():
        pytest.skip('MMAction2 demo/demo.py is not in the package: set MMACTION2_REPO to a 1.1.0 checkout')
    video = str(sorted((tiny_video_set / 'videos').glob('test_*.mp4'))[0])
    run_tool(
        [
            str(Path(repo) / 'demo' / 'demo.py'),
            DEMO_CONFIG,
            str(tiny_checkpoint),
            video,
            str(tiny_video_set / 'classes.txt'),
            '--device',
            'cpu',
            '--out-filename',
            str(tmp_path / 'out.mp4'),
            '--cfg-options',
            *tiny_run_options(tiny_video_set),
        ]
    )
    assert (tmp_path / 'out.mp4').is_file()


@pytest.mark.integration
def test_mmdet_get_flops_on_the_demo_config(tmp_path) -> None:
    script = _mim_script('mmdet', 'tools/analysis_tools/get_flops.py')
    from dna_mm.synthetic.coco_shapes import CocoDatasetSpec, ensure_coco_dataset

    root = ensure_coco_dataset(tmp_path / 'coco', CocoDatasetSpec(train_images=1, test_images=2, size=128))
    proc = run_tool(
        [
            str(script),
            str(REPO / 'configs' / 'vitdet_dna_demo.py'),
            '--num-images',
            '1',
            '--cfg-options',
            f'val_dataloader.dataset.data_root={root}/',
        ]
    )
    assert 'Flops:' in proc.stdout and 'Params:' in proc.stdout, proc.stdout[-2000:]
