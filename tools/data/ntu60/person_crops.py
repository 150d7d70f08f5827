#!/usr/bin/env python
"""NTU RGB+D 60 person-centric crops from the skeleton files (what the paper's authors trained on).

    python tools/data/ntu60/person_crops.py --video-dir V --skeleton-dir S --out-dir O \
        [--size 224] [--margin 0.1] [--workers N] [--missing {full,skip}]

Writes O/SsssCcccPpppRrrrAaaa.mp4 (size x size): every frame cut to the square box of all
skeleton joints (+ margin) and resized. Samples without a usable skeleton: whole frame
(--missing full, listed in O/full_frame.txt) or left out (skip, O/left_out.txt). Resumable and
verified like tools/data/resize_videos.py; failures in O/failed.txt, exit status 1.
Then: tools/data/ntu60/build_annotations.py --video-dir O. docs/datasets/ntu60.md.
"""

import sys

from dna_mm.datasets.preparation.person_crops import main

if __name__ == '__main__':
    sys.exit(main())
