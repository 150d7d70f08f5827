"""Command line of the annotation builders (``tools/data/{smarthome,ntu60}/build_annotations.py``)."""

from __future__ import annotations

import argparse
from typing import Optional

from ..apis.cli import DEBUG_HELP, cli_main
from .protocols import find_videos, label_map, ntu60_splits, smarthome_splits, write_lists


@cli_main('build_annotations.py')
def build_cli(argv: Optional[list[str]], dataset: str) -> int:
    """Shared CLI of the two builders (``dataset``: ``'ntu60'`` or ``'smarthome'``): scan, split,
    report, write."""
    smarthome = dataset == 'smarthome'
    p = argparse.ArgumentParser(
        description=f'Write MMAction2 VideoDataset lists for '
        f'{"Toyota Smarthome" if smarthome else "NTU RGB+D 60"} (the published protocols).'
    )
    p.add_argument('--video-dir', required=True, help='folder with the videos (searched recursively)')
    p.add_argument('--out-dir', required=True, help='where train.txt / val.txt / test.txt go')
    p.add_argument(
        '--protocol', required=True, choices=['CS', 'CV1', 'CV2'] if smarthome else ['xsub', 'xview']
    )
    if not smarthome:
        p.add_argument(
            '--exclude-missing-skeletons',
            action='store_true',
            help='drop the 302 samples without skeletons (off by default)',
        )
    p.add_argument('--debug', action='store_true', help=DEBUG_HELP)
    args = p.parse_args(argv)
    paths = find_videos(args.video_dir, ('.mp4',) if smarthome else ('.avi', '.mp4'))
    if smarthome:
        result = smarthome_splits(paths, args.protocol)
    else:
        missing = label_map('ntu60_samples_with_missing_skeletons')
        result = ntu60_splits(paths, args.protocol, set(missing) if args.exclude_missing_skeletons else None)
    files = write_lists(result, args.out_dir)
    print(f'{dataset} {args.protocol}: {len(paths)} videos found in {args.video_dir}')
    print(result.summary())
    print('wrote ' + ', '.join(files))
    return 0
