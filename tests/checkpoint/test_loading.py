"""dna_mm.checkpoint: mmengine's own loaders made weights-only by a scoped policy (nothing left
behind in the process), and the whole-model comparison that copies nothing.

Offline: mmengine's URL loader is given ``file://`` URLs (``torch.hub`` downloads them with
``urllib`` like an http URL, then calls ``torch.load(..., weights_only=False)``)."""

from __future__ import annotations

import argparse
import fractions
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.runner import checkpoint as mm_checkpoint
from mmengine.runner.checkpoint import CheckpointLoader

import dna_mm  # noqa: F401  (wraps mmengine's schemes)
from dna_mm.checkpoint import (
    ALLOWED_GLOBALS,
    CheckpointMismatchError,
    UnsafeCheckpointError,
    compare_state_dict,
    load_whole_model,
    read_checkpoint,
    weights_only_loads,
)


class _Payload:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


@pytest.fixture
def hub(tmp_path, monkeypatch) -> Path:
    """torch.hub's download cache in ``tmp_path``."""
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    return tmp_path / 'torch_home' / 'hub' / 'checkpoints'


def test_mmengines_url_loader_refuses_a_pickle_that_runs_code(tmp_path, hub) -> None:
    """The loader mmengine registered for ``http://`` (its own ``load_from_http``, wrapped):
    downloaded, cached, refused naming the URL and the global; nothing runs."""
    marker = tmp_path / 'MARKER'
    src = tmp_path / 'served' / 'evil.pth'
    src.parent.mkdir()
    torch.save({'state_dict': {'w': torch.zeros(2)}, 'meta': _Payload(marker)}, src)
    loader = CheckpointLoader._get_checkpoint_loader('http://example.org/evil.pth')
    assert loader.__wrapped__ is mm_checkpoint.load_from_http
    with pytest.raises(UnsafeCheckpointError) as err:
        loader(src.as_uri(), map_location='cpu')
    assert f'refused to load checkpoint {src.as_uri()} (cached as {hub / "evil.pth"})' in str(err.value)
    assert 'the global posix.system' in str(err.value)
    assert (hub / 'evil.pth').is_file() and not marker.exists()


def test_the_policy_is_what_makes_mmengines_url_loader_safe(tmp_path, hub) -> None:
    """mmengine's unwrapped ``load_from_http`` passes ``weights_only=False``: a harmless
    non-allow-listed global (``fractions.Fraction``) loads outside the policy and is refused
    inside it (torch honours ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` at each call)."""
    src = tmp_path / 'fraction.pth'
    torch.save({'lr': fractions.Fraction(1, 3)}, src)
    assert mm_checkpoint.load_from_http(src.as_uri())['lr'] == fractions.Fraction(1, 3)
    with weights_only_loads(), pytest.raises(Exception, match='fractions.Fraction'):
        mm_checkpoint.load_from_http(src.as_uri())


def test_the_policy_leaves_nothing_in_the_process() -> None:
    """``import dna_mm`` adds nothing to torch's allow-list and sets no variable; the policy's
    block (nested too) restores both."""
    before = set(torch.serialization.get_safe_globals())
    assert not any(g in before for g in ALLOWED_GLOBALS) and argparse.Namespace not in before
    assert 'TORCH_FORCE_WEIGHTS_ONLY_LOAD' not in os.environ
    with weights_only_loads():
        with weights_only_loads():
            assert os.environ['TORCH_FORCE_WEIGHTS_ONLY_LOAD'] == '1'
        assert argparse.Namespace in torch.serialization.get_safe_globals()
    assert set(torch.serialization.get_safe_globals()) == before
    assert 'TORCH_FORCE_WEIGHTS_ONLY_LOAD' not in os.environ


def test_read_checkpoint_keeps_mmengine_log_history_and_argparse(tmp_path) -> None:
    from mmengine.logging import MessageHub

    hub = MessageHub.get_instance('test_checkpoint_loading')
    hub.update_scalar('train/loss', 0.5)
    torch.save({'message_hub': hub.state_dict(), 'args': argparse.Namespace(lr=0.1)}, tmp_path / 'a.pth')
    got = read_checkpoint(str(tmp_path / 'a.pth'))
    assert got['args'].lr == 0.1
    assert got['message_hub']['log_scalars']['train/loss'].current() == 0.5


def test_the_off_switch_leaves_mmengine_alone_and_dna_mm_reads_stay_safe(tmp_path) -> None:
    marker = tmp_path / 'MARKER'
    torch.save({'meta': _Payload(marker)}, tmp_path / 'evil.pth')
    code = (
        'from mmengine.runner import checkpoint as mm\n'
        'import dna_mm\n'
        'from dna_mm.checkpoint import UnsafeCheckpointError, read_checkpoint\n'
        'assert mm.CheckpointLoader._schemes["http://"] is mm.load_from_http\n'
        'try:\n'
        f'    read_checkpoint({str(tmp_path / "evil.pth")!r})\n'
        'except UnsafeCheckpointError as err:\n'
        '    print("REFUSED", err)\n'
    )
    env = dict(os.environ, DNA_MM_NO_SAFE_LOADING='1')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert 'REFUSED refused to load checkpoint' in out.stdout and not marker.exists()


def _pair():
    torch.manual_seed(0)
    src = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    dst = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 5))
    return src, dst


def test_the_comparison_copies_nothing_and_names_every_problem(tmp_path) -> None:
    src, dst = _pair()
    state = src.state_dict()
    state['extra.weight'] = torch.zeros(1)
    del state['0.bias']
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    report = compare_state_dict(dst, state)
    assert report.missing == ['0.bias'] and report.unexpected == ['extra.weight']
    assert report.mismatched == [('2.weight', (2, 3), (5, 3)), ('2.bias', (2,), (5,))]
    kept = {'0.weight', '1.weight', '1.bias', '1.running_mean', '1.running_var', '1.num_batches_tracked'}
    assert set(report.weights) == kept
    assert all(torch.equal(before[k], v) for k, v in dst.state_dict().items())

    torch.save({'state_dict': state}, tmp_path / 'x.pth')
    refused = (
        r'x\.pth does not match the model \(6 of its 9 weights match\): missing 1 \(0\.bias\); '
        r'unexpected 1 \(extra\.weight\); shape mismatch 2 \(2\.weight: checkpoint \[2, 3\] vs model '
        r'\[5, 3\] and 1 more\)\. Nothing was loaded: use a checkpoint of this model, or --partial-load'
    )
    with pytest.raises(CheckpointMismatchError, match=refused):
        load_whole_model(dst, str(tmp_path / 'x.pth'))
    assert all(torch.equal(before[k], v) for k, v in dst.state_dict().items())  # nothing loaded
    report = load_whole_model(dst, str(tmp_path / 'x.pth'), strict=False)
    assert torch.equal(dst[0].weight, src[0].weight) and torch.equal(dst[2].bias, before['2.bias'])
    assert report.layout == 'mmengine' and report.checkpoint['state_dict'] is not None


def test_whole_model_load_strips_ddp_prefix_and_calls_after_read(tmp_path) -> None:
    src, _ = _pair()
    dst = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    torch.save({'state_dict': {f'module.{k}': v for k, v in src.state_dict().items()}}, tmp_path / 'd.pth')
    seen = []
    report = load_whole_model(dst, str(tmp_path / 'd.pth'), after_read=seen.append)
    assert report.complete and seen == [report.checkpoint]
    assert all(torch.equal(v, src.state_dict()[k]) for k, v in dst.state_dict().items())


def test_a_missing_local_checkpoint_is_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r'checkpoint \S*nope\.pth does not exist'):
        load_whole_model(torch.nn.Linear(2, 2), str(tmp_path / 'nope.pth'))


def test_a_weight_holding_nan_or_inf_is_refused_and_a_masking_buffer_is_not(tmp_path) -> None:
    """A flipped byte (or a run that diverged) gives NaN weights: the load names the weight and
    copies nothing; a buffer may hold -inf on purpose (an attention mask) and loads."""
    from dna_mm.checkpoint import CorruptCheckpointError

    def model() -> torch.nn.Module:
        net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))
        net.register_buffer('mask', torch.tensor([0.0, float('-inf')]))
        return net

    source = model()
    for bad in (float('nan'), float('inf')):
        state = {k: v.clone() for k, v in source.state_dict().items()}
        state['1.weight'][1, 0] = bad
        path = tmp_path / 'damaged.pth'
        torch.save(dict(state_dict=state), path)
        target = model()
        before = {k: v.clone() for k, v in target.state_dict().items()}
        refusal = r'damaged\.pth: the weight 1\.weight holds NaN or inf'
        with pytest.raises(CorruptCheckpointError, match=refusal):
            load_whole_model(target, str(path))
        assert all(torch.equal(before[k], v) for k, v in target.state_dict().items())  # nothing copied
    torch.save(dict(state_dict=source.state_dict()), tmp_path / 'whole.pth')
    load_whole_model(target, str(tmp_path / 'whole.pth'))  # the -inf mask buffer is no damage
    assert torch.equal(target[1].weight, source[1].weight)
