"""pytest fixtures for the test kit: add ``pytest_plugins = ["jobqueue.pytest_plugin"]``
to your root ``conftest.py``. Needs pytest-django for the database fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobqueue.testing import Captured, Clock, Run, capture, run_jobs


@pytest.fixture
def jobqueue_captured() -> Iterator[Captured]:
    """Jobs enqueued during the test, recorded and NOT written (no database needed)."""
    with capture(write=False) as captured:
        yield captured


@pytest.fixture
def jobqueue_enqueued(db: None) -> Iterator[Captured]:
    """Jobs enqueued during the test, recorded AND written, so ``jobqueue_run`` runs them."""
    with capture(write=True) as captured:
        yield captured


@pytest.fixture
def jobqueue_run(db: None) -> Callable[..., Run]:
    """``jobqueue_run(**options)`` is :func:`jobqueue.testing.run_jobs` with one clock per test."""
    clock = Clock()

    def run(**options: Any) -> Run:
        options.setdefault("clock", clock)
        return run_jobs(**options)

    return run
