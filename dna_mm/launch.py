"""Run a stock OpenMMLab script with dna_mm imported first.

    python -m dna_mm.launch SCRIPT [ARGS...]

Scripts such as MMAction2's ``.mim/tools/train.py`` parse the config before its
``custom_imports`` run; configs with ``mmaction::`` or ``dna_mm::`` bases need dna_mm's
in-memory fix of mmengine's base reader (:mod:`dna_mm.utils.mim_compat`) at that point. dna_mm's
own tools: ``python -m dna_mm.tools NAME`` (:mod:`dna_mm.tools`). This imports dna_mm,
then runs ``SCRIPT`` as ``__main__`` with ``ARGS`` as its ``sys.argv[1:]``.
"""

from __future__ import annotations

import runpy
import sys


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ('-h', '--help'):
        print(__doc__.strip().splitlines()[2].strip())
        sys.exit(0 if argv else 2)
    import dna_mm  # noqa: F401  (registrations and the mmengine metafile fix)

    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name='__main__')


if __name__ == '__main__':
    main(sys.argv[1:])
