"""Fixtures for the webhook tests: a real HTTP receiver on 127.0.0.1 (see receiver.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.webhooks.receiver import Receiver, running_receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 and a free port; it answers 200 unless told otherwise."""
    yield from running_receiver()
