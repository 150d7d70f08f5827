#!/usr/bin/env python
"""Re-encode a video tree so that the short side is N pixels (Kinetics-400: 256, as the paper's authors).

    python tools/data/resize_videos.py SRC_DIR OUT_DIR --short-side 256 \
        [--workers N] [--ext .mp4] [--keyint K]

Same relative layout under OUT_DIR, H.264 in .mp4 (PyAV's bundled FFmpeg), aspect kept, even
sides. Parallel with a progress bar; a second run skips outputs that exist and verify (decord
decodes them, size and frame count match the source); a killed run leaves only ``*.part``
files. Failures go to OUT_DIR/failed.txt and make the exit status 1. docs/datasets/kinetics400.md.
"""

import sys

from dna_mm.datasets.preparation.resize import main

if __name__ == '__main__':
    sys.exit(main())
