"""``SkippedSamplesHook``: its arguments, and its earlier name (``SkippedVideosHook``), which a
config saved by an earlier run names, still built, with a warning giving the new one. The counts it
logs are tested in real runs: ``test_video_datasets.py`` (epochs), ``test_coco_dataset_errors.py``
(iterations)."""

from __future__ import annotations

import pytest
from mmengine.registry import HOOKS

import dna_mm  # noqa: F401  (registers the hooks)
from dna_mm.datasets import SkippedSamplesHook
from dna_mm.errors import ConfigError


def test_the_earlier_name_builds_the_hook_with_a_warning_naming_the_new_one() -> None:
    with pytest.warns(FutureWarning, match="SkippedSamplesHook"):
        hook = HOOKS.build(dict(type='SkippedVideosHook'))
    assert isinstance(hook, SkippedSamplesHook) and hook.interval == 500


@pytest.mark.parametrize('interval', [0, 2.5, '10'])
def test_a_bad_interval_is_named(interval) -> None:
    expected = f'SkippedSamplesHook: interval must be an int >= 1, got {interval!r}$'
    with pytest.raises(ConfigError, match=expected):
        HOOKS.build(dict(type='SkippedSamplesHook', interval=interval))
