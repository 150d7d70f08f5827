"""tools/infer.py on a model with other classes than the config's label map names: one note that
says the map is not used and why (not a second one saying there is no map)."""

from __future__ import annotations

import torch
from conftest import DEMO_CONFIG, run_main, tiny_run_options
from mmengine.config import Config, DictAction


def test_a_label_map_of_other_classes_is_one_consistent_note(tiny_video_set, tmp_path) -> None:
    from mmaction.registry import MODELS
    from mmengine.registry import init_default_scope

    init_default_scope('mmaction')
    ten = [*tiny_run_options(tiny_video_set), 'model.cls_head.num_classes=10']
    parser = __import__('argparse').ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *ten]).o)
    ckpt = tmp_path / 'ten.pth'
    torch.save(dict(state_dict=MODELS.build(cfg.model).state_dict()), ckpt)
    label_map = tiny_video_set / 'classes.txt'  # the demo's 4 classes
    video = str(next((tiny_video_set / 'videos').glob('*.mp4')))
    opts = [*ten, f'label_map={label_map}']
    done = run_main(['tools/infer.py', DEMO_CONFIG, str(ckpt), video, '--cfg-options', *opts])
    notes = [ln for ln in (done.stdout + done.stderr).splitlines() if 'label map' in ln]
    assert notes == [
        f"note: no label map used: the config's label map {label_map} has 4 classes, the model predicts 10 "
        '(set --label-map to a map of 10 class names): printing class indices'
    ], notes
    assert '  1. ' in done.stdout and 'class ' in done.stdout  # indices printed
