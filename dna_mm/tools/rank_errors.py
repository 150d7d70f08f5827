"""A mistake in the input, told once for all the ranks of a torchrun run.

Every rank of a distributed run reads the same config and command line, so a mistake in them
stops every rank with the same line, and torchrun's agent then adds its own ~20-line failure
report: on 8 GPUs, 8 copies of the line among 20 lines of noise. Under dna_mm's torchrun
(:mod:`dna_mm.tools.torchrun`, what ``tools/dist_train.sh`` / ``dist_test.sh`` run), the agent
gives its ranks a folder (:data:`FOLDER_VAR`); a rank stopped by a user's mistake writes its
lines there (:func:`hand_to_agent`) instead of printing them, and the agent, when the first rank
to fail ended so (exit status 2), prints each different line once (:func:`told_lines`) in place of
its report. A crash keeps torchrun's report (its traceback), and a rank under plain torchrun,
``srun`` or started by hand prints its lines itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from ..utils.parent_death import AGENT_PID_VAR

#: the folder dna_mm's torchrun gives its ranks for their lines
FOLDER_VAR = 'DNA_MM_RANK_ERRORS'


def hand_to_agent(lines: str) -> bool:
    """Write ``lines`` (what the tool would print on stderr) for dna_mm's torchrun agent to print,
    as ``<folder>/<RANK>.txt``; ``False`` (the caller prints them) where no such agent waits for
    them: this process is not a rank the agent started (a tool a rank runs inherits the
    environment, not the agent), or the folder cannot be written."""
    folder, rank = os.environ.get(FOLDER_VAR), os.environ.get('RANK')
    if not folder or rank is None or str(os.getppid()) != os.environ.get(AGENT_PID_VAR):
        return False
    try:
        (Path(folder) / f'{int(rank)}.txt').write_text(lines)
    except (OSError, ValueError):
        return False
    return True


def told_lines(folder: str) -> Optional[str]:
    """What the ranks handed to the agent in ``folder``: each different text once, in rank order,
    with the ranks it came from where the ranks differ (``[ranks 2, 3] ...``); ``None`` if none."""
    texts: dict[str, list[int]] = {}
    files = [p for p in Path(folder).glob('*.txt') if p.stem.isdigit()]
    for path in sorted(files, key=lambda p: int(p.stem)):
        texts.setdefault(path.read_text().rstrip('\n'), []).append(int(path.stem))
    if not texts:
        return None
    if len(texts) == 1:
        return next(iter(texts))
    out = []
    for text, ranks in texts.items():
        who = f'[rank{"s" if len(ranks) > 1 else ""} {", ".join(map(str, ranks))}]'
        out += [f'{who} {line}' for line in text.splitlines()]
    return '\n'.join(out)
