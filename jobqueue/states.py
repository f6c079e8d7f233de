"""A job's statuses and the transitions between them. No database here."""

from __future__ import annotations

from django.db import models


class Status(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABANDONED = "abandoned"
    DISCARDED = "discarded"


PENDING = Status.PENDING.value
RUNNING = Status.RUNNING.value
SUCCEEDED = Status.SUCCEEDED.value
FAILED = Status.FAILED.value
ABANDONED = Status.ABANDONED.value
DISCARDED = Status.DISCARDED.value

# An unfinished job holds its idempotency key; every other status frees it.
UNFINISHED = (PENDING, RUNNING)
# Retention may delete these (abandoned work waits for an operator, never for a timer).
PRUNABLE = (SUCCEEDED, FAILED, DISCARDED)

TRANSITIONS: dict[str, frozenset[str]] = {
    # claim; operator discard
    PENDING: frozenset({RUNNING, DISCARDED}),
    # success; retry, snooze or crash recovery; out of attempts; parked crash; operator discard
    RUNNING: frozenset({SUCCEEDED, PENDING, FAILED, ABANDONED, DISCARDED}),
    SUCCEEDED: frozenset(),
    # operator retry; operator discard
    FAILED: frozenset({PENDING, DISCARDED}),
    ABANDONED: frozenset({PENDING, DISCARDED}),
    DISCARDED: frozenset({PENDING}),
}


def can_transition(source: str, target: str) -> bool:
    return target in TRANSITIONS[source]
