"""What ``job_started``, ``job_finished`` and ``job_aborted`` tell a receiver about each
attempt, in a worker in this process: the queue, the wait from due to start, the outcome
(retried and snoozed told apart, though both leave the job pending) and the duration. The
metrics and the admin's dashboard count from these, with no statement of their own."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from jobqueue import signals
from jobqueue.models import Job
from jobqueue.runtime.worker import Worker
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

WATCHED = {
    "started": signals.job_started,
    "finished": signals.job_finished,
    "aborted": signals.job_aborted,
}


@pytest.fixture
def sent() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    received: list[tuple[str, dict[str, Any]]] = []
    for name, signal in WATCHED.items():

        def receiver(sender: Any, signal: Any, name: str = name, **kwargs: Any) -> None:
            received.append((name, kwargs))

        signal.connect(receiver, weak=False, dispatch_uid=f"test-attempt-{name}")
    try:
        yield received
    finally:
        for name, signal in WATCHED.items():
            signal.disconnect(dispatch_uid=f"test-attempt-{name}")


def of(sent: list[tuple[str, dict[str, Any]]], name: str, job: Job) -> list[dict[str, Any]]:
    return [kwargs for signal, kwargs in sent if signal == name and kwargs["job_id"] == job.pk]


def test_a_success_reports_its_queue_its_wait_and_its_duration(sent):
    job = tasks.send_email.enqueue("ada@example.com")
    # Due 30 s ago: the wait counts from run_at, not from the enqueue.
    Job.objects.filter(pk=job.pk).update(run_at=timezone.now() - dt.timedelta(seconds=30))
    Worker(burst=True).run()
    [started] = of(sent, "started", job)
    assert started["queue"] == "emails"
    assert started["task_name"] == "tests.testapp.tasks.send_email"
    assert started["attempt"] == 1
    assert 30 <= started["wait"] < 60
    [finished] = of(sent, "finished", job)
    assert (finished["queue"], finished["status"], finished["outcome"]) == (
        "emails",
        "succeeded",
        "succeeded",
    )
    assert 0 <= finished["duration"] < 30


def test_a_retry_and_a_snooze_both_leave_the_job_pending_and_say_which(sent):
    retried = tasks.always_fails.enqueue()
    snoozed = tasks.snoozes_once.enqueue()
    Worker(burst=True).run()
    [first] = of(sent, "finished", retried)[:1]
    assert (first["status"], first["outcome"]) == ("pending", "retried")
    [snooze] = of(sent, "finished", snoozed)[:1]
    assert (snooze["status"], snooze["outcome"]) == ("pending", "snoozed")
    assert all(kwargs["outcome"] in signals.OUTCOMES for _, kwargs in sent if _ == "finished")


def test_an_outcome_the_fence_refuses_is_reported_as_aborted_not_finished(sent):
    job = tasks.replace_token.enqueue()
    Worker(burst=True).run()
    assert of(sent, "finished", job) == []
    [aborted] = of(sent, "aborted", job)
    assert (aborted["queue"], aborted["attempt"]) == ("default", 1)
    assert aborted["duration"] >= 0


def test_each_attempt_starts_once_whether_claimed_for_a_slot_or_ahead(sent):
    jobs = [tasks.add.enqueue(i, i) for i in range(6)]
    # One slot: the worker claims ahead, and a held job's start is sent when a slot takes
    # it, not at its claim (a job handed back unstarted never started).
    Worker(burst=True, concurrency=1).run()
    starts = [kwargs["job_id"] for name, kwargs in sent if name == "started"]
    assert starts == [job.pk for job in jobs]
    assert len([name for name, _ in sent if name == "finished"]) == 6
