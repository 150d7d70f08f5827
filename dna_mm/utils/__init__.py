"""Utilities: mmengine's metafile reader made to read MMAction2 1.1.0's index
(:mod:`.mim_compat`). Checkpoint loading is :mod:`dna_mm.checkpoint`."""
