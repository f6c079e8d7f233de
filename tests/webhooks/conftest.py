"""Fixtures for the webhook tests: a real HTTP receiver on 127.0.0.1 (see receiver.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jobqueue import conf
from tests.webhooks.receiver import Receiver, running_receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 and a free port; it answers 200 unless told otherwise."""
    yield from running_receiver()


# The test settings allow no internal network, as a project's do by default, so that the
# guard's tests see loopback refused; a test that delivers to the receiver asks for this.
LOOPBACK = {"WEBHOOKS": {"ALLOW_NETWORKS": ["127.0.0.0/8"]}}


@pytest.fixture
def allow_loopback(settings: Any) -> None:
    """``JOBQUEUE["WEBHOOKS"]["ALLOW_NETWORKS"] = ["127.0.0.0/8"]`` for this test only."""
    settings.JOBQUEUE = {**settings.JOBQUEUE, **LOOPBACK}
    assert conf.get().webhooks.allow_networks
