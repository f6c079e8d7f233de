"""jobqueue.testing.run_jobs(): run due jobs in the test process, advancing time, not sleeping."""

import time

import pytest

from jobqueue.models import Job
from jobqueue.testing import Clock, run_jobs
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = pytest.mark.django_db


def test_runs_until_the_queue_is_empty():
    first = tasks.add.enqueue(1, 2)
    second = tasks.echo.enqueue({"a": [1]})
    run = run_jobs()
    assert sorted(run.succeeded) == sorted([first.pk, second.pk])
    assert Job.objects.get(pk=first.pk).result == 3
    assert Job.objects.get(pk=second.pk).result == {"a": [1]}
    assert run_jobs().outcomes == []


def test_retries_are_run_by_advancing_the_clock_not_by_sleeping():
    job = tasks.always_fails.enqueue()  # backoff 1 s, 5 s: a worker would wait 6 s
    started = time.monotonic()
    run = run_jobs()
    assert time.monotonic() - started < 3
    assert [(o.attempt, o.status) for o in run.outcomes] == [
        (1, "pending"),
        (2, "pending"),
        (3, "failed"),
    ]
    # About 1 + 5 s; a little less on PostgreSQL, whose now() inside a test's transaction is
    # the transaction's start.
    assert run.failed == [job.pk] and run.clock.advanced >= 4
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, len(row.errors)) == ("failed", 3, 3)


def test_snooze_is_honoured_and_does_not_count_as_an_attempt():
    job = tasks.snoozes_once.enqueue()  # snoozes 30 s, then returns
    run = run_jobs()
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.result, row.attempts) == ("succeeded", "woke", 1)
    assert [o.status for o in run.outcomes] == ["pending", "succeeded"]
    assert run.clock.advanced >= 29


def test_without_advance_only_due_jobs_run():
    due = tasks.add.enqueue(1, 1)
    later = tasks.add.using(delay=3600).enqueue(2, 2)
    clock = Clock()
    assert run_jobs(advance=False, clock=clock).succeeded == [due.pk]
    assert Job.objects.get(pk=later.pk).status == "pending"
    clock.advance(3600)
    assert run_jobs(advance=False, clock=clock).succeeded == [later.pk]


def test_permanent_errors_and_async_handlers_behave_as_on_a_worker():
    job = tasks.permanent.enqueue()
    total = tasks.async_add.enqueue(2, 3)
    run_jobs()
    assert Job.objects.get(pk=job.pk).status == "failed"
    assert Execution.objects.filter(label="permanent").count() == 1
    assert Job.objects.get(pk=total.pk).result == 5


@pytest.mark.django_db(transaction=True)
def test_steps_of_an_async_handler_in_a_transactional_test():
    # Async handlers reach the database from other threads, on other connections: they see
    # the test's rows only when the test does not hold them in an open transaction.
    steps = tasks.async_steps.enqueue()
    run_jobs()
    assert Job.objects.get(pk=steps.pk).result == {
        "steps": [20, 40],
        "task": "tests.testapp.tasks.async_steps",
    }


def test_queues_limit_the_run_and_max_attempts_bounds_it():
    email = tasks.send_email.enqueue("ada@example.com")
    other = tasks.add.enqueue(1, 2)
    assert run_jobs(queues=["emails"]).succeeded == [email.pk]
    assert Job.objects.get(pk=other.pk).status == "pending"
    assert len(run_jobs(max_attempts=1).outcomes) == 1
