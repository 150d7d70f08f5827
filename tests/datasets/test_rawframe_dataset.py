"""``RobustRawframeDataset``: videos stored as MMAction2's frame folders (``img_00001.jpg`` ...,
lists of ``frame_dir total_frames label``). A wrong list or folder is one line before anything
trains; a damaged frame in training is skipped and counted, in a test listed
(``--skip-unreadable``), naming the frame; ``--dump`` names each folder; the tools that read video
files say that they do."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import cv2
import decord
import pytest
from conftest import DEMO_CONFIG, run_main, run_tool

FRAMES = 16  # frames kept of each demo clip


@pytest.fixture(scope='module')
def frames(tiny_video_set, tmp_path_factory) -> Path:
    """The tiny demo set as frame folders, with ``train.txt`` / ``test.txt`` lists and a config
    (``frames.py``: the demo's with ``RobustRawframeDataset`` and ``RawFrameDecode``, a tiny model)."""
    root = tmp_path_factory.mktemp('rawframes')
    for split in ('train', 'test'):
        lines = []
        for line in (tiny_video_set / f'{split}.txt').read_text().splitlines():
            video, label = line.rsplit(' ', 1)
            name = Path(video).stem
            (root / name).mkdir()
            reader = decord.VideoReader(str(tiny_video_set / 'videos' / video))
            for i, frame in enumerate(reader.get_batch(list(range(FRAMES))).asnumpy(), start=1):
                cv2.imwrite(str(root / name / f'img_{i:05}.jpg'), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
            lines.append(f'{name} {FRAMES} {label}\n')
        (root / f'{split}.txt').write_text(''.join(lines))
    steps = (
        "dict(type='RawFrameDecode'), dict(type='Resize', scale=(32, 32), keep_ratio=False), "
        "dict(type='FormatShape', input_format='NCTHW'), dict(type='PackActionInputs')"
    )
    sample = "type='SampleFrames', clip_len=8, frame_interval=2, num_clips=1"
    (root / 'frames.py').write_text(
        f"""_base_ = [{DEMO_CONFIG!r}]
train_pipeline = [dict({sample}), {steps}]
test_pipeline = [dict({sample}, test_mode=True), {steps}]
ds = dict(type='RobustRawframeDataset', num_classes=4, data_prefix=dict(_delete_=True, img={str(root)!r}))
train_dataloader = dict(
    batch_size=2,
    num_workers=2,
    dataset=dict(**ds, ann_file={str(root / 'train.txt')!r}, pipeline=train_pipeline),
)
val_dataloader = dict(
    batch_size=2, dataset=dict(**ds, ann_file={str(root / 'test.txt')!r}, pipeline=test_pipeline)
)
test_dataloader = val_dataloader
model = dict(
    backbone=dict(embed_dims=32, num_heads=2, num_transformer_layers=1), cls_head=dict(in_channels=32)
)
train_cfg = dict(max_epochs=1, val_interval=1)
param_scheduler = []
"""
    )
    return root


def refusal(tool: str, *args: str) -> str:
    proc = run_main([tool, *args], check=False)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.split(': error: ', 1)[1].split('\n' + Path(tool).name + ': (--debug', 1)[0]


def test_a_wrong_list_or_folder_is_one_message_before_anything_trains(frames, tmp_path) -> None:
    config, work = str(frames / 'frames.py'), str(tmp_path / 'work')
    lines = (frames / 'train.txt').read_text().splitlines()
    name = lines[1].split()[0]

    def refused(*lines_given: str, options: tuple[str, ...] = ()) -> str:
        ann = tmp_path / 'list.txt'
        ann.write_text(''.join(f'{line}\n' for line in lines_given))
        opts = [f'train_dataloader.dataset.ann_file={ann}', *options]
        return refusal('tools/train.py', config, '--work-dir', work, '--cfg-options', *opts)

    ann = tmp_path / 'list.txt'
    assert refused(lines[0], f'{name} {FRAMES} 7') == f'{ann}:2: label 7 outside [0, 4) (num_classes=4)'
    assert refused(lines[0], f'{name} {FRAMES}').startswith(
        f'{ann}:2: expected "frame_dir total_frames label", got \'{name} {FRAMES}\' (no label;'
    )
    assert refused(f'{name} sixteen 1') == (
        f'{ann}:1: expected "frame_dir total_frames label", got \'{name} sixteen 1\''
    )
    assert refused(f'{name} 40 1') == (
        f'{ann}: 1 of 1 listed frame folders are missing or lack frames on disk, e.g.\n'
        f'  line 1: {frames / name}: no img_00040.jpg, frame 40 of the total_frames=40 the list gives; '
        f'it holds {FRAMES} files, img_00001.jpg ... img_{FRAMES:05}.jpg'
    )
    template = ("train_dataloader.dataset.filename_tmpl='img_{:06}.jpg'",)
    assert refused(lines[0], options=template).endswith(
        f"no img_000001.jpg (filename_tmpl='img_{{:06}}.jpg', start_index=1); it holds {FRAMES} files, "
        f'img_00001.jpg ... img_{FRAMES:05}.jpg'
    )
    assert 'line 1: ' + str(frames / 'nowhere') + ': no such folder' in refused(f'nowhere {FRAMES} 1')
    video_steps = ('train_dataloader.dataset.pipeline.1.type=DecordInit',)
    assert refused(lines[0], options=video_steps).endswith(
        "the pipeline opens video files (DecordInit); decode frames with dict(type='RawFrameDecode') in its "
        "place, or read videos with type='RobustVideoDataset'"
    )
    # a list of frame folders given to the video dataset: said so, not "videos missing"
    line = refusal(
        'tools/train.py', DEMO_CONFIG, '--work-dir', work, '--cfg-options',
        f'train_dataloader.dataset.ann_file={frames / "train.txt"}',
    )  # fmt: skip
    assert line == (
        f"{frames / 'train.txt'}:1: '{lines[0]}' is a line of a list of frame folders (\"frame_dir "
        'total_frames label"); a list of videos has "path label" lines, and frame folders are read by '
        "type='RobustRawframeDataset' with RawFrameDecode (docs/datasets/rawframes.md)"
    )


def test_damaged_frames_are_skipped_in_training_and_listed_in_a_test(frames, tmp_path) -> None:
    names = [line.split()[0] for line in (frames / 'train.txt').read_text().splitlines()]
    damaged = tmp_path / 'damaged'
    for name in names:
        (damaged / name).mkdir(parents=True)
        for frame in (frames / name).iterdir():
            (damaged / name / frame.name).write_bytes(frame.read_bytes())
    (damaged / names[0] / 'img_00005.jpg').unlink()  # a frame gone
    cut = damaged / names[1] / 'img_00003.jpg'
    cut.write_bytes(cut.read_bytes()[:300])  # a frame cut off
    config, work = str(frames / 'frames.py'), tmp_path / 'work'
    opts = [f'train_dataloader.dataset.data_prefix.img={damaged}', 'train_cfg.val_interval=2']
    proc = run_tool(['tools/train.py', config, '--work-dir', str(work), '--cfg-options', *opts])
    log = proc.stdout + proc.stderr
    for why in (f'{damaged / names[0]}/img_00005.jpg: missing', f'{cut}: not an image OpenCV can decode'):
        assert re.search(rf'skipped unreadable frame folder \S+ \({re.escape(why)}', log), log[-3000:]
    skipped = re.search(r'epoch 1: (\d+) unreadable training frame folder\(s\) skipped', log)
    assert skipped and int(skipped[1]) >= 2, log[-3000:]  # each time one is drawn (again)
    # the same folders tested: listed with --skip-unreadable, each sample named in --dump
    checkpoint = str(work / 'epoch_1.pth')
    test = [
        'tools/test.py',
        config,
        checkpoint,
        '--work-dir',
        str(tmp_path / 'test'),
        '--cfg-options',
        f'test_dataloader.dataset.data_prefix.img={damaged}',
    ]
    test += [f'test_dataloader.dataset.ann_file={frames / "train.txt"}']
    proc = run_main([*test, '--skip-unreadable', '--dump', str(tmp_path / 'preds.csv')])
    out = proc.stdout + proc.stderr
    assert (
        f'skipped unreadable test frame folder {damaged / names[0]}: {damaged / names[0]}/img_00005.jpg: '
        'missing' in out
    ), out[-3000:]
    assert re.search(
        rf'\(2 unreadable frame folders skipped: metrics over {len(names) - 2} of {len(names)}\)', out
    )
    rows = list(csv.DictReader(open(tmp_path / 'preds.csv', encoding='utf-8')))
    assert {row['video'] for row in rows} == {str(damaged / n) for n in names[2:]}


def test_the_video_tools_say_that_they_read_videos(frames, tiny_video_set, tmp_path) -> None:
    video = str(next((tiny_video_set / 'videos').glob('*.mp4')))
    (checkpoint := tmp_path / 'unused.pth').write_bytes(b'refused before it is read')
    line = refusal('tools/infer.py', str(frames / 'frames.py'), str(checkpoint), video)
    assert line == (
        'test_dataloader.dataset.pipeline decodes frame folders (RawFrameDecode), and this tool reads video '
        'files: give it a config whose test pipeline opens videos (DecordInit, DecordDecode: the same model '
        'reads both), or test the frame folders with tools/test.py'
    )
