"""A backbone's ``pretrained`` file that does not fit it is a user's mistake: a
:class:`~dna_mm.errors.CheckpointMismatchError` (still the ``ValueError`` it was) naming the file
and the mismatch, one line in the tools, as a whole-model checkpoint that does not match."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_backbone
from mmengine.registry import init_default_scope

from dna_mm.errors import CheckpointMismatchError
from dna_mm.models.backbones import load_pretrained
from dna_mm.tools.cli import cli_main


def _timesformer(**overrides):
    from mmaction.registry import MODELS

    init_default_scope('mmaction')
    return MODELS.build(tiny_backbone('DnATimeSformer', **overrides))


def test_a_pretrained_file_that_does_not_fit_is_one_line(tmp_path, capsys) -> None:
    wide = tmp_path / 'wide.pth'
    torch.save(_timesformer(embed_dims=64).state_dict(), wide)
    alien = tmp_path / 'alien.pth'
    torch.save({'foo.bar': torch.zeros(1)}, alien)
    model = _timesformer()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointMismatchError) as err:
        load_pretrained(model, str(wide))
    assert isinstance(err.value, ValueError)  # what it was: ``except ValueError`` keeps working
    line = str(err.value)
    assert line == (
        f'{wide}: shape mismatch for cls_token: checkpoint [1, 1, 64], model [1, 1, 32] (and 62 more '
        'tensors of another shape): a checkpoint of a model of other sizes'
    )
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # nothing loaded
    with pytest.raises(CheckpointMismatchError, match=rf'^{alien}: unrecognised checkpoint layout'):
        load_pretrained(model, str(alien))

    @cli_main('train.py')
    def train(argv=None):
        load_pretrained(model, str(wide))

    with pytest.raises(SystemExit) as done:
        train([])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f'train.py: error: {line}',
        'train.py: (--debug prints the traceback)',
    ]
