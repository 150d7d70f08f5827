"""The analysis tools end to end on demo-config checkpoints (real tools/train.py runs of the tiny
demo model on decord-decoded mp4s): analyze_attention.py, relevance_maps.py, and
RobustnessMetric inside tools/test.py (plain and OOD mode). Slow: minutes on 2 CPU cores."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import DEMO_CONFIG, REPO, load_tool, run_tool, tiny_run_options

from dna_mm.analysis import aurra, ood_measures, rms_calibration_error

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture(scope='module')
def checkpoints(tiny_video_set, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """attention → (dumped config, checkpoint) of a 2-epoch tiny demo run."""
    out = {}
    for attn in ('dna', 'softmax'):
        work = tmp_path_factory.mktemp(f'run_{attn}')
        run_tool(
            [
                'tools/train.py',
                DEMO_CONFIG,
                '--work-dir',
                str(work),
                '--seed',
                '0',
                '--cfg-options',
                *tiny_run_options(tiny_video_set, attn, epochs=2),
            ]
        )
        out[attn] = (str(work / 'timesformer_dna_demo.py'), str(work / 'epoch_2.pth'))
    return out


@pytest.mark.parametrize('option', ['--num-samples', '--batch-size', '--intruder-k'])
@pytest.mark.parametrize('value', ['0', '-3'])
def test_analyze_attention_counts_below_1_are_one_line(option, value, capsys) -> None:
    tool = load_tool('tools/analysis/analyze_attention.py')
    with pytest.raises(SystemExit) as done:
        tool.parse_args([DEMO_CONFIG, 'ckpt.pth', '--out', 'out', option, value])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f'error: {option} must be >= 1, got {value}')


def test_analyze_attention_cli_compare(checkpoints, tmp_path) -> None:
    (cfg, ckpt), (cfg_s, ckpt_s) = checkpoints['dna'], checkpoints['softmax']
    proc = run_tool(
        [
            'tools/analysis/analyze_attention.py',
            cfg,
            ckpt,
            '--out',
            str(tmp_path),
            '--label',
            'DnA',
            '--compare',
            'softmax',
            os.path.relpath(cfg_s, REPO),  # recorded by absolute paths
            os.path.relpath(ckpt_s, REPO),
            '--num-samples',
            '3',
            '--sigmas',
            '0.5',
            '1',
            '--cfg-options',
            'test_dataloader.num_workers=0',
        ]
    )
    assert '[DnA] 3 samples' in proc.stdout and '[softmax] 3 samples' in proc.stdout
    report = json.loads((tmp_path / 'analysis.json').read_text())
    assert report['schema'] == 'dna_mm.analysis/1'
    dna, soft = report['runs']
    assert (dna['label'], soft['label'], dna['num_samples']) == ('DnA', 'softmax', 3)
    assert (soft['config'], soft['checkpoint']) == (cfg_s, ckpt_s)
    assert [(s['layer'], s['group'], s['kind']) for s in dna['sites']] == [
        (0, 'temporal', 'dna'),
        (0, 'spatial', 'dna'),
    ]
    assert len(dna['alpha']) == 2 and soft['alpha'] == []
    assert {(e['group'], e['branch']) for e in dna['entropy']} == {
        (g, b) for g in ('temporal', 'spatial') for b in ('pos', 'neg')
    }
    assert {(e['group'], e['branch']) for e in soft['entropy']} == {('temporal', 'attn'), ('spatial', 'attn')}
    assert len(dna['entropy'][0]['per_head']) == 2
    for key in ('cvv', 'branch_cosine', 'intruders'):
        assert dna[key] and key not in soft
    assert dna['summary']['cvv']['count'] == 3 * 2 * (16 + 8)  # clips × heads × (temporal + spatial) maps
    assert [e['sigma'] for e in dna['robustness']] == [0.0, 0.5, 1.0]
    assert 0 <= dna['accuracy'] <= 1 and dna['robustness'][0]['accuracy'] == dna['accuracy']
    for name in ('alpha', 'entropy', 'redundancy', 'cvv', 'intruders', 'robustness'):
        png = tmp_path / f'{name}.png'
        assert png.stat().st_size > 5000 and png.read_bytes()[:4] == b'\x89PNG'


def test_relevance_maps_cli_on_a_video(checkpoints, tiny_video_set, tmp_path) -> None:
    """The maps, and a summary that names its files by absolute paths, given relative ones (the
    tool runs in the repository: its reader need not know that folder)."""
    cfg, ckpt = checkpoints['dna']
    video = sorted(Path(tiny_video_set, 'videos').glob('test_*.mp4'))[0]
    relative = [os.path.relpath(p, REPO) for p in (cfg, ckpt, video, tmp_path)]
    args = ['tools/analysis/relevance_maps.py', *relative[:2], '--input', relative[2], '--out', relative[3]]
    run_tool([*args, '--target', '1'])
    stem = tmp_path / f'{video.stem}_relevance'
    summary = json.loads(stem.with_suffix('.json').read_text())
    assert summary['target'] == 1 and summary['branches'] == ['pos', 'neg']
    files = [summary[k] for k in ('config', 'checkpoint', 'input', 'png', 'npz')]
    assert files == [cfg, ckpt, str(video), str(stem) + '.png', str(stem) + '.npz'], files
    assert summary['model'] == 'DnA (Q±V±)', summary['model']  # its attention's name, as the title's
    idx = summary['frame_indices']  # source frames: 8 sampled every 2nd
    assert len(idx) == 8 and {b - a for a, b in zip(idx, idx[1:], strict=False)} == {2}
    assert summary['shape'] == [8, 32, 32]  # frames × the pipeline's 32×32 crop
    maps = np.load(stem.with_suffix('.npz'))
    assert set(maps) == {'pos', 'neg'} and maps['pos'].max() == pytest.approx(1)
    assert stem.with_suffix('.png').read_bytes()[:4] == b'\x89PNG'


def _dump(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = list(csv.DictReader(path.open()))
    conf = np.array([float(r['score']) for r in rows])
    label = np.array([int(r['label']) for r in rows])
    pred = np.array([int(r['pred']) for r in rows])
    return conf, label, pred


def _metrics(stdout: str) -> dict[str, float]:
    line = next(ln for ln in stdout.splitlines() if ln.startswith('Test results:'))
    return {k: float(v) for k, v in (p.split(': ') for p in line[len('Test results: ') :].split('  '))}


def test_robustness_metric_in_tools_test(checkpoints, tiny_video_set, tmp_path) -> None:
    cfg, ckpt = checkpoints['dna']
    root = Path(tiny_video_set)
    # plain: next to AccMetric
    plain = tmp_path / 'plain.py'
    plain.write_text(
        f"_base_ = ['{cfg}']\n"
        "test_evaluator = [dict(type='AccMetric', metric_list=('top_k_accuracy', "
        "'mean_class_accuracy')), dict(type='RobustnessMetric', beta=1)]\n"
    )
    proc = run_tool(
        [
            'tools/test.py',
            str(plain),
            ckpt,
            '--work-dir',
            str(tmp_path / 'w1'),
            '--dump',
            str(tmp_path / 'plain.csv'),
        ]
    )
    m = _metrics(proc.stdout)
    conf, label, pred = _dump(tmp_path / 'plain.csv')
    correct = (pred == label).astype(float)
    assert m['robustness/acc'] == pytest.approx(m['top-1'] / 100)
    assert m['robustness/rmsce'] == pytest.approx(rms_calibration_error(conf, correct, beta=1), abs=1e-5)
    assert m['robustness/aurra'] == pytest.approx(aurra(conf, correct), abs=1e-5)
    # OOD mode: the 4 test clips in-distribution, the 8 training clips (listed without labels) OOD
    ood_list = tmp_path / 'ood.txt'
    ood_list.write_text(''.join(f'{ln.split()[0]}\n' for ln in (root / 'train.txt').read_text().splitlines()))
    ood_cfg = tmp_path / 'ood.py'
    ood_cfg.write_text(
        f"_base_ = ['{cfg}']\n"
        f"ood = dict(type='RobustVideoDataset', ann_file='{ood_list}', labels_optional=True,\n"
        f"           data_prefix=dict(video='{root}/videos'),\n"
        "           pipeline={{_base_.test_pipeline}}, test_mode=True)\n"
        "test_dataloader = dict(dataset=dict(_delete_=True, type='ConcatDataset',\n"
        "                                    datasets=[{{_base_.test_dataloader.dataset}}, ood]))\n"
        f"test_evaluator = dict(_delete_=True, type='RobustnessMetric', beta=1, ood_ann_file='{ood_list}',\n"
        f"                      ood_data_prefix='{root}/videos')\n"
    )
    proc = run_tool(
        [
            'tools/test.py',
            str(ood_cfg),
            ckpt,
            '--work-dir',
            str(tmp_path / 'w2'),
            '--dump',
            str(tmp_path / 'ood.csv'),
        ]
    )
    m2 = _metrics(proc.stdout)
    assert (m2['robustness/num_samples'], m2['robustness/num_ood']) == (4, 8)
    assert m2['robustness/acc'] == pytest.approx(m['robustness/acc'])
    conf2, label2, _ = _dump(tmp_path / 'ood.csv')
    ref = ood_measures(conf2[label2 >= 0], conf2[label2 < 0])
    assert m2['robustness/auroc'] == pytest.approx(ref['auroc'], abs=1e-5)
    assert m2['robustness/aupr'] == pytest.approx(ref['aupr'], abs=1e-5)
    assert m2['robustness/fpr95'] == pytest.approx(ref['fpr'], abs=1e-5)
    # the same from the plain config with tools/test.py --ood (its RobustnessMetric's beta kept)
    proc = run_tool(
        [
            'tools/test.py',
            str(plain),
            ckpt,
            '--work-dir',
            str(tmp_path / 'w3'),
            '--ood',
            str(ood_list),
            f'{root}/videos',
        ]
    )
    m3 = _metrics(proc.stdout)
    assert 'top-1' not in m3
    for key in ('num_samples', 'num_ood', 'acc', 'rmsce', 'auroc', 'aupr', 'fpr95'):
        assert m3[f'robustness/{key}'] == pytest.approx(m2[f'robustness/{key}'], abs=1e-6), key


def test_analyze_attention_cli_on_a_vitdet_detector(tmp_path) -> None:
    """A ViTDet Mask R-CNN config (the backbone is analysed: windows, rel-pos, [B, H, W, C]),
    a checkpoint of its registry-built model, images of the generated COCO-format set."""
    import torch
    from conftest import REPO

    from dna_mm.config.model import model_from_config
    from dna_mm.synthetic.coco_shapes import CocoDatasetSpec, ensure_coco_dataset

    root = ensure_coco_dataset(tmp_path / 'coco', CocoDatasetSpec(train_images=2, test_images=3))
    config = str(REPO / 'configs' / 'vitdet_dna_demo.py')
    torch.save({'state_dict': model_from_config(config)[1].state_dict()}, tmp_path / 'det.pth')
    run_tool(
        [
            'tools/analysis/analyze_attention.py',
            config,
            str(tmp_path / 'det.pth'),
            '--out',
            str(tmp_path / 'out'),
            '--sigmas',
            '0.5',
            '--cfg-options',
            f'test_dataloader.dataset.data_root={root}/',
            'test_dataloader.num_workers=0',
        ]
    )
    (run,) = json.loads((tmp_path / 'out' / 'analysis.json').read_text())['runs']
    assert run['num_samples'] == 3 and 'accuracy' not in run  # a detector: no class scores
    assert [(s['site'], s['group']) for s in run['sites']] == [
        (f'backbone.blocks.{i}.attn', 'attn') for i in range(4)
    ]
    assert [len(e['layers']) for e in run['robustness']] == [4, 4]
    assert {e['branch'] for e in run['entropy']} == {'pos', 'neg'}
