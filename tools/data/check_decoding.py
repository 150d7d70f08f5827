#!/usr/bin/env python
"""Check that video readers return the right frames: each reader against every frame decoded in
sequence (PyAV, ordered by presentation timestamp), in increasing, random and wrapped access.

    python tools/data/check_decoding.py VIDEO [VIDEO ...] [--readers dna_mm decord]
    # the codec / container matrix of docs/datasets/decoding.md (generated files)
    python tools/data/check_decoding.py --kinds [KIND ...] [--out-dir DIR]

Prints a table (a row per file: frame count, and per reader `exact` or what differs); exit
status 1 if dna_mm's reader (the first of --readers) is not exact on a readable file.
"""

import sys

from dna_mm.datasets.decoding_check import main

if __name__ == '__main__':
    sys.exit(main())
