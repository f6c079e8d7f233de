"""A job's statuses and the transitions between them. No database here.

This is the life of a job (DESIGN section 2) in one place. ``TRANSITIONS`` lists every move
a status change may make, each with the named statements of ``jobqueue/sql/<vendor>.sql``
that make it; ``tests/storage/test_transitions.py`` runs every statement that writes a job
row on rows in every status, and fails on a move that is not listed here (and on a listed
move that no statement makes).
"""

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

# What an operator's Retry sends back to pending (operator_retry), and what Discard takes
# (operator_discard): the admin's buttons, `manage.py jobs` and the store agree on these.
RETRYABLE = (FAILED, ABANDONED, DISCARDED)
DISCARDABLE = (PENDING, RUNNING, FAILED, ABANDONED)

# Every job is born pending (enqueue, enqueue_one, enqueue_keyless), then moves only so:
TRANSITIONS: dict[str, frozenset[str]] = {
    # claim; operator_discard
    PENDING: frozenset({RUNNING, DISCARDED}),
    RUNNING: frozenset(
        {
            # claim's done part (PostgreSQL) or succeed_many (SQLite)
            SUCCEEDED,
            # retry; snooze; unclaim (held, never started); recover (never started, or a
            # crash under on_crash="retry" with crashes left)
            PENDING,
            # fail: out of attempts, PermanentError, an outcome that cannot be stored
            FAILED,
            # recover: a crash under on_crash="park", or the MAX_CRASHES-th crash
            ABANDONED,
            # operator_discard (its worker is fenced off); discard (the handler raised
            # Discard)
            DISCARDED,
        }
    ),
    # final: only retention deletes it
    SUCCEEDED: frozenset(),
    # operator_retry; operator_discard
    FAILED: frozenset({PENDING, DISCARDED}),
    ABANDONED: frozenset({PENDING, DISCARDED}),
    # operator_retry
    DISCARDED: frozenset({PENDING}),
}


def can_transition(source: str, target: str) -> bool:
    return target in TRANSITIONS[source]
