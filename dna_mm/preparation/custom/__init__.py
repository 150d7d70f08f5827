"""Your own videos as a dataset: read a folder or a list, check the videos once, split, write
the lists, the label map and a config with a recipe sized to the data (docs/datasets/custom.md)."""

from .build import BuildRequest, build_dataset, outputs
from .pipelines import ClipSampling, fit_sampling
from .recipe import Recipe, size_recipe
from .source import Sample, Source, read_source, stratified_split
from .videos import VideoCheck, check_video, check_videos

__all__ = [
    'BuildRequest',
    'build_dataset',
    'outputs',
    'ClipSampling',
    'fit_sampling',
    'Recipe',
    'size_recipe',
    'Sample',
    'Source',
    'read_source',
    'stratified_split',
    'VideoCheck',
    'check_video',
    'check_videos',
]
