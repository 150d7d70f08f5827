"""Shared fixtures. Every test runs on CPU with tiny models."""
from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault('OMP_NUM_THREADS', '2')


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line('markers', 'slow: long-running; skipped by `make test` and CI, '
                                       'run by `make test-slow`')
