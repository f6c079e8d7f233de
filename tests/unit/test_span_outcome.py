"""The execute span's jobqueue.outcome: how run() ends an attempt, in the Sentry tags' words."""

from dataclasses import replace

import pytest

from jobqueue import Discard, JobRunAborted, PermanentError, Snooze
from jobqueue.runtime.attempt import HandlerLeftTransaction, MalformedArguments, span_outcome
from jobqueue.store.jobs import ClaimedJob

SECOND_OF_THREE = ClaimedJob(
    id=7,
    task_name="t",
    queue="default",
    priority=0,
    args=[],
    kwargs={},
    attempt=2,
    max_attempts=3,
    crashes=0,
    token="x",
)
LAST = replace(SECOND_OF_THREE, attempt=3)


@pytest.mark.parametrize(
    ("raised", "second", "last"),
    [
        (None, "succeeded", "succeeded"),
        (Snooze(5), "snoozed", "snoozed"),
        (Discard("gone"), "discarded", "discarded"),
        (JobRunAborted("lease lost"), "aborted", "aborted"),
        (ValueError("boom"), "retry", "failed"),
        (KeyboardInterrupt(), "retry", "failed"),
        (PermanentError("no"), "failed", "failed"),
        (MalformedArguments("args is null"), "failed", "failed"),
        (HandlerLeftTransaction("left atomic()"), "retry", "failed"),
        (HandlerLeftTransaction("left atomic()", permanent=True), "failed", "failed"),
    ],
)
def test_each_way_an_attempt_ends_has_its_outcome(raised, second, last):
    assert span_outcome(SECOND_OF_THREE, raised) == second
    assert span_outcome(LAST, raised) == last
