"""The base config's pipelines, fitted to a custom set's clips.

**Clip sampling.** MMAction2's ``SampleFrames(clip_len, frame_interval)`` takes ``clip_len``
frames ``frame_interval`` apart, a span of ``S = clip_len · frame_interval`` frames. A training
clip starts at a random offset in ``[0, n - S]``; a video of ``n < S`` frames gets indices past
its end, which MMAction2 wraps around (``out_of_bound_opt='loop'``: on a 35-frame clip, 8 frames
every 32 read ``[0 32 29 26 23 20 17 14]``, mostly backwards). :func:`fit_sampling` keeps the
base's ``clip_len`` (the model's frame count) and takes::

    n_ref    = the 5th percentile of the clips' frame counts (the shortest for fewer than 20 clips)
    interval = max(1, min(the base's interval, n_ref // clip_len))

so that the span fits the set's typical clip, which is then read in order, never wrapped; a clip
shorter than the span repeats its last frame (``out_of_bound_opt='repeat_last'``), so its indices
never decrease either. Validation and test pipelines sample the same way.

**Direction.** ``flip=False`` takes the ``Flip`` steps out of the training pipeline (classes that
depend on left and right: "pan left" flipped is "pan right").

**Frame rates.** ``SampleFrames`` counts frames: in a set that mixes 25 and 60 fps clips the same
interval is 2.4 times longer in seconds in one than in the other. The build says so when it
sees mixed rates (:func:`rates_note`) and, asked (``--sample-by-time``), samples by time instead
(:func:`sample_by_seconds`: ``SampleFramesBySeconds``, the seconds the fitted frame interval
makes at the slowest rate, so that no clip is sampled below one frame a step).

**Decoding.** The build checks every video with dna_mm's PyAV reader; the written pipelines read
with it too (:func:`read_with_pyav`): a base's ``DecordInit`` / ``ScaledDecordInit`` becomes
``ScaledPyAVInit`` (same arguments) and ``DecordDecode`` becomes ``SortedDecordDecode``, so a
video that passed the build (an index-less ``.mkv`` FFmpeg reads, which decord cannot open) is
read in training and test as it was checked.

**Steps that need a package dna_mm does not install** are replaced by an equivalent that needs
none (:data:`REPLACEMENTS`: pytorchvideo's RandAugment by torchvision's, the same operation on
every frame of a clip), or refused with one line (:func:`check_steps`).
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ...errors import ConfigError

SPLITS = ('train', 'val', 'test')
#: the frame-count percentile the span must fit
REFERENCE_PERCENTILE = 5


@dataclass
class ClipSampling:
    """What :func:`fit_sampling` chose, from the clips' frame counts."""

    clip_len: int
    frame_interval: int
    base_interval: int
    shortest: int
    median: float
    reference: int
    shorter: int  # clips shorter than the span (their last frame repeats)

    @property
    def span(self) -> int:
        return self.clip_len * self.frame_interval

    def describe(self) -> str:
        kept = (
            'the base'
            if self.frame_interval == self.base_interval
            else f'the base: every {self.base_interval}'
        )
        line = (
            f'clip sampling: {self.clip_len} frames every {self.frame_interval} ({kept}), a span of '
            f'{self.span} frames; the clips have {self.shortest} frames at the shortest, '
            f'{self.median:g} at the median'
        )
        if self.shorter:
            plural = 's' if self.shorter > 1 else ''
            line += f'; {self.shorter} clip{plural} shorter than the span repeat their last frame'
        return line


def reference_length(frames: list[int]) -> int:
    """The :data:`REFERENCE_PERCENTILE` th percentile of ``frames`` (lower nearest rank)."""
    ordered = sorted(frames)
    return ordered[(len(ordered) - 1) * REFERENCE_PERCENTILE // 100]


def _sample_steps(pipeline: list[dict]) -> list[dict]:
    return [step for step in pipeline if isinstance(step, dict) and step.get('type') == 'SampleFrames']


def fit_sampling(pipelines: dict[str, list[dict]], frames: list[int]) -> Optional[ClipSampling]:
    """Set ``frame_interval`` and ``out_of_bound_opt='repeat_last'`` in every ``SampleFrames``
    step of ``pipelines`` (split -> steps, changed in place) from the clips' frame counts (every
    readable clip of the set) (see the module docstring). ``None`` when the training pipeline has no
    ``SampleFrames`` (e.g. ``UniformSample``, which never wraps) or no frame count is known."""
    train = _sample_steps(pipelines.get('train') or [])
    if not train or not frames:
        return None
    clip_len, base_interval = int(train[0].get('clip_len', 1)), int(train[0].get('frame_interval', 1))
    reference = reference_length(frames)
    interval = max(1, min(base_interval, reference // clip_len))
    for steps in pipelines.values():
        for step in _sample_steps(steps):
            if step.get('clip_len', 1) == clip_len and step.get('frame_interval', 1) == base_interval:
                step['frame_interval'] = interval
            step['out_of_bound_opt'] = 'repeat_last'
    return ClipSampling(
        clip_len,
        interval,
        base_interval,
        min(frames),
        statistics.median(frames),
        reference,
        sum(n < clip_len * interval for n in frames),
    )


def drop_flip(pipelines: dict[str, list[dict]]) -> int:
    """Take the ``Flip`` steps out of the training pipeline; returns how many."""
    train = pipelines.get('train') or []
    kept = [step for step in train if not (isinstance(step, dict) and step.get('type') == 'Flip')]
    pipelines['train'] = kept
    return len(train) - len(kept)


#: the spread of frame rates (fastest / slowest) from which the build proposes sampling by time
MIXED_RATES = 1.2


def rates_note(rates: list[float], sampling: Optional[ClipSampling], by_time: bool) -> Optional[str]:
    """What the build says of the clips' frame rates when they are mixed (the fastest at least
    :data:`MIXED_RATES` times the slowest): what a frame interval means in seconds at each end,
    and the seconds :func:`sample_by_seconds` would take, the fitted interval at the slowest rate
    (``by_time``: it took them)."""
    if not rates or sampling is None or max(rates) < MIXED_RATES * min(rates):
        return None
    lo, hi = min(rates), max(rates)
    seconds = sampling.frame_interval / lo
    if by_time:
        return (
            f'clip sampling by time: {sampling.clip_len} frames every {seconds:.3f} s '
            f'({sampling.frame_interval} frames at the slowest rate, {lo:g} fps), a span of '
            f'{sampling.clip_len * seconds:.2f} s in every clip ({lo:g}-{hi:g} fps)'
        )
    span = sampling.span
    return (
        f'the clips mix frame rates ({lo:g}-{hi:g} fps): {sampling.clip_len} frames every '
        f'{sampling.frame_interval} are {span / lo:.2f} s of a {lo:g} fps clip and {span / hi:.2f} s of a '
        f'{hi:g} fps one; --sample-by-time samples every {seconds:.3f} s instead (a span of '
        f'{sampling.clip_len * seconds:.2f} s in every clip)'
    )


def sample_by_seconds(pipelines: dict[str, list[dict]], seconds: float) -> int:
    """Every ``SampleFrames`` step becomes ``SampleFramesBySeconds`` with ``seconds`` between
    frames (its other arguments kept); returns how many."""
    replaced = 0
    for steps in pipelines.values():
        for i, step in enumerate(steps):
            if isinstance(step, dict) and step.get('type') == 'SampleFrames':
                kept = {k: v for k, v in step.items() if k not in ('type', 'frame_interval')}
                steps[i] = dict(type='SampleFramesBySeconds', seconds=round(seconds, 6), **kept)
                replaced += 1
    return replaced


#: decord's steps -> the same steps on dna_mm's PyAV reader
PYAV_STEPS = {
    'DecordInit': 'ScaledPyAVInit',
    'ScaledDecordInit': 'ScaledPyAVInit',
    'DecordDecode': 'SortedDecordDecode',
}


def read_with_pyav(pipelines: dict[str, list[dict]]) -> int:
    """Replace decord's opening and decoding steps by dna_mm's PyAV reader's (:data:`PYAV_STEPS`,
    their arguments kept; ``DecordDecode(mode='efficient')``, decord's keyframe approximation,
    becomes the exact decode); returns how many steps were replaced."""
    replaced = 0
    for steps in pipelines.values():
        for i, step in enumerate(steps):
            new = PYAV_STEPS.get(step.get('type')) if isinstance(step, dict) else None
            if new is not None:
                steps[i] = {**{k: v for k, v in step.items() if k != 'mode'}, 'type': new}
                replaced += 1
    return replaced


def _torchvision_randaugment(step: dict) -> dict:
    """pytorchvideo's ``RandAugment(magnitude, num_layers)`` (magnitude on a 0-10 scale, one draw
    per clip) as torchvision's ``RandAugment(num_ops, magnitude, num_magnitude_bins=11)`` through
    MMAction2's ``TorchVisionWrapper``: one draw per call, applied to every frame of the clip."""
    return dict(
        type='TorchVisionWrapper',
        op='RandAugment',
        num_ops=step.get('num_layers', 2),
        magnitude=step.get('magnitude', 9),
        num_magnitude_bins=11,
    )


#: (step type, op) -> the equivalent step that needs no extra package, and what it needs
REPLACEMENTS: dict[tuple[str, str], tuple[Callable[[dict], dict], str]] = {
    ('PytorchVideoWrapper', 'RandAugment'): (_torchvision_randaugment, 'pytorchvideo')
}


def check_steps(pipelines: dict[str, list[dict]], build: Callable[[dict], Any]) -> list[str]:
    """Build every step of ``pipelines`` with ``build`` (the transforms registry); a step that
    needs a package that is not installed is replaced from :data:`REPLACEMENTS`, or refused
    (``ConfigError`` naming the step and the package). Returns a sentence per replacement."""
    from ...utils.build_errors import config_mistake

    notes = []
    for split, steps in pipelines.items():
        for i, step in enumerate(steps):
            try:
                build(copy.deepcopy(step))
            except (ImportError, RuntimeError) as err:
                missing = config_mistake(err)
                if missing is None:
                    raise
                replace = REPLACEMENTS.get((step.get('type'), step.get('op')))
                if replace is None:
                    raise ConfigError(f'{split}_pipeline[{i}]: {missing}') from None
                steps[i] = replace[0](step)
                notes.append(
                    f"{split}_pipeline[{i}]: {step.get('type')}(op={step.get('op')!r}) needs {replace[1]}, "
                    f"which dna_mm does not install: {steps[i]['type']}(op={steps[i]['op']!r}) instead"
                )
    return notes
