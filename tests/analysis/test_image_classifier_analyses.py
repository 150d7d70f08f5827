"""The analysis tools on the ImageNet configs (MMPretrain image classifiers) and timm ViTs: the
softmax baseline (timm's own ``Attention``) analysed beside DnA, top-1 of a classifier, the size
a timm model was built for, an image as ``relevance_maps.py``'s input, a failing compared run and
figure legends. Tiny models (2 blocks of ViT-T at 32 px, patch 8, 4 classes) with the weights
they are built with, on generated images in ImageNet's folder layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, WNIDS, run_main, tiny_imagenet_options
from tolerance import REORDERED, assert_close_as

import dna_mm  # noqa: F401
from dna_mm.analysis.models import load_model, load_timm_model
from dna_mm.analysis.report import analyze

IMAGENET = REPO / 'configs' / 'imagenet'
TIMM_ARGS = dict(img_size=32, patch_size=8, depth=2, num_classes=4)


def _images(root: Path, per_class: int = 2) -> Path:
    """``root/val/<wnid>/*.JPEG``: each class its own colour, with noise (40×48: not square)."""
    import cv2

    rng = np.random.default_rng(0)
    for c, wnid in enumerate(WNIDS):
        (root / 'val' / wnid).mkdir(parents=True)
        for i in range(per_class):
            img = np.full((40, 48, 3), 40.0)
            img[..., c % 3] = 200 if c < 3 else 120
            img += rng.normal(0, 20, img.shape)
            cv2.imwrite(str(root / 'val' / wnid / f'{wnid}_{i}.JPEG'), img.clip(0, 255).astype(np.uint8))
    return root


def _tiny_options(root: Path) -> dict:
    """The tiny ImageNet model on ``root``'s val/ folder, as a config's overrides."""
    from dna_mm.tools.cli import cfg_options

    return cfg_options(tiny_imagenet_options(root, batch=4))


@pytest.fixture(scope='module')
def runs(tmp_path_factory) -> dict:
    """``{'dna' | 'softmax': (config file, checkpoint)}`` of the tiny ImageNet models (each config
    written whole, as in a work dir), the image folder under ``'images'``."""
    from dna_mm.config.model import model_from_config

    tmp = tmp_path_factory.mktemp('imagenet_runs')
    images = _images(tmp / 'imagenet')
    out: dict = dict(images=images)
    torch.manual_seed(0)
    for name, config in (('dna', 'dna_vit-t16_in1k.py'), ('softmax', 'vit-t16_softmax_in1k.py')):
        cfg, model = model_from_config(str(IMAGENET / config), _tiny_options(images))
        cfg.dump(str(tmp / f'{name}.py'))
        torch.save(dict(state_dict=model.state_dict(), meta={}), tmp / f'{name}.pth')
        out[name] = (str(tmp / f'{name}.py'), str(tmp / f'{name}.pth'))
    return out


def _analyse(runs: dict, out: Path, *compare: str, check: bool = True, analyses=('alpha', 'entropy')):
    argv = ['tools/analysis/analyze_attention.py', *runs['dna'], '--label', 'DnA', '--out', str(out)]
    argv += ['--analyses', *analyses, '--sigmas', '0.5', *compare]
    return run_main(argv, check=check)


# -- item 5: the softmax baseline beside DnA -------------------------------------------------------
def test_the_softmax_baseline_reads_as_the_family_softmax_with_the_same_logits(runs) -> None:
    from dna_mm.analysis.models import family_view
    from dna_mm.checkpoint import load_whole_model
    from dna_mm.config.model import model_from_config
    from dna_mm.models.sites import find_attention_sites

    config, checkpoint = runs['softmax']
    _, model = model_from_config(config)
    load_whole_model(model, checkpoint)
    model.eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        before = model(x, mode='tensor')
        notes = family_view(model, config)
        after = model(x, mode='tensor')
    assert_close_as(after, before, ulps=REORDERED)
    assert [s.kind for s in find_attention_sites(model)] == ['softmax', 'softmax'] and len(notes) == 1
    assert family_view(model, config) == []  # a family model is left as it is


def test_the_softmax_baseline_is_analysed_beside_dna(runs, tmp_path) -> None:
    out = tmp_path / 'an'
    done = _analyse(runs, out, '--compare', 'softmax', *runs['softmax'], analyses=('alpha', 'entropy', 'cvv'))
    dna, softmax = json.loads((out / 'analysis.json').read_text())['runs']
    assert (dna['label'], softmax['label']) == ('DnA', 'softmax')
    assert [r['layer'] for r in dna['alpha']] == [0, 1] and softmax['alpha'] == []  # no α: left out
    assert {e['branch'] for e in softmax['entropy']} == {'attn'} and len(softmax['entropy']) == 2
    assert {e['num_keys'] for e in softmax['entropy']} == {17}  # 4×4 patches + CLS
    assert 'cvv' in dna and 'cvv' not in softmax and 'branch_cosine' not in softmax
    assert f'wrote {out}/alpha.png (without softmax: no alpha to show)' in done.stdout
    assert f'wrote {out}/entropy.png\n' in done.stdout
    assert {p.name for p in out.glob('*.png')} == {'alpha.png', 'entropy.png', 'cvv.png'}


def test_a_compared_checkpoint_of_another_model_is_found_before_any_run(runs, tmp_path) -> None:
    out = tmp_path / 'an'
    failed = _analyse(runs, out, '--compare', 'softmax', runs['softmax'][0], runs['dna'][1], check=False)
    assert failed.returncode == 2 and 'does not match the model' in failed.stderr
    assert 'samples' not in failed.stdout and not out.exists()  # nothing analysed, nothing written


def test_a_failing_compared_run_keeps_the_runs_before_it(runs, tmp_path) -> None:
    """The compared run's test set holds an image that cannot be decoded: the DnA run analysed
    before it is written (JSON and figures), then the error ends the tool."""
    broken = _images(tmp_path / 'broken', per_class=1)
    (broken / 'val' / WNIDS[0] / f'{WNIDS[0]}_0.JPEG').write_bytes(b'\x00not an image' * 8)
    config = tmp_path / 'softmax_broken.py'
    config.write_text(Path(runs['softmax'][0]).read_text().replace(str(runs['images']), str(broken)))
    out = tmp_path / 'an'
    failed = _analyse(runs, out, '--compare', 'softmax', str(config), runs['softmax'][1], check=False)
    assert failed.returncode != 0
    assert 'a run failed: writing the 1 run(s) analysed before it (DnA)' in failed.stdout
    (dna,) = json.loads((out / 'analysis.json').read_text())['runs']
    assert dna['label'] == 'DnA' and dna['num_samples'] == 8
    assert {p.name for p in out.glob('*.png')} == {'alpha.png', 'entropy.png'}


# -- item 6: top-1 of an MMPretrain classifier -----------------------------------------------------
def test_an_image_classifier_reports_top1_at_every_sigma(runs) -> None:
    """Clean top-1 equal to the classifier's own predictions (``test_step``) on the same
    images, and a top-1 at each noise level."""
    am = load_model(*runs['dna'])
    assert am.is_classifier and am.input_kind == 'image'
    rep = analyze(am, analyses=['robustness'], sigmas=[0.5, 1.0])
    from mmengine.runner import Runner

    from dna_mm.config.build import read_config

    loader = Runner.build_dataloader(read_config(runs['dna'][0]).test_dataloader)
    hits = [
        int(s.pred_label.item() == s.gt_label.item()) for data in loader for s in am.model.test_step(data)
    ]
    assert rep['num_samples'] == len(hits) == 8
    assert rep['accuracy'] == pytest.approx(sum(hits) / 8)
    assert [e['sigma'] for e in rep['robustness']] == [0.0, 0.5, 1.0]
    assert all(e['accuracy'] is not None for e in rep['robustness'])
    assert rep['robustness'][0]['accuracy'] == rep['accuracy']


# -- item 7: legend colours when a run lacks the quantity -----------------------------------------
def _line_colours(fig) -> set[str]:
    """The run colours (the palette's) of the lines drawn in the panels."""
    from matplotlib.colors import to_hex

    from dna_mm.analysis.plots.style import COLORS

    palette = {to_hex(c) for c in COLORS}
    return {to_hex(ln.get_color()) for ax in fig.axes for ln in ax.get_lines()} & palette


def _legend_colours(fig) -> dict[str, str]:
    """Label → colour of the legend's line entries."""
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D

    (legend,) = fig.legends
    entries = zip(legend.get_texts(), legend.legend_handles, strict=True)
    return {t.get_text(): to_hex(h.get_color()) for t, h in entries if isinstance(h, Line2D)}


def test_legend_colours_are_the_line_colours_when_a_run_is_left_out(runs, monkeypatch, tmp_path) -> None:
    from matplotlib.colors import to_hex
    from matplotlib.figure import Figure

    from dna_mm.analysis.plots import plot_alpha, plot_robustness
    from dna_mm.analysis.plots.style import color as palette

    def color(i: int) -> str:  # as matplotlib writes it back
        return to_hex(palette(i))

    kept, savefig = [], Figure.savefig
    monkeypatch.setattr(Figure, 'savefig', lambda fig, *a, **k: (kept.append(fig), savefig(fig, *a, **k))[1])
    dna, softmax = (analyze(load_model(*runs[n]), analyses=['alpha'], label=n) for n in ('dna', 'softmax'))
    reports = [dna, softmax, dict(dna, label='dna 2')]  # the middle run has no α
    assert plot_alpha(reports, str(tmp_path / 'alpha.png'))
    legend = _legend_colours(kept[-1])
    assert legend['dna'] == color(0) and legend['dna 2'] == color(2) and 'softmax' not in legend
    assert _line_colours(kept[-1]) == {color(0), color(2)}
    robust = analyze(
        load_model(*runs['dna']), analyses=['robustness'], sigmas=[0.5], num_samples=4, label='a'
    )
    assert plot_robustness([robust, softmax, dict(robust, label='c')], str(tmp_path / 'robustness.png'))
    legend = _legend_colours(kept[-1])
    assert legend['a'] == color(0) and legend['c'] == color(2) and 'softmax' not in legend
    assert _line_colours(kept[-1]) == {color(0), color(2)}


# -- item 8: timm models at the size they were built for -----------------------------------------
def test_a_timm_model_is_fed_the_size_it_was_built_for(runs) -> None:
    import timm

    model = timm.create_model('dna_vit_tiny_patch16_224', **TIMM_ARGS)
    path = Path(runs['dna'][1]).with_name('timm_dna.pth')
    torch.save(model.state_dict(), path)
    images = runs['images'] / 'val'
    am = load_timm_model('dna_vit_tiny_patch16_224', str(path), TIMM_ARGS, str(images), batch_size=4)
    assert tuple(next(am.batches(4)).inputs.shape) == (4, 3, 32, 32)
    first = next(images.glob('*/*.JPEG'))
    assert tuple(am.load_input(str(first)).shape) == (1, 3, 32, 32)
    rep = analyze(am, analyses=['entropy'], num_samples=2)
    assert {e['num_keys'] for e in rep['entropy']} == {17}  # 4×4 patches + CLS, not 28×28 + 1


# -- item 9: relevance_maps.py on an image with an ImageNet config -----------------------------------
def test_relevance_maps_take_an_image_with_an_imagenet_config(runs, tmp_path) -> None:
    image = next((runs['images'] / 'val').glob('*/*.JPEG'))
    for name, chains in (('dna', ['pos', 'neg']), ('softmax', ['attn'])):
        out = tmp_path / name
        run_main(['tools/analysis/relevance_maps.py', *runs[name], '--input', str(image), '--out', str(out)])
        summary = json.loads((out / f'{image.stem}_relevance.json').read_text())
        assert summary['branches'] == chains and summary['shape'] == [1, 32, 32]
        maps = np.load(out / f'{image.stem}_relevance.npz')
        assert all(maps[c].shape == (1, 32, 32) and 0 <= maps[c].min() <= maps[c].max() <= 1 for c in chains)
    video = tmp_path / 'clip.mp4'
    video.write_bytes(b'\x00')
    wrong = run_main(
        [
            'tools/analysis/relevance_maps.py',
            *runs['dna'],
            '--input',
            str(video),
            '--out',
            str(tmp_path / 'v'),
        ],
        check=False,
    )
    assert wrong.returncode == 2 and '--input must be an image' in wrong.stderr


# -- item 12: --out naming a file ------------------------------------------------------------------
@pytest.mark.parametrize('tool', ['analyze_attention', 'relevance_maps'])
def test_out_naming_a_file_is_one_line_naming_out(runs, tool, tmp_path) -> None:
    taken = tmp_path / 'taken.JPEG'
    taken.write_bytes(b'x')
    image = next((runs['images'] / 'val').glob('*/*.JPEG'))
    extra = ['--input', str(image)] if tool == 'relevance_maps' else []
    for out, what in ((taken, 'is a file'), (taken / 'sub', f'is inside {taken}, a file')):
        argv = [f'tools/analysis/{tool}.py', *runs['dna'], '--out', str(out), *extra]
        failed = run_main(argv, check=False)
        lines = [ln for ln in failed.stderr.splitlines() if ln.startswith(f'{tool}.py: ')]
        assert failed.returncode == 2
        assert lines == [f'{tool}.py: error: --out {out} {what}; --out names the folder to write into',
                         f'{tool}.py: (--debug prints the traceback)']  # fmt: skip
