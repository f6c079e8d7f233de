"""Prompt cancel on the worker's side: the payload, the confirming read, the cancel of a
sync and an async attempt, and the fence that still refuses what they write late."""

import logging
import threading
import time

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext

from jobqueue import conf
from jobqueue.models import Job
from jobqueue.runtime import attempt as attempts
from jobqueue.runtime import cancel
from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.cancel import Canceller
from jobqueue.runtime.executor import Executor
from jobqueue.runtime.outage import Health
from jobqueue.runtime.service import Service
from jobqueue.runtime.worker import Worker
from jobqueue.store.channel import CANCEL_PREFIX
from jobqueue.store.jobs import Store
from tests.conftest import wait_for
from tests.factories import JobFactory
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("payload", "ids"),
    [
        ("cancel:42", [42]),
        ("cancel:42,43", [42, 43]),
        ("cancel: 7 ,x,", [7]),
        ("cancel:", []),
        ("default", None),
        ("emails", None),
        ("cancelled", None),
    ],
)
def test_a_cancel_payload_names_job_ids_and_any_other_is_a_queue(payload, ids):
    assert cancel.parse(payload) == ids


def test_the_payload_prefix_is_the_one_the_discard_sends():
    assert CANCEL_PREFIX == "cancel:"


class Parts:
    """A canceller over a real store and an executor whose slots never start: the attempts
    submitted wait in its line, where ``holding()`` sees them."""

    def __init__(self, task=tasks.add, count=2, store=None):
        JobFactory.create_batch(count, task_name=task.name)
        self.store = store or Store()
        claimed = (
            Store().claim(worker="w", task_names=[task.name], queues=None, limit=count)
            if count
            else []
        )
        self.attempts = [Attempt(job=job, task=task) for job in claimed]
        self.executor = Executor(concurrency=1, on_slot_free=lambda: None)
        for a in self.attempts:
            self.executor.submit(a)
        self.wakes = 0
        self.canceller = Canceller(
            store=self.store,
            worker="w",
            executor=self.executor,
            health=Health("worker w"),
            wake=self._wake,
        )

    def _wake(self):
        self.wakes += 1


def test_a_notification_for_a_held_job_is_confirmed_by_one_read_then_cancels_it(caplog):
    parts = Parts()
    lost, kept = parts.attempts
    Store().discard_jobs([lost.job.id])
    parts.canceller.heard([lost.job.id, 999_999])
    assert parts.wakes == 1
    assert parts.canceller.next_at() is not None
    with (
        CaptureQueriesContext(connection) as queries,
        caplog.at_level(logging.WARNING, logger="jobqueue"),
    ):
        parts.canceller.check(0.0)
    assert len(queries) == 1
    assert lost.cancelled.is_set() and not kept.cancelled.is_set()
    assert parts.executor.holding() == [kept], "taken out of the line: it never starts"
    assert f"job {lost.job.id} ({tasks.add.name}): discarded while it waited in line" in (
        caplog.text
    )
    assert parts.wakes == 2, "room in the line: the loop may claim again"
    assert parts.canceller.next_at() is None
    with CaptureQueriesContext(connection) as queries:
        parts.canceller.check(1.0)
    assert len(queries) == 0, "nothing owed: no statement"


def test_a_notification_is_a_hint_never_the_truth():
    parts = Parts()
    first, _ = parts.attempts
    parts.canceller.heard([first.job.id])  # but the job was not discarded
    parts.canceller.check(0.0)
    assert not first.cancelled.is_set()
    assert Job.objects.get(pk=first.job.id).status == "running"


def test_a_notification_for_jobs_this_worker_does_not_hold_costs_nothing():
    parts = Parts()
    parts.canceller.heard([999_998, 999_999])
    assert parts.wakes == 0
    assert parts.canceller.next_at() is None
    with CaptureQueriesContext(connection) as queries:
        parts.canceller.check(0.0)
    assert len(queries) == 0


def test_after_a_commit_one_read_at_most_every_check_interval():
    """SQLite's "next look": a commit elsewhere may be a discard; the worker asks, but a
    busy worker that sees commits all the time asks twice a second at most."""
    parts = Parts()
    lost, kept = parts.attempts
    assert parts.canceller.next_at() is None, "no commit seen: nothing to check"
    parts.canceller.committed()
    assert parts.canceller.next_at() == 0.0
    with CaptureQueriesContext(connection) as queries:
        parts.canceller.check(100.0)
    assert len(queries) == 1 and not lost.cancelled.is_set()

    Store().discard_jobs([lost.job.id])
    parts.canceller.committed()
    assert parts.canceller.next_at() == 100.0 + cancel.CHECK_INTERVAL
    with CaptureQueriesContext(connection) as queries:
        parts.canceller.check(100.0 + cancel.CHECK_INTERVAL / 2)
    assert len(queries) == 0 and not lost.cancelled.is_set()
    parts.canceller.check(100.0 + cancel.CHECK_INTERVAL)
    assert lost.cancelled.is_set() and not kept.cancelled.is_set()


def test_a_commit_seen_while_nothing_is_held_owes_no_check():
    parts = Parts(count=0)
    parts.canceller.committed()
    assert parts.canceller.next_at() is None
    with CaptureQueriesContext(connection) as queries:
        parts.canceller.check(0.0)
    assert len(queries) == 0


class AwayStore(Store):
    calls = 0

    def held_jobs(self, worker, jobs):
        self.calls += 1
        raise OperationalError("the database is away")


def test_a_check_during_an_outage_is_reported_once_and_owed_again_later(caplog):
    parts = Parts(store=AwayStore())
    first, _ = parts.attempts
    parts.canceller.heard([first.job.id])
    with caplog.at_level(logging.WARNING, logger="jobqueue"):
        parts.canceller.check(10.0)  # does not raise
    assert "checking for discarded jobs" in caplog.text
    assert "Traceback" not in caplog.text
    # Owed again, not before the retry interval: an outage does not spin the loop.
    assert parts.canceller.next_at() >= 10.0 + cancel.RETRY_INTERVAL
    parts.canceller.check(10.0 + cancel.RETRY_INTERVAL / 2)
    assert parts.store.calls == 1
    parts.canceller.check(10.0 + cancel.RETRY_INTERVAL)
    assert parts.store.calls == 2


def run_in_thread(attempt, store):
    thread = threading.Thread(target=attempts.run, args=(attempt, store, "w"), daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("task", [tasks.until_cancelled, tasks.async_until_cancelled])
def test_a_discarded_running_attempt_is_cancelled_and_its_late_outcome_refused(task, caplog):
    """The sync handler sees ``ctx.cancelled`` and returns a success; the async one's
    coroutine is cancelled in its ``await``. The job stays discarded either way."""
    JobFactory(task_name=task.name, args=[], kwargs={"label": "h"})
    store = Store()
    [job] = store.claim(worker="w", task_names=[task.name], queues=None, limit=1)
    attempt = Attempt(job=job, task=task)
    executor = Executor(concurrency=1, on_slot_free=lambda: None)
    canceller = Canceller(
        store=store, worker="w", executor=executor, health=Health("w"), wake=lambda: None
    )
    executor.holding = lambda: [attempt]  # running on the thread below, not in a slot
    with caplog.at_level(logging.WARNING, logger="jobqueue"):
        thread = run_in_thread(attempt, store)
        wait_for(
            lambda: Execution.objects.filter(label="h:start").exists(),
            timeout=10,
            message="the handler to start",
        )
        assert store.discard_jobs([job.id]).running == 1
        canceller.heard([job.id])
        canceller.check(0.0)
        thread.join(10)
    assert not thread.is_alive()
    assert attempt.cancelled.is_set()
    assert Execution.objects.filter(label="h:cancelled").exists()
    assert f"outcome discarded: job {job.id}" in caplog.text
    row = Job.objects.get(pk=job.id)
    assert (row.status, row.result, row.errors) == ("discarded", None, [])
    assert f"job {job.id} ({task.name}): discarded while it ran" in caplog.text


def test_an_async_attempt_cancelled_before_its_coroutine_starts_is_cancelled_at_once():
    JobFactory(task_name=tasks.async_until_cancelled.name, args=[], kwargs={"label": "early"})
    store = Store()
    [job] = store.claim(
        worker="w", task_names=[tasks.async_until_cancelled.name], queues=None, limit=1
    )
    attempt = Attempt(job=job, task=tasks.async_until_cancelled)
    assert attempt.cancel()
    assert not attempt.cancel(), "told once"
    store.discard_jobs([job.id])
    thread = run_in_thread(attempt, store)
    thread.join(10)
    assert not thread.is_alive(), "it did not sleep its 60 s"
    assert not Execution.objects.filter(label="early:cancelled").exists(), "never got that far"
    assert Job.objects.get(pk=job.id).status == "discarded"


def test_a_cancel_payload_wakes_neither_the_supervisor_nor_a_worker_that_holds_none():
    """Only a queue name is news of work; a worker holding the job named is woken."""
    service = Service(store=Store(), settings=conf.get(), listen=False)
    service.notified("cancel:7")
    assert not service.control.sleep(time.monotonic())
    service.notified("default")
    assert service.control.sleep(time.monotonic())

    worker = Worker()  # never started: its listener or watcher stays off
    worker.notified("cancel:7")
    assert not worker.control.sleep(time.monotonic())
    worker.notified("default")
    assert worker.control.sleep(time.monotonic())
    parts = Parts(count=1)
    worker.executor = parts.executor
    worker.canceller = Canceller(
        store=worker.store,
        worker="w",
        executor=parts.executor,
        health=Health("w"),
        wake=worker.control.wake,
    )
    worker.notified(f"cancel:{parts.attempts[0].job.id}")
    assert worker.control.sleep(time.monotonic())
