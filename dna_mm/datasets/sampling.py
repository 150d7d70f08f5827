"""Clip sampling by time: frames a fixed number of seconds apart, whatever the video's rate.

MMAction2's ``SampleFrames(clip_len, frame_interval)`` counts frames: 8 frames every 2 are 0.64 s
of a 25 fps clip and 0.27 s of a 60 fps one, so a set that mixes frame rates shows the model
motions at different speeds. :class:`SampleFramesBySeconds` takes ``seconds`` between frames
instead and, per video, samples as ``SampleFrames`` would with::

    frame_interval = max(1, round(seconds × avg_fps))        (avg_fps: from the opening step)

so a clip spans ``clip_len × seconds`` seconds of every video (to a frame).
"""

from __future__ import annotations

from mmaction.datasets.transforms import SampleFrames
from mmaction.registry import TRANSFORMS

from ..errors import ConfigError


def interval_at(seconds: float, fps: float) -> int:
    """Frames ``seconds`` apart at ``fps``: ``max(1, round(seconds × fps))``."""
    return max(1, int(round(seconds * fps)))


@TRANSFORMS.register_module()
class SampleFramesBySeconds(SampleFrames):
    """``SampleFrames`` with ``seconds`` between sampled frames (module docstring).

    Args:
        clip_len: Frames a clip.
        seconds: Seconds between two sampled frames (> 0).
        **kwargs: ``SampleFrames``'s other arguments (``num_clips``, ``test_mode``,
            ``out_of_bound_opt``, ...); not ``frame_interval``, which follows from ``seconds``.
    """

    def __init__(self, clip_len: int, seconds: float, **kwargs) -> None:
        if not seconds > 0:
            raise ConfigError(f'SampleFramesBySeconds: seconds must be > 0, got {seconds!r}')
        if 'frame_interval' in kwargs:
            raise ConfigError('SampleFramesBySeconds: give seconds, not frame_interval')
        super().__init__(clip_len, frame_interval=1, **kwargs)
        self.seconds = seconds

    def transform(self, results: dict) -> dict:
        fps = results.get('avg_fps')
        if not fps:
            raise ConfigError(
                'SampleFramesBySeconds: the pipeline gives no avg_fps before it (open the video with '
                'ScaledPyAVInit, DecordInit or PyAVInit)'
            )
        self.frame_interval = interval_at(self.seconds, fps)
        return super().transform(results)

    def __repr__(self) -> str:
        name = type(self).__name__
        return f'{name}(clip_len={self.clip_len}, seconds={self.seconds}, num_clips={self.num_clips})'
