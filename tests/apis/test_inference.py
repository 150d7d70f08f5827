"""tools/infer.py: a trained tiny TimeSformer-DnA classifies real mp4 files (decord)."""

from __future__ import annotations

import csv
import re
import shutil

import pytest
import torch
from conftest import DEMO_CONFIG, load_tool, run_tool, tiny_demo_recognizer, tiny_run_options, tiny_runner

from dna_mm.checkpoint import read_checkpoint

infer = load_tool('tools/infer.py')

CLASSES = ['still', 'horizontal', 'vertical', 'diagonal']


@pytest.fixture(scope='module')
def trained(tiny_video_set, tmp_path_factory):
    """A one-epoch checkpoint written by mmengine's CheckpointHook, and the options of its run."""
    work = tmp_path_factory.mktemp('infer_run')
    tiny_runner(work, tiny_video_set, max_epochs=1).train()
    return work / 'epoch_1.pth', tiny_run_options(tiny_video_set)


def blocks(out: str) -> dict[str, list[tuple[float, str]]]:
    """{video: [(score, label), ...]} parsed from the tool's output."""
    result, current = {}, None
    for line in out.splitlines():
        m = re.match(r'\s+\d+\. (\d\.\d{4})  (.+)$', line)
        if m and current is not None:
            result[current].append((float(m.group(1)), m.group(2)))
        elif line.endswith('.mp4'):
            current = line
            result[current] = []
    return result


def test_folder_with_the_configs_label_map_and_csv(trained, tiny_video_set, tmp_path, capsys) -> None:
    ckpt, opts = trained
    out_csv = tmp_path / 'preds.csv'
    rc = infer.main(
        [
            DEMO_CONFIG,
            str(ckpt),
            str(tiny_video_set / 'videos'),
            '--topk',
            '4',
            '--out',
            str(out_csv),
            '--cfg-options',
            *opts,
            f'label_map={tiny_video_set}/classes.txt',
        ]
    )
    assert rc == 0
    found = blocks(capsys.readouterr().out)
    videos = sorted((tiny_video_set / 'videos').glob('*.mp4'))
    assert sorted(found) == [str(v) for v in videos]
    for ranked in found.values():
        scores = [s for s, _ in ranked]
        assert sorted({label for _, label in ranked}) == sorted(CLASSES)
        assert scores == sorted(scores, reverse=True)
        assert abs(sum(scores) - 1) < 2e-3  # all classes: the averaged probabilities
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 4 * len(videos)
    first = [r for r in rows if r['rank'] == '1']
    for row in first:
        assert found[row['video']][0] == (round(float(row['score']), 4), row['class_name'])
        assert CLASSES[int(row['class_index'])] == row['class_name']


def test_list_file_indices_without_a_label_map(trained, tiny_video_set, capsys) -> None:
    ckpt, opts = trained
    with pytest.raises(SystemExit, match=r'4 of the 4 videos of .*test.txt do not exist \(relative to'):
        infer.main([DEMO_CONFIG, str(ckpt), str(tiny_video_set / 'test.txt'), '--cfg-options', *opts])
    rc = infer.main(
        [
            DEMO_CONFIG,
            str(ckpt),
            str(tiny_video_set / 'test.txt'),
            '--topk',
            '2',
            '--video-root',
            str(tiny_video_set / 'videos'),
            '--cfg-options',
            *opts,
            'label_map=None',
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert 'note: no label map' in out
    lines = (tiny_video_set / 'test.txt').read_text().split('\n')
    found = blocks(out)
    assert len(found) == len([ln for ln in lines if ln.strip()])
    assert all(len(r) == 2 and r[0][1].startswith('class ') for r in found.values())


@pytest.mark.integration
def test_single_file_by_the_cli_with_a_shipped_map_of_the_wrong_size(trained, tiny_video_set) -> None:
    ckpt, opts = trained
    video = next((tiny_video_set / 'videos').glob('*.mp4'))
    ok = run_tool(
        [
            'tools/infer.py',
            DEMO_CONFIG,
            str(ckpt),
            str(video),
            '--label-map',
            str(tiny_video_set / 'classes.txt'),
            '--cfg-options',
            *opts,
        ]
    )
    found = blocks(ok.stdout)
    assert list(found) == [str(video)]
    assert sorted(label for _, label in found[str(video)]) == sorted(CLASSES)
    assert 'FileClient' not in ok.stdout + ok.stderr, ok.stderr  # mmengine's notice to MMAction2
    with pytest.raises(SystemExit, match='label map label_map_ntu60 has 60 classes, the model predicts 4'):
        infer.main(
            [DEMO_CONFIG, str(ckpt), str(video), '--label-map', 'label_map_ntu60', '--cfg-options', *opts]
        )


def test_mismatched_checkpoint_is_refused_unless_partial(trained, tiny_video_set, capsys) -> None:
    ckpt, opts = trained
    video = str(next((tiny_video_set / 'videos').glob('*.mp4')))
    seven = [*opts, 'model.cls_head.num_classes=7', 'label_map=None']
    with pytest.raises(SystemExit, match=r'(?s)epoch_1\.pth does not match.*cls_head\.fc_cls\.weight'):
        infer.main([DEMO_CONFIG, str(ckpt), video, '--cfg-options', *seven])
    assert infer.main([DEMO_CONFIG, str(ckpt), video, '--partial-load', '--cfg-options', *seven]) == 0
    out = capsys.readouterr().out
    assert 'partial load' in out and 'cls_head.fc_cls.weight' in out


def test_the_configs_label_map_for_other_classes_gives_indices(trained, tiny_video_set, capsys) -> None:
    """A config whose ``num_classes`` was changed has no map for its classes: a note, indices
    (an explicit ``--label-map`` of the wrong size stays an error, above)."""
    ckpt, opts = trained
    video = str(next((tiny_video_set / 'videos').glob('*.mp4')))
    seven = [*opts, 'model.cls_head.num_classes=7', f'label_map={tiny_video_set}/classes.txt']
    assert infer.main([DEMO_CONFIG, str(ckpt), video, '--partial-load', '--cfg-options', *seven]) == 0
    out = capsys.readouterr().out
    assert 'note: no label map' in out
    (scores,) = blocks(out).values()
    assert scores and {label for _, label in scores} <= {f'class {i}' for i in range(7)}


def test_unreadable_video_is_reported_and_the_rest_classified(
    trained, tiny_video_set, tmp_path, capsys
) -> None:
    ckpt, opts = trained
    videos = tmp_path / 'videos'
    videos.mkdir()
    good = sorted((tiny_video_set / 'videos').glob('*.mp4'))[:2]
    for v in good:
        shutil.copy(v, videos / v.name)
    (videos / 'broken.mp4').write_bytes(b'\x00not a video' * 64)
    rc = infer.main([DEMO_CONFIG, str(ckpt), str(videos), '--cfg-options', *opts, 'label_map=None'])
    captured = capsys.readouterr()
    assert rc == 1
    assert f'{videos / "broken.mp4"}\n  cannot be read' in captured.err
    assert '1 of 3 videos could not be read' in captured.err
    assert sorted(blocks(captured.out)) == [str(videos / v.name) for v in good]


@pytest.mark.parametrize(
    'bad, message',
    [('missing_dir/none.mp4', 'input missing_dir/none.mp4 does not exist'), ('EMPTY', 'no video files')],
)
def test_bad_input_is_named(trained, tmp_path, bad, message) -> None:
    ckpt, opts = trained
    if bad == 'EMPTY':
        bad = str(tmp_path)
    with pytest.raises(SystemExit, match=message):
        infer.main([DEMO_CONFIG, str(ckpt), bad, '--cfg-options', *opts])


def test_weights_only_checkpoint_of_tensors_is_enough(trained, tiny_video_set, tmp_path, capsys) -> None:
    """A bare state dict (no mmengine metadata), as other code saves weights."""
    ckpt, opts = trained
    bare = tmp_path / 'bare.pth'
    state = read_checkpoint(str(ckpt))['state_dict']
    torch.save({k: v.clone() for k, v in state.items()}, bare)
    video = str(next((tiny_video_set / 'videos').glob('*.mp4')))
    assert infer.main([DEMO_CONFIG, str(bare), video, '--cfg-options', *opts, 'label_map=None']) == 0


def test_a_failure_of_the_model_is_not_blamed_on_the_video(tiny_video_set, tmp_path) -> None:
    """``predict``: the pipeline's failure is the video's (``UnreadableVideo``, its cause
    attached); the model's is raised as it is: tools/infer.py says "cannot be read" only of the
    former."""
    from dna_mm.apis.inference import UnreadableVideo, predict

    _, model = tiny_demo_recognizer(tmp_path)
    video = str(next((tiny_video_set / 'videos').glob('*.mp4')))
    assert len(predict(model, video, topk=2).indices) == 2
    broken = tmp_path / 'broken.mp4'
    broken.write_bytes(b'not a video')
    with pytest.raises(UnreadableVideo) as raised:
        predict(model, str(broken))
    assert raised.value.video == str(broken) and raised.value.__cause__ is not None
    model.cls_head.average_clips = 'mean'  # MMAction2's head refuses it as it averages
    with pytest.raises(ValueError, match='mean is not supported'):
        predict(model, video)
