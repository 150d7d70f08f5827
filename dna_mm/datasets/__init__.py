"""Video data: robust MMAction2 dataset, protocol split rules (+ their CLI), the embedded demo set,
faster decord transforms."""

from .protocols import ProtocolError, label_map, ntu60_splits, smarthome_splits
from .transforms import ScaledDecordInit, ScaledPyAVInit, SortedDecordDecode
from .video_dataset import RobustVideoDataset, SkippedVideosHook

__all__ = [
    'RobustVideoDataset',
    'SkippedVideosHook',
    'ProtocolError',
    'label_map',
    'smarthome_splits',
    'ntu60_splits',
    'ScaledDecordInit',
    'ScaledPyAVInit',
    'SortedDecordDecode',
]
