"""``tools/infer.py`` on a multi-label model's list (``cls_head.multi_class``): MMAction2's
``path label [label ...]`` lines are read as a video and its classes (they were read as a video
named ``path label`` that does not exist), each video's classes printed and written, a top-1
among them counted as correct."""

from __future__ import annotations

import argparse
import csv

import pytest
import torch
from conftest import DEMO_CONFIG, MULTI_LABEL_OPTIONS, load_tool, tiny_run_options
from mmengine.config import Config, DictAction
from mmengine.registry import init_default_scope


@pytest.fixture(scope='module')
def multi_label_run(tiny_video_set, tmp_path_factory):
    """``(config options, checkpoint, list)``: a tiny multi-label demo model as initialised, and
    the test list with a second class on every other line."""
    from mmaction.registry import MODELS

    opts = [*tiny_run_options(tiny_video_set), *MULTI_LABEL_OPTIONS]
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *opts]).o)
    init_default_scope('mmaction')
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp('multi_label')
    checkpoint = folder / 'multi_label.pth'
    torch.save(dict(state_dict=MODELS.build(cfg.model).state_dict()), checkpoint)
    lines = []
    for i, line in enumerate((tiny_video_set / 'test.txt').read_text().splitlines()):
        path, label = line.split()
        lines.append(f'{path} {label} {(int(label) + 1) % 4}' if i % 2 == 0 else line)
    listed = folder / 'multi.txt'
    listed.write_text('\n'.join(lines) + '\n')
    return opts, checkpoint, listed


def test_a_multi_label_list_is_read_and_scored_by_its_classes(
    multi_label_run, tiny_video_set, tmp_path, capsys
) -> None:
    opts, checkpoint, listed = multi_label_run
    out = tmp_path / 'preds.csv'
    names = (tiny_video_set / 'classes.txt').read_text().split()
    args = [DEMO_CONFIG, str(checkpoint), str(listed), '--video-root', str(tiny_video_set / 'videos')]
    status = load_tool('tools/infer.py').main(
        [*args, '--label-map', str(tiny_video_set / 'classes.txt'), '--out', str(out), '--cfg-options', *opts]
    )
    printed = capsys.readouterr().out
    assert status in (0, None), printed
    truths = {}
    for line in listed.read_text().splitlines():
        path, *labels = line.split()
        truths[str(tiny_video_set / 'videos' / path)] = [int(c) for c in labels]
        assert f'  true: {", ".join(names[int(c)] for c in labels)} (top-1 ' in printed
    rows = [r for r in csv.DictReader(out.open()) if r['rank'] == '1']
    assert {r['video']: r['true_index'] for r in rows} == {
        v: ';'.join(map(str, c)) for v, c in truths.items()
    }
    assert all(r['true_name'] == ';'.join(names[c] for c in truths[r['video']]) for r in rows)
    right = sum(int(r['class_index']) in truths[r['video']] for r in rows)
    assert (
        f'top-1 on the {len(rows)} labelled videos: {100 * right / len(rows):.2f} ({right} correct: a top-1 '
        "among the video's classes)"
    ) in printed


def test_a_multi_label_line_with_another_field_is_one_line(multi_label_run, tmp_path, capsys) -> None:
    opts, checkpoint, listed = multi_label_run
    bad = tmp_path / 'bad.txt'
    first, second, *rest = listed.read_text().splitlines()
    bad.write_text('\n'.join([first, second + ' x', *rest]) + '\n')
    with pytest.raises(SystemExit) as done:
        load_tool('tools/infer.py').main([DEMO_CONFIG, str(checkpoint), str(bad), '--cfg-options', *opts])
    err = capsys.readouterr().err
    assert done.value.code == 2 and 'Traceback' not in err
    assert f'infer.py: error: {bad}:2: expected "path label [label ...]" (a multi-label list), got ' in err


def test_a_multi_label_models_scores_are_each_classs_probability(multi_label_run, tiny_video_set) -> None:
    """A multi-label head's mean logits ``s`` (``average_clips='score'``) are shown as each class's
    own probability ``σ(s)`` (they were printed raw: some negative, none a probability); the
    over-time scores as well."""
    from mmaction.apis import inference_recognizer
    from mmengine.dataset import Compose

    from dna_mm.apis.inference import load_recognizer, predict, test_pipeline_of
    from dna_mm.over_time.predictor import class_scores

    opts, checkpoint, listed = multi_label_run
    cfg = Config.fromfile(DEMO_CONFIG)
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg.merge_from_dict(parser.parse_args(['--o', *opts]).o)
    model = load_recognizer(cfg, str(checkpoint)).eval()
    video = str(tiny_video_set / 'videos' / listed.read_text().split()[0])
    pred = predict(model, video, topk=4)
    steps = Compose(test_pipeline_of(cfg))
    sample = steps(dict(filename=video, label=-1, start_index=0, modality='RGB'))
    logits = inference_recognizer(model, sample, Compose([])).pred_scores.item.float()  # [4]
    expected = logits.sigmoid()[pred.indices]
    torch.testing.assert_close(torch.tensor(pred.scores), expected)  # float32's tolerance
    assert pred.indices == logits.argsort(descending=True).tolist()
    out = inference_recognizer(model, sample, Compose([]))
    torch.testing.assert_close(class_scores(model, out), logits.sigmoid())
    model.cls_head.multi_class = False  # a single-label head's scores are as it gives them
    torch.testing.assert_close(class_scores(model, out), logits)
