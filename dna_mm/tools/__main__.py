"""``python -m dna_mm.tools NAME [ARGS...]``: run a shipped tool (:mod:`dna_mm.tools`); with no
name, or ``--list``, list them."""

from __future__ import annotations

import os
import sys

from . import __doc__ as _doc
from . import run, scripts


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ('-h', '--help', '--list'):
        try:
            print(_doc.strip().splitlines()[3].strip())
            print('tools:', *scripts(), sep='\n  ')
            sys.stdout.flush()
        except BrokenPipeError:  # a reader that stopped early (dna_mm --list | head): not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0 if argv else 2)
    try:
        status = run(argv[0], argv[1:])
    except LookupError as err:  # an unknown tool or shipped config: one line, a user's mistake
        print(f'dna_mm: error: {err.args[0]}', file=sys.stderr)
        sys.exit(2)
    sys.exit(status)


if __name__ == '__main__':
    main()
