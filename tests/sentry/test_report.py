"""jobqueue.contrib.sentry: each failed attempt reaches Sentry, through sentry-sdk's own client
and a transport that keeps the envelopes instead of sending them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport

from jobqueue.contrib.sentry import report
from jobqueue.runtime import attempt as attempts
from jobqueue.store.jobs import Store
from jobqueue.tasks.base import get
from jobqueue.testing import run_jobs
from tests.testapp import tasks

pytestmark = pytest.mark.django_db


class KeptEnvelopes(Transport):
    """sentry-sdk's transport interface, keeping each event instead of posting it."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[dict[str, Any]] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        for item in envelope.items:
            if item.type == "event" and item.payload.json is not None:
                self.events.append(item.payload.json)


@pytest.fixture
def transport() -> Iterator[KeptEnvelopes]:
    kept = KeptEnvelopes()
    sentry_sdk.init(dsn="https://key@sentry.invalid/1", transport=kept)
    report.connect()
    try:
        yield kept
    finally:
        report.disconnect()
        sentry_sdk.get_client().close()
        sentry_sdk.get_global_scope().set_client(None)


def job_events(kept: KeptEnvelopes) -> list[dict[str, Any]]:
    """The events the receiver sent (sentry-sdk's logging integration may add its own)."""
    return [e for e in kept.events if "jobqueue.job_id" in e.get("tags", {})]


def test_each_failed_attempt_is_reported_with_the_exception_and_the_job(
    transport: KeptEnvelopes,
) -> None:
    job = tasks.always_fails.enqueue()
    run_jobs()

    events = job_events(transport)
    assert [e["tags"]["jobqueue.attempt"] for e in events] == ["1", "2", "3"]
    assert [e["tags"]["jobqueue.outcome"] for e in events] == ["retry", "retry", "failed"]
    for number, event in enumerate(events, start=1):
        assert event["tags"]["jobqueue.task"] == "tests.testapp.tasks.always_fails"
        assert event["tags"]["jobqueue.queue"] == "default"
        assert event["tags"]["jobqueue.job_id"] == str(job.pk)
        (exception,) = event["exception"]["values"]
        assert exception["type"] == "ValueError"
        assert exception["value"] == f"broken on attempt {number}"
        # The live exception, not its stored text: Sentry gets the handler's frame.
        frames = exception["stacktrace"]["frames"]
        assert frames[-1]["function"] == "always_fails"
    # And sentry-sdk's logging integration sends the worker's ERROR line on its own, as the
    # page says: one more event, with no job tags.
    logged = [e for e in transport.events if e.get("logger") == "jobqueue"]
    assert [e["logentry"]["formatted"].split(":")[0] for e in logged] == [
        f"job {job.pk} (tests.testapp.tasks.always_fails) failed for good on attempt 3 of 3"
    ]


def test_successes_snoozes_and_discards_send_nothing(transport: KeptEnvelopes) -> None:
    tasks.add.enqueue(1, 2)
    tasks.snoozes_once.enqueue()
    tasks.discards.enqueue()
    outcomes = run_jobs().outcomes

    assert sorted(o.status for o in outcomes) == ["discarded", "pending", "succeeded", "succeeded"]
    assert job_events(transport) == []


def test_a_timeout_is_reported_from_its_error_entry(transport: KeptEnvelopes) -> None:
    # A timeout is recorded by the worker's main loop, where no exception is in flight: the
    # receiver sends the stored entry instead.
    job = tasks.sleeps_past_timeout.enqueue()
    store = Store()
    (claimed,) = store.claim(worker="test-sentry", task_names=[job.task_name], queues=None, limit=1)
    task = get(job.task_name)
    assert task is not None
    assert sys.exc_info() == (None, None, None)
    attempts.record_timeout(store, attempts.Attempt(job=claimed, task=task), "test-sentry")

    (event,) = job_events(transport)
    assert event["tags"]["jobqueue.outcome"] == "retry"
    assert event["tags"]["jobqueue.attempt"] == "1"
    (exception,) = event["exception"]["values"]
    assert exception["type"] == "jobqueue.runtime.attempt.AttemptTimeout"
    assert exception["value"] == "attempt 1 of 3 timed out after 1 s (the task's timeout)"
    assert event["contexts"]["jobqueue"]["worker"] == "test-sentry"


def test_a_failing_sentry_client_does_not_fail_the_outcome(
    transport: KeptEnvelopes, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("sentry is down")

    monkeypatch.setattr(sentry_sdk, "capture_exception", broken)
    job = tasks.permanent.enqueue()
    run_jobs()

    job.refresh_from_db()
    assert job.status == "failed"
    assert job.attempts == 1


def test_the_check_names_the_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    assert report.check_sentry_sdk() == []
    monkeypatch.setitem(sys.modules, "sentry_sdk", None)  # import now raises ImportError
    (error,) = report.check_sentry_sdk()
    assert error.id == "jobqueue_sentry.E001"
    assert "pip install sentry-sdk" in (error.hint or "")
