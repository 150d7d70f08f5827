"""dna_mm.benchmarks.train_step's profile of one step (``benchmark_train_step.py --kernels``): each
kernel (CPU: each operator's own time) counted under the operator that ran it, with the backward
node or optimizer call around it, and the table of the operators that differ most; the steps of
the ImageNet configs' classifiers."""

from __future__ import annotations

import pytest
import torch

from dna_mm.benchmarks import train_step as bench

#: a TimeSformer of 2 blocks at 32² (each block: a temporal and a spatial attention)
TINY = {
    'model.backbone.embed_dims': 64,
    'model.backbone.num_heads': 2,
    'model.backbone.num_transformer_layers': 2,
    'model.backbone.img_size': 32,
    'model.backbone.patch_size': 8,
    'model.backbone.num_frames': 4,
    'model.cls_head.in_channels': 64,
}
CONFIGS = ('configs/timesformer_softmax_k400.py', 'configs/timesformer_dna_k400.py')
ATTENTIONS = 2 * TINY['model.backbone.num_transformer_layers']


def profiled_steps(device: str) -> list[bench.StepWork]:
    from mmaction.utils import register_all_modules

    register_all_modules()
    works = []
    for config in CONFIGS:
        step = bench.prepare(config, 2, device, dict(TINY))[0]
        step()  # warm-up: the optimizer's state and the kernels' first calls
        works.append(bench.step_work(step, device))
    return works


def calls(work: bench.StepWork, prefix: str, where: str = '') -> int:
    """Kernels (CPU: calls) of the operators named ``prefix…`` that ran under ``where`` (``''``:
    outside any backward node or optimizer call)."""
    return sum(
        n
        for key, (n, _) in work.by_operator.items()
        if key.startswith(prefix) and (key.endswith(f'({where})') if where else '(' not in key)
    )


def test_a_cpu_step_is_split_by_operator_backward_node_and_optimizer() -> None:
    softmax, dna = profiled_steps('cpu')
    for work in (softmax, dna):
        assert work.kernels == sum(n for n, _ in work.by_operator.values()) > 0
        assert work.busy_s == pytest.approx(sum(t for _, t in work.by_operator.values()), rel=1e-9)
        assert work.busy_s > 0 and all(t >= 0 for _, t in work.by_operator.values())
    # every attention runs one SDPA forward in softmax, two in DnA; each a backward of its own
    forward, backward = (
        '_scaled_dot_product_flash_attention_for_cpu',
        'ScaledDotProductFlashAttentionForCpuBackward0',
    )
    assert calls(softmax, forward) == ATTENTIONS
    assert calls(dna, forward) == 2 * ATTENTIONS
    assert calls(softmax, forward + '_backward', backward) == ATTENTIONS
    assert calls(dna, forward + '_backward', backward) == 2 * ATTENTIONS
    # the softmin sign: a negation forward and one in its backward node, DnA's alone
    assert calls(softmax, 'neg') == 0 and calls(dna, 'neg') == calls(dna, 'neg', 'NegBackward0') > 0
    # SGD's update of each parameter, under its step; DnA has more parameters
    assert 0 < calls(softmax, 'add_', 'SGD.step') < calls(dna, 'add_', 'SGD.step')


#: the ImageNet DnA-ViT-T and ViT-T configs at 32² (patch 8), 2 blocks
IMAGE_TINY = {'model.backbone.img_size': 32, 'model.backbone.patch_size': 8, 'model.backbone.depth': 2}
IMAGE_CONFIGS = ('configs/imagenet/vit-t16_softmax_in1k.py', 'configs/imagenet/dna_vit-t16_in1k.py')


@pytest.mark.parametrize('part', ['model', 'backbone'])
def test_an_imagenet_classifier_steps_with_its_own_recipe(part: str) -> None:
    """MMPretrain's ``ImageClassifier`` of the ImageNet configs: a step of the whole classifier
    (images through its data preprocessor, Mixup / CutMix and label smoothing as in training)
    or of its backbone alone: each block one SDPA call with softmax, two with DnA."""
    counts = []
    for config in IMAGE_CONFIGS:
        step, params, backbone = bench.prepare(config, 2, 'cpu', dict(IMAGE_TINY), part=part)
        step()  # warm-up
        work = bench.step_work(step, 'cpu')
        counts.append(calls(work, '_scaled_dot_product_flash_attention_for_cpu'))
        assert 0 < backbone <= params and work.kernels > 0
    assert counts == [IMAGE_TINY['model.backbone.depth'], 2 * IMAGE_TINY['model.backbone.depth']]


def test_an_image_classifiers_batch_is_preprocessed_as_in_training() -> None:
    """The classifier's inputs: normalised images and the batch augments' soft labels."""
    from dna_mm.config.model import model_from_config

    cfg, model = model_from_config(IMAGE_CONFIGS[1], dict(IMAGE_TINY), clear_pretrained=True)
    assert bench.image_size(cfg.model.backbone) == 32
    inputs, samples = bench.classification_inputs(model, cfg, 3)
    assert inputs.shape == (3, 3, 32, 32) and inputs.dtype.is_floating_point
    assert abs(inputs.mean().item()) < 1.0  # normalised, not 0-255 pixels
    scores = [sample.gt_score for sample in samples]
    assert all(score.shape == (1000,) for score in scores)
    assert all(torch.isclose(score.sum(), torch.tensor(1.0)) for score in scores)
    assert bench.image_size({'type': 'with_attention', 'model': {'img_size': 64}}) == 64
    assert bench.image_size({'type': 'TIMMBackbone'}) == 224


def test_the_header_says_what_each_step_is_fed() -> None:
    """The table's first line names the inputs the steps get: the ImageNet configs' images of
    their ``img_size``, a recognizer's clips of ``num_frames`` × ``img_size²``, a detector's images."""
    from dna_mm.config.build import read_config

    lines: list[str] = []
    bench.step_table(
        [(IMAGE_CONFIGS[1], dict(IMAGE_TINY), False)], 2, 1, 'cpu', echo=lambda *a, **k: lines.append(a[0])
    )
    assert ', batch 2 (images of 32x32), amp config' in lines[0], lines[0]
    video = read_config(CONFIGS[1], dict(TINY), clear_pretrained=True)
    assert bench.step_inputs(video) == 'clips of 4x32x32'
    detector = read_config(
        'configs/vitdet_dna_coco.py', {'model.backbone.img_size': 64}, clear_pretrained=True
    )
    assert bench.step_inputs(detector) == 'images of 64x64'


def test_the_operator_table_lists_the_largest_differences_and_the_sums() -> None:
    first = {'mm': (4, 0.010), 'mul': (2, 0.001), 'gelu': (1, 0.004)}
    second = {'mm': (6, 0.012), 'mul': (6, 0.009), 'neg': (2, 0.003)}
    lines = bench.operator_table(['softmax', 'dna'], [first, second], top=3).splitlines()
    assert lines[0] == '| operator (backward node / optimizer) | softmax | dna | Δ dna |'
    assert lines[1] == '|---|---|---|---|'
    assert lines[2:] == [
        '| `mul` | 2 / 1.00 ms | 6 / 9.00 ms | +4 / +8.00 ms |',
        '| `gelu` | 1 / 4.00 ms | 0 / 0.00 ms | -1 / -4.00 ms |',  # 4 ms less: the second largest
        '| `neg` | 0 / 0.00 ms | 2 / 3.00 ms | +2 / +3.00 ms |',
        '| all | 7 / 15.00 ms | 14 / 24.00 ms | +7 / +9.00 ms |',  # every operator, `mm` too
    ]
    alone = bench.operator_table(['softmax'], [first], top=1).splitlines()
    assert alone[2:] == ['| `mm` | 4 / 10.00 ms |', '| all | 7 / 15.00 ms |']


@pytest.mark.cuda
def test_a_cuda_step_counts_each_kernel_under_the_operator_that_launched_it() -> None:
    softmax, dna = profiled_steps('cuda')
    for work in (softmax, dna):
        assert work.kernels == sum(n for n, _ in work.by_operator.values()) > 0
        assert work.busy_s == pytest.approx(sum(t for _, t in work.by_operator.values()), rel=1e-6)
    # the attention kernels SDPA picks (flash, memory-efficient or cuDNN), twice as many for DnA
    sdpa = [key for key in dna.by_operator if 'attention' in key and '(' not in key]
    assert sdpa, sorted(dna.by_operator)
    assert sum(calls(dna, key) for key in sdpa) == 2 * sum(calls(softmax, key) for key in sdpa) > 0
    assert calls(dna, 'neg') > 0 == calls(softmax, 'neg')
