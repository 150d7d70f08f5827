"""Video data: robust MMAction2 dataset, protocol split rules and the lists they write, the
embedded demo set, faster decord transforms; MMDetection's COCO dataset with its annotation
file checked (:mod:`.coco_dataset`, :mod:`.coco_report`); the data tools' work (:mod:`.preparation`,
:mod:`.custom`, :mod:`.decoding_check`, :func:`.protocols.build_annotations`), which returns
what a tool prints or says it through the tool's ``echo`` (its ``print``)."""

from . import coco_dataset  # noqa: F401  (CheckedCocoDataset: MMDetection's, checked; registers itself)
from .protocols import ProtocolError, label_map, ntu60_splits, smarthome_splits
from .rawframe_dataset import RobustRawframeDataset
from .sampling import SampleFramesBySeconds
from .skipped_samples import SkippedSamplesHook, SkippedVideosHook
from .transforms import ScaledDecordInit, ScaledPyAVInit, SortedDecordDecode
from .video_dataset import RobustVideoDataset

__all__ = [
    'RobustVideoDataset',
    'RobustRawframeDataset',
    'SkippedSamplesHook',
    'SkippedVideosHook',
    'ProtocolError',
    'label_map',
    'smarthome_splits',
    'ntu60_splits',
    'ScaledDecordInit',
    'ScaledPyAVInit',
    'SortedDecordDecode',
    'SampleFramesBySeconds',
]
