#!/usr/bin/env python
"""Build MMAction2 annotation lists for Toyota Smarthome (CS / CV1 / CV2), the published protocols.

    python tools/data/smarthome/build_annotations.py --video-dir DIR --out-dir OUT --protocol {CS,CV1,CV2}

Paths in the lists are relative to DIR; labels follow the shipped label maps
(dna_mm/datasets/label_maps). Prints per-split counts and the classes per split; a file name
that does not parse stops the build with a message naming it.
"""

import sys

from dna_mm.datasets.cli import build_cli

if __name__ == '__main__':
    sys.exit(build_cli(dataset='smarthome'))
