"""What the annotation builders (``tools/data/{smarthome,ntu60}/build_annotations.py``) do with
their arguments."""

from __future__ import annotations

from typing import Optional

from .protocols import find_videos, label_map, ntu60_splits, smarthome_splits, write_lists


def build_annotations(
    dataset: str,
    video_dir: str,
    out_dir: str,
    protocol: str,
    exclude_missing_skeletons: Optional[bool] = None,
) -> int:
    """The two builders' work (``dataset``: ``'ntu60'`` or ``'smarthome'``): scan ``video_dir``,
    split by ``protocol``, report, write the lists to ``out_dir``; returns the exit status.
    ``exclude_missing_skeletons`` (NTU only) drops the samples without skeletons."""
    smarthome = dataset == 'smarthome'
    paths = find_videos(video_dir, ('.mp4',) if smarthome else ('.avi', '.mp4'))
    if smarthome:
        result = smarthome_splits(paths, protocol)
    else:
        missing = label_map('ntu60_samples_with_missing_skeletons')
        result = ntu60_splits(paths, protocol, set(missing) if exclude_missing_skeletons else None)
    files = write_lists(result, out_dir)
    print(f'{dataset} {protocol}: {len(paths)} videos found in {video_dir}')
    print(result.summary())
    print('wrote ' + ', '.join(files))
    return 0
