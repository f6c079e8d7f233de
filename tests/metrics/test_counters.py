"""The in-process counters and histograms, fed by a real worker's signals in this process."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from django.utils import timezone
from prometheus_client import CollectorRegistry

from jobqueue import signals
from jobqueue.metrics.counters import JobMetrics
from jobqueue.models import Job
from jobqueue.runtime.worker import Worker
from jobqueue.store.jobs import Store
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def registry() -> Iterator[CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = JobMetrics(registry)
    metrics.connect()
    try:
        yield registry
    finally:
        metrics.disconnect()


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_successes_count_started_finished_duration_and_wait(registry):
    jobs = [tasks.send_email.enqueue(f"{i}@example.com") for i in range(3)]
    Job.objects.filter(pk=jobs[0].pk).update(run_at=timezone.now() - dt.timedelta(seconds=40))
    Worker(burst=True).run()
    task = "tests.testapp.tasks.send_email"
    assert value(registry, "jobqueue_jobs_started_total", queue="emails", task=task) == 3
    assert (
        value(
            registry,
            "jobqueue_jobs_finished_total",
            queue="emails",
            task=task,
            outcome="succeeded",
        )
        == 3
    )
    labels = {"queue": "emails", "task": task}
    assert value(registry, "jobqueue_job_duration_seconds_count", **labels) == 3
    assert value(registry, "jobqueue_job_wait_seconds_count", queue="emails") == 3
    # The job due 40 s ago waited more than 30 s; the others did not.
    assert value(registry, "jobqueue_job_wait_seconds_bucket", queue="emails", le="30.0") == 2
    assert value(registry, "jobqueue_job_wait_seconds_sum", queue="emails") >= 40


def test_each_outcome_has_its_label(registry):
    tasks.always_fails.enqueue()  # retried (its next attempt is due after a backoff)
    tasks.permanent.enqueue()  # failed at once
    tasks.snoozes_once.enqueue()  # snoozed for 30 s
    tasks.discards.enqueue()
    tasks.replace_token.enqueue()  # the fence refuses its outcome
    Worker(burst=True).run()

    def finished(task: str, outcome: str) -> float:
        return value(
            registry,
            "jobqueue_jobs_finished_total",
            queue="default",
            task=f"tests.testapp.tasks.{task}",
            outcome=outcome,
        )

    assert (finished("always_fails", "retried"), finished("always_fails", "failed")) == (1, 0)
    assert finished("permanent", "failed") == 1
    assert (finished("snoozes_once", "snoozed"), finished("snoozes_once", "succeeded")) == (1, 0)
    assert finished("discards", "discarded") == 1
    assert finished("replace_token", "aborted") == 1
    assert finished("replace_token", "succeeded") == 0


def test_recovered_jobs_count_by_their_new_status(registry):
    retried = tasks.noop.enqueue("retry")
    parked = tasks.park_block_until.enqueue("/nonexistent")
    store = Store()
    Job.objects.filter(pk__in=[retried.pk, parked.pk]).update(
        status="running",
        worker="gone:1:x",
        attempts=1,
        started_at=timezone.now(),
        lease_until=timezone.now() + dt.timedelta(seconds=60),
    )
    store.release_worker("gone:1:x", "The worker process 1 died (test).")
    assert (
        value(
            registry,
            "jobqueue_jobs_recovered_total",
            queue="default",
            task="tests.testapp.tasks.noop",
            result="pending",
        )
        == 1
    )
    assert (
        value(
            registry,
            "jobqueue_jobs_recovered_total",
            queue="default",
            task="tests.testapp.tasks.park_block_until",
            result="abandoned",
        )
        == 1
    )


def test_the_finished_outcomes_are_the_signals_and_aborted():
    from jobqueue.metrics.counters import FINISHED_OUTCOMES

    assert set(FINISHED_OUTCOMES) == {
        "succeeded",
        "failed",
        "retried",
        "snoozed",
        "aborted",
        "discarded",
    }
    assert set(signals.OUTCOMES) < set(FINISHED_OUTCOMES)
