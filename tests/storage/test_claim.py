"""The claim: one statement, due pending rows only, by priority then run_at, fenced writes."""

import datetime as dt
import json

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobqueue import conf
from jobqueue.exceptions import JobRunAborted
from jobqueue.models import Job
from jobqueue.sql import Queries
from jobqueue.store.jobs import ClaimScope, Store, success
from tests.factories import FinishedJobFactory, JobFactory
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.testapp.tasks.add"


def claim(limit=10, task_names=(ADD,), queues=None, excluded=(), ahead=0):
    return Store().claim(
        worker="w1",
        task_names=list(task_names),
        queues=queues,
        excluded=excluded,
        limit=limit,
        ahead=ahead,
    )


def test_priority_first_then_run_at():
    now = timezone.now()
    low_old = JobFactory(priority=0, run_at=now - dt.timedelta(minutes=5))
    high_new = JobFactory(priority=10, run_at=now - dt.timedelta(seconds=1))
    low_new = JobFactory(priority=0, run_at=now - dt.timedelta(minutes=1))
    negative = JobFactory(priority=-5, run_at=now - dt.timedelta(hours=1))
    JobFactory(priority=100, run_at=now + dt.timedelta(minutes=1))  # not due
    order = [claim(limit=1)[0].id for _ in range(4)]
    assert order == [high_new.id, low_old.id, low_new.id, negative.id]
    assert claim() == []


def test_claim_writes_token_lease_worker_attempt_and_started_at():
    job = JobFactory()
    before = timezone.now()
    [claimed] = claim()
    row = Job.objects.get(pk=job.pk)
    assert row.status == "running" and row.attempts == 1 == claimed.attempt
    assert row.worker == "w1" and row.token == claimed.token and len(row.token) == 32
    lease = conf.get().lease
    assert row.lease_until - row.started_at == dt.timedelta(seconds=lease) or (
        abs((row.lease_until - row.started_at).total_seconds() - lease) < 0.01
    )
    assert row.started_at >= before - dt.timedelta(seconds=1)
    assert claimed.args == [1, 2] and claimed.kwargs == {}


def test_claim_ahead_takes_more_than_the_free_slots_in_the_same_order():
    jobs = JobFactory.create_batch(6)
    claimed = claim(limit=2, ahead=3)
    assert [j.id for j in claimed] == [j.id for j in jobs[:5]]


def test_claim_ahead_stops_at_the_first_job_a_crash_would_park():
    max_crashes = conf.get().max_crashes
    first = JobFactory(on_crash="park")  # for a free slot: a park job may run at once
    held = JobFactory()
    parks = JobFactory(on_crash="park")
    after = JobFactory()
    assert [j.id for j in claim(limit=1, ahead=5)] == [first.id, held.id]
    # A job one crash away from MAX_CRASHES is parked by a crash too: not held either.
    Job.objects.filter(pk=parks.pk).update(on_crash="retry", crashes=max_crashes - 1)
    assert claim(limit=0, ahead=5) == []
    assert [j.id for j in claim(limit=1, ahead=5)] == [parks.id, after.id]


def test_unclaim_hands_a_held_job_back_unspent():
    job = JobFactory(attempts=1)  # one attempt spent earlier
    [claimed] = claim(limit=0, ahead=1)
    assert Job.objects.get(pk=job.pk).attempts == 2
    other_worker = Store().unclaim("w2", [claimed.token])
    assert other_worker == set()
    assert Store().unclaim("w1", [claimed.token]) == {job.pk}
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.crashes) == ("pending", 1, 0)
    assert (row.token, row.worker, row.lease_until) == (None, None, None)
    # Its token is gone: a late write from the held attempt is refused.
    with pytest.raises(JobRunAborted):
        Store().succeed(claimed, 1, worker="w1")


def test_claim_takes_up_to_the_limit_in_one_statement():
    JobFactory.create_batch(7)
    with CaptureQueriesContext(connection) as queries:
        claimed = claim(limit=5)
    assert len(claimed) == 5
    statements = [q["sql"] for q in queries.captured_queries if q["sql"] not in _TRANSACTION]
    # MySQL has no UPDATE ... RETURNING: a locking read and the write, in one transaction.
    assert len(statements) == (2 if connection.vendor == "mysql" else 1), statements
    assert len({c.token for c in claimed}) == 5


_TRANSACTION = {"BEGIN", "COMMIT", "ROLLBACK"}


def test_only_registered_task_names_are_claimed():
    unknown = JobFactory(task_name="someone.elses.task")
    known = JobFactory()
    assert [c.id for c in claim()] == [known.id]
    row = Job.objects.get(pk=unknown.pk)
    assert (row.status, row.attempts) == ("pending", 0)


def test_queue_selection_and_exclusion():
    emails = JobFactory(queue="emails")
    feeds = JobFactory(queue="feeds")
    default = JobFactory(queue="default")
    assert [c.id for c in claim(queues=("emails",))] == [emails.id]
    assert [c.id for c in claim(excluded=("feeds",))] == [default.id]
    assert [c.id for c in claim()] == [feeds.id]


def test_finished_rows_are_never_claimed():
    FinishedJobFactory.create_batch(3)
    JobFactory(status="failed")
    JobFactory(status="abandoned")
    assert claim() == []


def test_fenced_write_refused_when_token_changed():
    JobFactory()
    [job] = claim()
    Job.objects.filter(pk=job.id).update(token="0" * 32)
    with pytest.raises(JobRunAborted, match="no longer owns the job"):
        Store().succeed(job, "late", worker="w1")
    assert Job.objects.get(pk=job.id).status == "running"
    assert Job.objects.get(pk=job.id).result is None


def test_fenced_write_refused_inside_the_safety_buffer():
    JobFactory()
    [job] = claim()
    buffer = conf.get().safety_buffer
    Job.objects.filter(pk=job.id).update(
        lease_until=timezone.now() + dt.timedelta(seconds=buffer / 2)
    )
    with pytest.raises(JobRunAborted):
        Store().succeed(job, "late", worker="w1")


def test_fenced_write_accepted_with_the_lease_held():
    JobFactory()
    [job] = claim()
    Store().succeed(job, {"ok": True}, worker="w1")
    row = Job.objects.get(pk=job.id)
    assert (row.status, row.result, row.lease_until) == ("succeeded", {"ok": True}, None)
    assert row.finished_at is not None
    with pytest.raises(JobRunAborted):  # a second outcome for the same attempt
        Store().fail(job, {"type": "X", "message": "late"}, worker="w1")


def _plan(sql, params):
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE jobqueue_job")
            cursor.execute("EXPLAIN " + sql, params)
        elif connection.vendor == "mysql":
            cursor.execute("ANALYZE TABLE jobqueue_job")
            cursor.fetchall()
            cursor.execute("EXPLAIN " + sql, params)
        else:
            cursor.execute("ANALYZE")
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return "\n".join(" ".join(map(str, row)) for row in cursor.fetchall())


def _claim_params(q, *, limit, done=(), started=()):
    """The claim statement's parameters, as the store passes them, for worker w1 and ADD."""
    return {
        "worker": "w1",
        "task_names": q.names([ADD]),
        "all_queues": True,
        "queues": q.names([]),
        "excluded": q.names([]),
        "limit": limit,
        "ahead": 0,
        "claim_limit": limit,  # MySQL's claim_lock: limit + ahead
        "max_crashes": 3,
        "lease": 300,
        # On PostgreSQL the claim also records the successes given.
        "done": json.dumps([{"id": j.id, "token": j.token, "result": None} for j in done]),
        "done_ids": q.ids([j.id for j in done]),
        # ...and the starts of held jobs.
        "started": json.dumps([{"id": j.id, "token": j.token} for j in started]),
        "started_ids": q.ids([j.id for j in started]),
        "buffer": 5,
        **q.clock(lease_until=300, fence=5),
    }


def test_claim_uses_the_partial_index_with_many_finished_rows():
    FinishedJobFactory._meta.model.objects.bulk_create(
        [Job(task_name=ADD, status="succeeded", finished_at=timezone.now()) for _ in range(20_000)]
    )
    JobFactory.create_batch(20)
    q = Queries("default")
    plan = _plan(q.statements[_claim_read(q)], _claim_params(q, limit=4))
    assert "jobqueue_job_claim" in plan, plan


def _claim_read(q):
    """The statement that finds the jobs to claim: on MySQL the locking read of the pair."""
    return "claim_lock" if q.vendor == "mysql" else "claim"


def test_the_claim_and_its_next_due_read_the_partial_index(postgresql_only):
    # The next due job rides in the claim statement (an idle worker's look is one
    # statement): its part must not change how the claim finds jobs, and reads the
    # pending rows through an index, never every row.
    FinishedJobFactory._meta.model.objects.bulk_create(
        [Job(task_name=ADD, status="succeeded", finished_at=timezone.now()) for _ in range(20_000)]
    )
    JobFactory.create_batch(20)
    q = Queries("default")
    plan = _plan(q.statements["claim"], _claim_params(q, limit=4))
    due_part = plan.split("CTE due", 1)[1].split("CTE flow_keys", 1)[0]
    assert "Index Scan using jobqueue_job_claim" in due_part, plan
    assert "Sort" not in due_part, plan
    # The last InitPlan, run only when nothing was claimed.
    # (After flow control's last CTE; the first of the parts that read the pending rows.)
    next_due_part = plan.split("CTE advanced", 1)[1].split("CTE Scan on claimed", 1)[0]
    assert "Index Cond: ((status)::text = 'pending'::text)" in next_due_part, plan
    # The paused queues' table (a row per paused queue) is read once, whole; the job table
    # never is.
    assert "Seq Scan on jobqueue_job " not in plan, plan


def test_a_claim_that_finds_nothing_says_when_the_next_job_is_due():
    store = Store()
    scope = ClaimScope("w1", (ADD,), None)
    assert store.record([], scope=scope, limit=2).next_due is None  # nothing pending
    JobFactory(run_at=timezone.now() + dt.timedelta(seconds=60))
    later = store.record([], scope=scope, limit=2)
    assert later == [] and 55 < later.next_due <= 60
    JobFactory()
    found = store.record([], scope=scope, limit=2)
    assert len(found) == 1 and found.next_due is None  # it claimed: not read


def test_successes_are_found_by_primary_key_however_many_jobs_run(postgresql_only):
    # 5,000 jobs running (many workers): joining the successes to every running row, as a
    # plan by status would, costs a scan of them all for each batch of successes.
    Job.objects.bulk_create([Job(task_name=ADD) for _ in range(5_000)])
    held = claim(limit=5_000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
    q = Queries("default")
    params = _claim_params(q, limit=2, done=held[:2], started=held[2:4])
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + q.statements["claim"], params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # The parts under "CTE done" and "CTE started" read the table through its primary key
    # only.
    done_part = plan.split("CTE done", 1)[1].split("CTE started", 1)[0]
    started_part = plan.split("CTE started", 1)[1].split("CTE due", 1)[0]
    for part in (done_part, started_part):
        assert "jobqueue_job_pkey" in part, plan
        assert "jobqueue_job_status_finished" not in part, plan


def _analyzes(block):
    """How many ANALYZE statements ``block()`` sent on the test's connection."""
    with CaptureQueriesContext(connection) as queries:
        block()
    return sum(q["sql"].startswith("ANALYZE") for q in queries.captured_queries)


def _never_analysed():
    """The job table as a new one is: no statistics, nothing but its pages to plan on."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_job")


def test_a_campaign_the_statistics_do_not_know_of_gets_the_claim_its_index(postgresql_only):
    # A campaign, 50,000 jobs in calls of 10,000, into a table never analysed. Planned on
    # no statistics, the claim reads every pending row and sorts them (bench W10); the
    # first call has the table analysed once it committed, and the later ones, which the
    # statistics now know the like of, do not.
    _never_analysed()
    calls = [[(i, i) for i in range(first, first + 10_000)] for first in range(0, 50_000, 10_000)]
    assert [_analyzes(lambda c=c: tasks.add.enqueue_many(c)) for c in calls] == [1, 0, 0, 0, 0]
    q = Queries("default")
    with connection.cursor() as cursor:  # no ANALYZE here: the statistics as they are
        cursor.execute("EXPLAIN " + q.statements["claim"], _claim_params(q, limit=4))
        plan = "\n".join(row[0] for row in cursor.fetchall())
    due = plan.split("CTE due", 1)[1].split("CTE flow_keys", 1)[0]
    assert "Index Scan using jobqueue_job_claim" in due, plan
    assert "Sort" not in due, plan


def test_no_analyze_for_a_small_batch_a_rolled_back_one_or_on_sqlite():
    assert _analyzes(lambda: tasks.add.enqueue_many((i, i) for i in range(999))) == 0

    def rolled_back():
        with pytest.raises(RuntimeError), transaction.atomic():
            tasks.add.enqueue_many((i, i) for i in range(2_000))
            raise RuntimeError

    assert _analyzes(rolled_back) == 0
    # Committed: one on PostgreSQL, none on SQLite, which is left as it was.
    expected = 1 if connection.vendor == "postgresql" else 0
    assert _analyzes(lambda: tasks.add.enqueue_many((i, i) for i in range(2_000))) == expected


# -- jobs claimed ahead: held with no start until a slot takes them --------------------


def started_at(job_id):
    return Job.objects.get(pk=job_id).started_at


def test_a_job_claimed_ahead_is_held_with_no_start_and_comes_after_the_free_slots_jobs():
    # One already ran an attempt: its old start must not make it look started now.
    retried = JobFactory(priority=5, attempts=1, started_at=timezone.now() - dt.timedelta(hours=1))
    first, second, third = JobFactory.create_batch(3)
    claimed = claim(limit=1, ahead=3)
    # For the free slot: the highest priority; then the held ones, in priority order.
    assert [(j.id, j.held) for j in claimed] == [
        (retried.id, False),
        (first.id, True),
        (second.id, True),
        (third.id, True),
    ]
    assert started_at(retried.id) is not None
    assert started_at(retried.id) > timezone.now() - dt.timedelta(minutes=1)
    assert [started_at(j.id) for j in (first, second, third)] == [None] * 3
    JobFactory(priority=10, attempts=1, started_at=timezone.now() - dt.timedelta(hours=1))
    [held] = claim(limit=0, ahead=1)
    assert held.held and started_at(held.id) is None


def test_the_start_of_a_held_job_is_recorded_by_the_next_write_fenced_by_its_token():
    JobFactory.create_batch(4)
    store = Store()
    scope = ClaimScope("w1", (ADD,), None)
    started, stale, both, still_held = claim(limit=0, ahead=4)
    Job.objects.filter(pk=stale.id).update(token="0" * 32)  # another attempt owns it now
    # ``both`` started and succeeded since the last write: it goes out as a success only,
    # which records its start too (PostgreSQL updates no row twice in one statement).
    store.record([success(both, 7)], scope=scope, limit=0, started=[started, stale, both])
    assert started_at(started.id) is not None
    assert Job.objects.get(pk=started.id).status == "running"
    assert started_at(stale.id) is None
    row = Job.objects.get(pk=both.id)
    assert (row.status, row.result) == ("succeeded", 7)
    assert row.started_at is not None and row.started_at <= row.finished_at
    assert started_at(still_held.id) is None


@pytest.mark.parametrize("outcome", ["retry", "fail", "snooze"])
def test_an_outcome_written_before_the_start_records_the_start(outcome):
    JobFactory()
    [held] = claim(limit=0, ahead=1)
    store = Store()
    error = {"type": "ValueError", "message": "boom"}
    if outcome == "retry":
        store.retry(held, error, 10, worker="w1")
    elif outcome == "fail":
        store.fail(held, error, worker="w1")
    else:
        store.snooze(held, 10, worker="w1")
    assert started_at(held.id) is not None
