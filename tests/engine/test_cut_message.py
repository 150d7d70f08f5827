"""A loader worker killed half-way through writing a batch ends the run with one line, at once,
not a read that waits forever for the rest of its message (the other workers hold the result
pipe open: no end of file).

Real processes: a torch ``DataLoader`` of two workers, one of which writes the start of a batch
message to its result pipe and kills itself (``SIGKILL``) before the main thread asks for that
batch, or while the main thread waits for it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO

SCRIPT = '''
import os, signal, struct, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
from dna_mm.engine.loader_workers import describe_lost_worker, watch_worker_deaths

WHEN = sys.argv[1]


class CutsItsMessage(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        if i == 8:  # batch 2, worker 0's second: the start of a 1 MiB message, then SIGKILL
            frame = sys._getframe()
            while frame.f_code.co_name != '_worker_loop':
                frame = frame.f_back
            if WHEN == 'during':
                time.sleep(2)  # the main thread waits for it by then
            writer = frame.f_locals['data_queue']._writer
            os.write(writer.fileno(), struct.pack('!i', 1 << 20) + b'x' * 100)
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.zeros(4)


watch_worker_deaths()
loader = DataLoader(CutsItsMessage(), batch_size=4, num_workers=2, prefetch_factor=1)
start = time.time()
try:
    for n, _ in enumerate(loader):
        if n == 1 and WHEN == 'before':
            time.sleep(3)  # the worker is dead by the next fetch
            start = time.time()
except RuntimeError as err:
    print(f'{describe_lost_worker(err)} | {time.time() - start:.1f}', flush=True)
'''


@pytest.mark.parametrize('when', ['before', 'during'], ids=['dead before the fetch', 'dies during the fetch'])
def test_a_worker_killed_mid_message_stops_the_loader_at_once(when: str, tmp_path) -> None:
    script = tmp_path / 'cut.py'
    script.write_text(SCRIPT)
    env = {'PYTHONPATH': str(REPO), 'OMP_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin'}
    proc = subprocess.run(
        [sys.executable, str(script), when], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line, took = proc.stdout.strip().splitlines()[-1].split(' | ')
    assert line.startswith('a data-loader worker 0 of 2 (pid ') and 'was killed by SIGKILL' in line, line
    assert float(took) < 10, took  # torch's read would wait forever
