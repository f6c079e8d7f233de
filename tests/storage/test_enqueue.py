"""Enqueue: transactional, validated at the call, idempotent, and bulk in one statement."""

import datetime as dt
import gc
import select

import psycopg
import pytest
from django.db import DEFAULT_DB_ALIAS, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobqueue.models import Job
from jobqueue.runtime.listener import connection_target
from jobqueue.store.channel import NOTIFY_CHANNEL
from jobqueue.store.jobs import Store
from jobqueue.tasks.base import Call
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def claim_all(limit=100, **kwargs):
    from jobqueue.tasks import base as registry

    registry.discover()
    return Store().claim(
        worker="test", task_names=registry.registered_names(), queues=None, limit=limit, **kwargs
    )


def test_enqueue_returns_the_saved_job():
    job = tasks.add.enqueue(2, b=3)
    row = Job.objects.get(pk=job.pk)
    assert (row.task_name, row.args, row.kwargs) == ("tests.testapp.tasks.add", [2], {"b": 3})
    assert row.status == job.status == "pending"
    assert row.queue == job.queue == "default"
    assert row.attempts == 0 and row.max_attempts == 3
    assert row.run_at == job.run_at and row.enqueued_at == job.enqueued_at


def test_rollback_leaves_no_row():
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.add.enqueue(1, 2)
        assert Job.objects.count() == 1  # visible inside the transaction only
        raise RuntimeError("the view failed")
    assert Job.objects.count() == 0
    assert claim_all() == []


def test_commit_makes_it_claimable():
    with transaction.atomic():
        job = tasks.add.enqueue(1, 2)
    claimed = claim_all()
    assert [c.id for c in claimed] == [job.pk]


def _listen():
    # Where a worker listens: the database itself, even when Django's connections go
    # through PgBouncer (DATABASE_DIRECT_URL).
    url, params = connection_target(DEFAULT_DB_ALIAS, None)
    conn = psycopg.connect(url, autocommit=True, **params)
    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
    return conn


def _notifications(conn, wait=0.3):
    select.select([conn.fileno()], [], [], wait)
    return [(n.channel, n.payload) for n in conn.notifies(timeout=0.05, stop_after=100)]


def test_notify_fires_at_commit_only(postgresql_only):
    listener = _listen()
    try:
        with transaction.atomic():
            tasks.send_email.enqueue("ada@example.com")
            assert _notifications(listener) == []  # not before the commit
        assert _notifications(listener) == [(NOTIFY_CHANNEL, "emails")]

        with pytest.raises(RuntimeError), transaction.atomic():
            tasks.send_email.enqueue("bob@example.com")
            raise RuntimeError
        assert _notifications(listener) == []  # a rollback wakes nobody
    finally:
        listener.close()


def test_unfinished_duplicate_key_returns_none_and_writes_nothing():
    first = tasks.add.using(idempotency_key="sum:1").enqueue(1, 1)
    assert first is not None
    assert tasks.add.using(idempotency_key="sum:1").enqueue(9, 9) is None
    assert list(Job.objects.values_list("args", flat=True)) == [[1, 1]]

    # Running still holds the key.
    claim_all()
    assert tasks.add.using(idempotency_key="sum:1").enqueue(9, 9) is None


def test_a_finished_job_frees_its_key():
    first = tasks.add.using(idempotency_key="sum:2").enqueue(1, 1)
    Job.objects.filter(pk=first.pk).update(status="succeeded", finished_at=timezone.now())
    again = tasks.add.using(idempotency_key="sum:2").enqueue(1, 1)
    assert again is not None and again.pk != first.pk
    Job.objects.filter(pk=again.pk).update(status="failed", finished_at=timezone.now())
    assert tasks.add.using(idempotency_key="sum:2").enqueue(1, 1) is not None


def test_duplicate_key_inside_one_transaction_and_after_rollback():
    with transaction.atomic():
        assert tasks.add.using(idempotency_key="k").enqueue(1, 1) is not None
        assert tasks.add.using(idempotency_key="k").enqueue(1, 1) is None
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.add.using(idempotency_key="rolled-back").enqueue(1, 1)
        raise RuntimeError
    assert tasks.add.using(idempotency_key="rolled-back").enqueue(1, 1) is not None


def test_enqueue_many_is_one_statement_and_reports_duplicates():
    tasks.add.using(idempotency_key="held").enqueue(0, 0)
    calls = [
        (1, 2),
        {"a": 3, "b": 4},
        Call((5, 6), idempotency_key="held"),
        Call((7, 8), idempotency_key="new"),
        Call((9, 9), idempotency_key="new"),
    ]
    with CaptureQueriesContext(connection) as queries:
        jobs = tasks.add.enqueue_many(calls)
    inserts = [q for q in queries.captured_queries if "INSERT INTO" in q["sql"]]
    assert len(inserts) == 1
    assert [job is None for job in jobs] == [False, False, True, False, True]
    assert Job.objects.get(pk=jobs[1].pk).kwargs == {"a": 3, "b": 4}
    assert Job.objects.get(pk=jobs[3].pk).idempotency_key == "new"
    assert Job.objects.count() == 4


def test_enqueue_many_of_ten_thousand_rows():
    jobs = tasks.add.enqueue_many((i, i) for i in range(10_000))
    assert len(jobs) == 10_000 and all(jobs)
    assert Job.objects.count() == 10_000
    assert Job.objects.get(pk=jobs[-1].pk).args == [9999, 9999]


def test_a_keyless_batch_on_postgresql_is_a_plain_insert(postgresql_only):
    with CaptureQueriesContext(connection) as queries:
        jobs = tasks.add.enqueue_many([(1, 1), (2, 2)])
    (insert,) = [q["sql"] for q in queries.captured_queries if "INSERT INTO" in q["sql"]]
    assert "ON CONFLICT" not in insert
    assert len(jobs) == 2 and all(jobs)
    # One job with a key sends the whole batch through the conflict-checking insert.
    tasks.add.using(idempotency_key="held").enqueue(0, 0)
    with CaptureQueriesContext(connection) as queries:
        jobs = tasks.add.enqueue_many([(3, 3), Call((4, 4), idempotency_key="held")])
    (insert,) = [q["sql"] for q in queries.captured_queries if "INSERT INTO" in q["sql"]]
    assert "ON CONFLICT DO NOTHING" in insert
    assert jobs[0] is not None and jobs[1] is None
    assert Job.objects.count() == 4


def test_enqueue_many_pauses_the_collector_while_it_builds_the_jobs():
    from django.db.models.signals import post_init

    collector_on = []

    def receiver(sender, instance, **kwargs):
        collector_on.append(gc.isenabled())

    assert gc.isenabled()
    post_init.connect(receiver, sender=Job)
    try:
        jobs = tasks.add.enqueue_many([(1, 2), (3, 4)])
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert len(jobs) == 2 and collector_on == [False, False]
    assert gc.isenabled()


def test_using_sets_queue_priority_attempts_and_time():
    at = timezone.now() + dt.timedelta(hours=1)
    job = tasks.add.using(queue="math", priority=7, max_attempts=9, run_at=at).enqueue(1, 1)
    row = Job.objects.get(pk=job.pk)
    assert (row.queue, row.priority, row.max_attempts, row.run_at) == ("math", 7, 9, at)

    before = timezone.now()
    delayed = Job.objects.get(pk=tasks.add.using(delay=60).enqueue(1, 1).pk)
    assert (
        before + dt.timedelta(seconds=60)
        <= delayed.run_at
        <= timezone.now() + dt.timedelta(seconds=60)
    )
    assert claim_all() == []  # neither is due


def test_using_chains_and_a_later_delay_replaces_run_at():
    at = timezone.now() + dt.timedelta(days=1)
    bound = tasks.add.using(run_at=at, queue="math").using(delay=0, priority=5)
    job = bound.enqueue(1, 1)
    assert (job.queue, job.priority) == ("math", 5)
    assert job.run_at <= timezone.now()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tasks.add.enqueue(1, timezone.now()), "argument 'b'"),
        (lambda: tasks.add.enqueue({"x": {1, 2}}, 1), "argument 'a'['x']"),
        (lambda: tasks.add.enqueue({1: "int key"}, 1), "dict key 1 is a int"),
        (lambda: tasks.add.enqueue(float("nan"), 1), "argument 'a'"),
        (lambda: tasks.echo.enqueue(value=object()), "argument 'value'"),
        (lambda: tasks.add.enqueue(1), "missing a required argument: 'b'"),
        (lambda: tasks.add.enqueue(1, 2, 3), "too many positional arguments"),
        (lambda: tasks.add.enqueue_many([(1, 2), (1, b"x")]), "argument 'b'"),
    ],
)
def test_bad_arguments_raise_type_error_at_enqueue(call, message):
    with pytest.raises(TypeError) as excinfo:
        call()
    assert message in str(excinfo.value)
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"priority": 101}, ValueError, "priority must be from -100 to 100"),
        ({"priority": "high"}, TypeError, "priority must be a whole number"),
        ({"max_attempts": 0}, ValueError, "max_attempts"),
        ({"delay": -1}, ValueError, "delay"),
        ({"run_at": dt.datetime(2030, 1, 1)}, ValueError, "timezone-aware"),
        ({"delay": 1, "run_at": timezone.now()}, TypeError, "not both"),
        ({"idempotency_key": ""}, TypeError, "idempotency_key"),
        ({"queue": ""}, TypeError, "queue"),
    ],
)
def test_bad_options_fail_at_using(options, error, message):
    with pytest.raises(error, match=message):
        tasks.add.using(**options)


def test_calling_a_task_runs_it_here():
    assert tasks.add(2, 3) == 5
    assert Job.objects.count() == 0


def _columns(job):
    return {field.attname: getattr(job, field.attname) for field in Job._meta.concrete_fields}


def test_returned_jobs_are_their_rows_as_the_orm_would_load_them():
    single = tasks.add.enqueue(1, b=2)
    many = tasks.add.enqueue_many([(3, 4), {"a": 5, "b": 6}])
    for job in [single, *many]:
        row = Job.objects.get(pk=job.pk)
        assert _columns(job) == _columns(row)
        assert (job._state.adding, job._state.db) == (False, "default")
    assert many[0].errors is not many[1].errors and many[0].steps is not many[1].steps

    single.priority = 5
    single.save()
    assert Job.objects.count() == 3  # an UPDATE, not a second row
    single.refresh_from_db()
    assert single.priority == 5


def test_post_init_receivers_see_every_returned_job():
    from django.db.models.signals import post_init

    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=Job)
    try:
        jobs = [tasks.add.enqueue(1, 2), *tasks.add.enqueue_many([(3, 4), (5, 6)])]
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert seen == jobs and all(job._state.db == "default" for job in jobs)
