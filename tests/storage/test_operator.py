"""Operator Retry and Discard in the store: one guarded statement over any selection."""

import datetime as dt
import logging
import re
import threading
import time
from contextlib import contextmanager

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobqueue import signals
from jobqueue.exceptions import JobRunAborted
from jobqueue.models import Job
from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.lease import Heartbeat
from jobqueue.store.channel import CANCEL_PREFIX, NOTIFY_CHANNEL
from jobqueue.store.jobs import Store
from tests.conftest import listen_for_jobs, notifications
from tests.factories import FinishedJobFactory, JobFactory
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def held_in_another_transaction(write):
    """Run ``write`` in a transaction on another thread and keep it open for a moment, so
    that the block starts while that transaction is still uncommitted."""
    written = threading.Event()

    def hold():
        try:
            with transaction.atomic():
                write()
                written.set()
                time.sleep(0.5)
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold)
    thread.start()
    assert written.wait(10)
    try:
        yield
    finally:
        thread.join(10)


WRITE = re.compile(r"\bUPDATE\s+jobqueue_job\b", re.IGNORECASE)


def ago(seconds):
    return timezone.now() - dt.timedelta(seconds=seconds)


def later(seconds):
    return timezone.now() + dt.timedelta(seconds=seconds)


def failed(**kwargs):
    defaults = {
        "status": "failed",
        "attempts": 3,
        "finished_at": ago(60),
        "last_error": "ValueError: boom",
        "errors": [{"type": "ValueError", "message": "boom", "attempt": 3}],
    }
    return JobFactory(**{**defaults, **kwargs})


def abandoned(**kwargs):
    defaults = {
        "status": "abandoned",
        "attempts": 0,
        "crashes": 3,
        "worker": "gone:1:x",
        "finished_at": ago(60),
        "last_error": "The worker stopped renewing its lease",
    }
    return JobFactory(**{**defaults, **kwargs})


def updates(queries):
    """The statements that write jobs."""
    return [q["sql"] for q in queries if WRITE.search(q["sql"])]


def test_retry_sends_failed_abandoned_and_discarded_jobs_back_with_a_fresh_budget():
    jobs = [
        failed(steps={"export": 12}),
        abandoned(),
        JobFactory(status="discarded", finished_at=ago(5)),
    ]
    outcome = Store().retry_jobs([j.pk for j in jobs])
    assert outcome.done == sorted(j.pk for j in jobs) and outcome.skipped == {}
    assert outcome.message() == "Retried 3 jobs."
    for row in Job.objects.filter(pk__in=[j.pk for j in jobs]):
        assert row.status == "pending"
        assert (row.attempts, row.crashes) == (0, 0)
        assert row.run_at <= timezone.now()
        assert (row.token, row.lease_until, row.worker, row.finished_at) == (None,) * 4
    kept = Job.objects.get(pk=jobs[0].pk)
    assert kept.steps == {"export": 12}, "finished steps are reused by the next attempt"
    assert kept.last_error == "ValueError: boom" and len(kept.errors) == 1


def test_retry_skips_other_statuses_and_missing_ids_and_says_why():
    pending = JobFactory()
    running = JobFactory(status="running", token="t" * 32, lease_until=later(300))
    done = FinishedJobFactory()
    outcome = Store().retry_jobs([pending.pk, running.pk, done.pk, 999_999])
    assert outcome.done == []
    assert outcome.skipped == {"pending": 1, "running": 1, "succeeded": 1, "missing": 1}
    assert outcome.message() == (
        "Retried 0 jobs, skipped 4 jobs: 1 because it no longer exists, 1 because it is "
        "already pending, 1 because it is running, 1 because it succeeded."
    )
    assert Job.objects.get(pk=running.pk).token == "t" * 32


def test_retry_refuses_an_abandoned_job_whose_lease_has_not_run_out():
    fresh = abandoned(lease_until=later(200))
    expired = abandoned(lease_until=ago(1))
    outcome = Store().retry_jobs([fresh.pk, expired.pk])
    assert outcome.done == [expired.pk]
    assert outcome.skipped == {"lease": 1}
    assert "its lease is still held, so its worker may still be running it" in outcome.message()
    assert Job.objects.get(pk=fresh.pk).status == "abandoned"


def test_retry_loses_the_race_against_a_lease_renewed_after_the_selection_was_made():
    """The operator picked the job while it looked dead; a worker renews its lease in a
    transaction that commits only after the retry has started. The retry waits for the row
    (PostgreSQL) or the write lock (SQLite), re-checks its WHERE, and leaves the job alone."""
    job = abandoned(lease_until=ago(1))

    def renew():
        Job.objects.filter(pk=job.pk).update(lease_until=later(300))

    with held_in_another_transaction(renew):
        outcome = Store().retry_jobs([job.pk])
    assert outcome.done == [] and outcome.skipped == {"lease": 1}
    assert Job.objects.get(pk=job.pk).status == "abandoned"


def test_retry_refused_while_a_newer_unfinished_job_holds_the_key():
    old = failed(idempotency_key="invoice:7")
    newer = tasks.add.using(idempotency_key="invoice:7").enqueue(1, 2)
    assert newer is not None
    outcome = Store().retry_jobs([old.pk])
    assert outcome.done == [] and outcome.skipped == {"key": 1}
    assert outcome.message() == (
        "Retried 0 jobs, skipped 1 job because a newer unfinished job holds its idempotency key."
    )
    Job.objects.filter(pk=newer.pk).update(status="succeeded", finished_at=timezone.now())
    assert Store().retry_jobs([old.pk]).done == [old.pk]


def test_of_selected_jobs_sharing_a_key_only_the_newest_is_retried():
    first = failed(idempotency_key="feed:1")
    second = abandoned(idempotency_key="feed:1")
    keyless = failed()
    outcome = Store().retry_jobs(Job.objects.all())
    assert outcome.done == sorted([second.pk, keyless.pk])
    assert outcome.skipped == {"key": 1}
    assert Job.objects.get(pk=first.pk).status == "failed"


def test_a_filter_is_compiled_into_the_statement():
    emails = [failed(queue="emails") for _ in range(3)]
    failed(queue="feeds")
    with CaptureQueriesContext(connection) as queries:
        outcome = Store().retry_jobs(Job.objects.filter(queue="emails", status="failed"))
    assert outcome.done == [j.pk for j in emails]
    if connection.vendor == "mysql":
        # The locking read of MySQL's pair selects, the UPDATE writes the rows it locked.
        [statement] = [q["sql"] for q in queries.captured_queries if "FOR UPDATE" in q["sql"]]
    else:
        [statement] = updates(queries)
    assert "emails" in statement  # the filter itself, not a list of ids read beforehand


def test_dry_run_reports_and_changes_nothing():
    job = failed()
    sent = []
    signals.jobs_retried.connect(sent.append, weak=False, dispatch_uid="dry")
    try:
        outcome = Store().retry_jobs([job.pk, job.pk + 1000], dry_run=True)
    finally:
        signals.jobs_retried.disconnect(dispatch_uid="dry")
    assert outcome.done == [job.pk] and outcome.skipped == {"missing": 1}
    assert outcome.message().startswith("Would retry 1 job, would skip 1 job because")
    assert Job.objects.get(pk=job.pk).status == "failed"
    assert sent == []


def test_retry_and_discard_log_and_send_their_signal(caplog):
    job = failed()
    received = []

    def receiver(sender, **kwargs):
        received.append(kwargs)

    signals.jobs_retried.connect(receiver, dispatch_uid="t-retry")
    signals.jobs_discarded.connect(receiver, dispatch_uid="t-discard")
    try:
        with caplog.at_level(logging.INFO, logger="jobqueue"):
            Store().retry_jobs([job.pk])
            Store().discard_jobs([job.pk])
    finally:
        signals.jobs_retried.disconnect(dispatch_uid="t-retry")
        signals.jobs_discarded.disconnect(dispatch_uid="t-discard")
    assert [r["job_ids"] for r in received] == [[job.pk], [job.pk]]
    assert received[0]["using"] == "default"
    assert f"operator retry: Retried 1 job. Ids: {job.pk}" in caplog.text
    assert f"operator discard: Discarded 1 job. Ids: {job.pk}" in caplog.text


def test_discard_takes_anything_but_succeeded_and_already_discarded():
    pending, failed_job, parked = JobFactory(), failed(), abandoned()
    running = JobFactory(status="running", token="r" * 32, worker="w", lease_until=later(300))
    done, gone = FinishedJobFactory(), JobFactory(status="discarded")
    ids = [pending.pk, failed_job.pk, parked.pk, running.pk, done.pk, gone.pk]
    outcome = Store().discard_jobs(ids)
    assert outcome.done == sorted([pending.pk, failed_job.pk, parked.pk, running.pk])
    assert outcome.running == 1
    assert outcome.skipped == {"succeeded": 1, "discarded": 1}
    assert outcome.message() == (
        "Discarded 4 jobs (1 was running: its worker's writes are refused from now on), "
        "skipped 2 jobs: 1 because it is already discarded, 1 because it succeeded."
    )
    row = Job.objects.get(pk=running.pk)
    assert (row.status, row.token, row.worker) == ("discarded", None, "w")
    assert row.finished_at is not None
    assert row.lease_until is not None, "kept, so that a Retry waits for it to run out"


def test_discarding_a_running_job_fences_its_worker_off():
    """The worker's heartbeat renews nothing, so it flags the attempt cancelled; its outcome
    is refused; and a Retry waits until the old lease has run out."""
    JobFactory()
    store = Store()
    [claimed] = store.claim(worker="w", task_names=[tasks.add.name], queues=None, limit=1)
    attempt = Attempt(job=claimed, task=tasks.add)
    assert store.discard_jobs([claimed.id]).running == 1
    beat = Heartbeat(
        store=store, worker="w", held=lambda: [attempt], register=lambda: None, interval=100
    )
    beat.beat()
    assert attempt.cancelled.is_set()
    with pytest.raises(JobRunAborted):
        store.succeed(claimed, 3, worker="w")
    assert Job.objects.get(pk=claimed.id).status == "discarded"
    assert store.retry_jobs([claimed.id]).skipped == {"lease": 1}
    Job.objects.filter(pk=claimed.id).update(lease_until=ago(1))
    assert store.retry_jobs([claimed.id]).done == [claimed.id]


@pytest.mark.parametrize("how", ["ids", "filter"])
def test_ten_thousand_jobs_in_one_statement(how):
    Job.objects.bulk_create(
        [Job(task_name=tasks.add.name, status="failed", attempts=3) for _ in range(10_000)]
    )
    ids = list(Job.objects.values_list("pk", flat=True))
    selection = ids if how == "ids" else Job.objects.filter(status="failed")
    store = Store()
    with CaptureQueriesContext(connection) as queries:
        retried = store.retry_jobs(selection)
    assert len(retried.done) == 10_000
    assert len(updates(queries)) == 1
    selection = ids if how == "ids" else Job.objects.filter(status="pending")
    with CaptureQueriesContext(connection) as queries:
        discarded = store.discard_jobs(selection)
    assert len(discarded.done) == 10_000
    assert len(updates(queries)) == 1
    assert Job.objects.filter(status="discarded").count() == 10_000


def test_a_selection_inside_the_callers_transaction_rolls_back_with_it():
    job = failed()
    with transaction.atomic():
        Store().retry_jobs([job.pk])
        transaction.set_rollback(True)
    assert Job.objects.get(pk=job.pk).status == "failed"


def test_an_enqueue_of_the_same_key_committing_during_the_retry_wins():
    """The newer copy is inserted in a transaction that commits after the retry began: the
    NOT EXISTS guard cannot see it yet, so on PostgreSQL the unique index stops the UPDATE;
    the store runs the statement again, sees the copy, and skips the old job."""
    old = failed(idempotency_key="report:3")

    def enqueue():
        tasks.add.using(idempotency_key="report:3").enqueue(1, 1)

    with held_in_another_transaction(enqueue):
        outcome = Store().retry_jobs([old.pk])
    assert outcome.done == [] and outcome.skipped == {"key": 1}
    assert Job.objects.filter(idempotency_key="report:3", status="pending").count() == 1


# -- a Retry wakes workers at commit, as an enqueue does ---------------------------------


@contextmanager
def committed_queues():
    """The queues ``jobs_committed`` announces (what wakes this process's workers)."""
    sent = []

    def receiver(sender, *, queue, database, **kwargs):
        sent.append((queue, database))

    signals.jobs_committed.connect(receiver, dispatch_uid="t-committed")
    try:
        yield sent
    finally:
        signals.jobs_committed.disconnect(dispatch_uid="t-committed")


def test_a_retry_wakes_this_processs_workers_at_commit():
    emails = [failed(queue="emails"), failed(queue="emails")]
    feeds = abandoned(queue="feeds")
    with committed_queues() as sent:
        Store().retry_jobs([emails[0].pk], dry_run=True)
        with pytest.raises(RuntimeError), transaction.atomic():
            Store().retry_jobs([emails[0].pk])
            raise RuntimeError("the caller's transaction rolls back")
        assert sent == []  # neither a dry run nor a rollback wakes anyone
        with transaction.atomic():
            Store().retry_jobs([j.pk for j in [*emails, feeds]])
            assert sent == []  # not before the commit
        assert sent == [("emails", "default"), ("feeds", "default")]  # once per queue
        sent.clear()
        Store().retry_jobs([j.pk for j in emails])  # nothing to retry now
        assert sent == []


def test_a_retry_notifies_its_queues_at_commit_and_not_on_a_dry_run(postgresql_only):
    emails = [failed(queue="emails"), failed(queue="emails")]
    listener = listen_for_jobs()
    try:
        Store().retry_jobs([j.pk for j in emails], dry_run=True)
        assert notifications(listener) == []
        with transaction.atomic():
            Store().retry_jobs([j.pk for j in emails])
            assert notifications(listener) == []  # not before the commit
        # Two jobs of one queue: one notification, as for an enqueue.
        assert notifications(listener) == [(NOTIFY_CHANNEL, "emails")]
    finally:
        listener.close()


def test_a_discard_tells_the_workers_of_its_running_jobs_at_commit_only(postgresql_only):
    """One ``cancel:<id>`` per running job, none for the others, none on a dry run."""
    running = [
        JobFactory(status="running", token=f"{i}" * 32, worker="w", lease_until=later(300))
        for i in range(2)
    ]
    waiting = JobFactory()
    ids = [waiting.pk, *(j.pk for j in running)]
    listener = listen_for_jobs()
    try:
        Store().discard_jobs(ids, dry_run=True)
        assert notifications(listener) == []
        with transaction.atomic():
            assert Store().discard_jobs(ids).running == 2
            assert notifications(listener) == []  # not before the commit
        assert sorted(notifications(listener)) == [
            (NOTIFY_CHANNEL, f"{CANCEL_PREFIX}{j.pk}") for j in sorted(running, key=lambda j: j.pk)
        ]
    finally:
        listener.close()


def test_held_jobs_names_the_attempts_that_still_own_their_job():
    JobFactory.create_batch(3)
    store = Store()
    claimed = store.claim(worker="w", task_names=[tasks.add.name], queues=None, limit=3)
    assert store.held_jobs("w", claimed) == {j.id for j in claimed}
    assert store.held_jobs("other", claimed) == set()
    store.discard_jobs([claimed[0].id])
    with CaptureQueriesContext(connection) as queries:
        assert store.held_jobs("w", claimed) == {claimed[1].id, claimed[2].id}
    assert len(queries) == 1
    assert store.held_jobs("w", []) == set()
