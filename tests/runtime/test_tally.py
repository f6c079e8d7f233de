"""The dashboard's history as a worker writes it: the in-process tally of the signals, its
flush in one statement, the depth sampled once a minute across workers, and pruning."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobqueue.console import history
from jobqueue.models import Job, MinuteStat, QueueSample
from jobqueue.runtime.outage import Health
from jobqueue.runtime.tally import Recorder, Tally, sample_depth
from jobqueue.runtime.worker import Worker
from jobqueue.store import stats
from tests.factories import JobFactory, minute_stat
from tests.testapp import tasks

NOON = dt.datetime(2026, 12, 1, 12, 0, 30, tzinfo=dt.UTC)


def test_counts_from_many_threads_add_up():
    tally = Tally("w1", clock=lambda: NOON)

    def count() -> None:
        for _ in range(1000):
            tally.add("default", "t", "succeeded", 0.2)

    threads = [threading.Thread(target=count) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [row] = tally.take()
    assert row.count == 8000
    assert row.seconds == pytest.approx(1600)
    assert getattr(row, stats.COLUMNS[stats.bucket_of(0.2)]) == 8000
    assert row.minute == NOON.replace(second=0)
    assert tally.take() == []  # taken means emptied


def test_receivers_count_only_their_own_workers_signals():
    from jobqueue import signals

    tally = Tally("w1", clock=lambda: NOON)
    tally.connect()
    try:
        for worker in ("w1", "w2"):
            signals.job_started.send(
                sender=None, job_id=1, task_name="t", queue="q", attempt=1, worker=worker, wait=3
            )
            signals.job_finished.send(
                sender=None,
                job_id=1,
                task_name="t",
                queue="q",
                status="failed",
                outcome="failed",
                attempt=1,
                worker=worker,
                duration=None,
            )
    finally:
        tally.disconnect()
    rows = {row.outcome: row for row in tally.take()}
    assert {o: r.count for o, r in rows.items()} == {"started": 1, "failed": 1}
    assert rows["started"].seconds == 3
    assert sum(getattr(rows["failed"], c) for c in stats.COLUMNS) == 0  # no duration


@pytest.mark.django_db
def test_a_flush_is_one_insert_and_a_failed_one_keeps_the_counts():
    clock = [NOON]
    tally = Tally("w1", clock=lambda: clock[0])
    for task_name in ("a", "b", "c"):
        for outcome in ("started", "succeeded", "failed"):
            tally.add("default", task_name, outcome, 1.0)
    clock[0] = NOON + dt.timedelta(minutes=1)
    tally.add("default", "a", "succeeded", 1.0)
    with CaptureQueriesContext(connection) as queries:
        assert tally.flush("default") == 10
    assert len(queries.captured_queries) == 1
    assert MinuteStat.objects.count() == 10
    with CaptureQueriesContext(connection) as queries:
        assert tally.flush("default") == 0  # nothing happened: no statement
    assert queries.captured_queries == []

    tally.add("default", "a", "succeeded", 1.0)
    rows = tally.take()
    tally.put_back(rows)
    tally.put_back(rows)
    [row] = tally.take()
    assert row.count == 2
    clock[0] += dt.timedelta(hours=2)  # unwritten for too long: dropped
    tally.put_back(rows)
    assert tally.take() == []


@pytest.mark.django_db
def test_the_depth_is_sampled_once_a_minute_across_workers():
    now = timezone.now().replace(second=10)  # +1 s stays in the same minute
    JobFactory.create_batch(3, queue="emails", run_at=now - dt.timedelta(hours=1))
    JobFactory(queue="emails", run_at=now + dt.timedelta(hours=1))
    JobFactory(queue="feeds", status="running", lease_until=now + dt.timedelta(seconds=30))
    JobFactory(queue="feeds", status="succeeded")
    assert sample_depth("default", now) is True
    with CaptureQueriesContext(connection) as queries:
        assert sample_depth("default", now + dt.timedelta(seconds=1)) is False  # worker two
    assert len(queries.captured_queries) == 1
    rows = {s.queue: (s.due, s.scheduled, s.running) for s in QueueSample.objects.all()}
    assert rows == {"emails": (3, 1, 0), "feeds": (0, 0, 1)}
    assert sample_depth("default", now + dt.timedelta(minutes=1)) is True
    assert QueueSample.objects.count() == 4


@pytest.mark.django_db
def test_an_idle_system_is_sampled_as_zero():
    assert sample_depth("default", NOON) is True
    [sample] = QueueSample.objects.all()
    assert (sample.queue, sample.due, sample.running) == ("", 0, 0)


@pytest.mark.django_db
def test_pruning_deletes_rows_older_than_the_retention_in_batches():
    now = timezone.now()
    for days in (9, 9, 9, 1):
        minute_stat(now - dt.timedelta(days=days))
    QueueSample.objects.create(minute=now - dt.timedelta(days=9), queue="q")
    QueueSample.objects.create(minute=now, queue="q")
    assert stats.prune("default", now, batch=2) == 3  # two stats, one sample
    assert stats.prune("default", now, batch=2) == 1
    assert stats.prune("default", now, batch=2) == 0
    assert MinuteStat.objects.count() == 1 and QueueSample.objects.count() == 1


@pytest.mark.django_db
def test_the_recorder_flushes_samples_and_asks_again_in_a_minute():
    tally = Tally("w1")
    tally.add("default", "t", "succeeded", 0.1)
    recorder = Recorder(tally=tally, using="default", health=Health("test"))
    with CaptureQueriesContext(connection) as queries:
        assert recorder.run(40.0) == 100.0  # at the worker's start: only a minute on
    assert queries.captured_queries == []
    assert recorder.run(100.0) == 160.0
    assert MinuteStat.objects.count() == 1 and QueueSample.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_writes_counts_that_match_the_jobs_it_ran():
    for i in range(5):
        tasks.add.enqueue(i, 1)
    failing = tasks.always_fails.enqueue()
    Worker(burst=True).run()
    assert Job.objects.filter(status="succeeded").count() == 5
    counts: dict[tuple[str, str], int] = {}
    for row in MinuteStat.objects.all():
        key = (row.task_name.rsplit(".", 1)[-1], row.outcome)
        counts[key] = counts.get(key, 0) + row.count
    assert counts[("add", "started")] == 5
    assert counts[("add", "succeeded")] == 5
    assert counts[("always_fails", "started")] == 1
    assert counts[("always_fails", "retried")] == 1
    assert Job.objects.get(pk=failing.pk).status == "pending"


@pytest.mark.django_db
def test_the_heartbeats_register_statement_writes_the_workers_memory():
    from jobqueue.models import Worker as WorkerRow
    from jobqueue.runtime.lease import Registration
    from jobqueue.runtime.limits import resident_memory
    from jobqueue.store.jobs import Store

    registration = Registration(
        store=Store("default"),
        worker="w1",
        hostname="h",
        pid=1,
        pool="default",
        queues={},
        concurrency=1,
        health=Health("test"),
    )
    registration.register()
    first = WorkerRow.objects.get(pk="w1").memory
    assert first is not None and 0 < first <= 2 * resident_memory()
    WorkerRow.objects.filter(pk="w1").update(memory=None)  # as an older version leaves it
    registration.register()  # the next beat
    assert WorkerRow.objects.get(pk="w1").memory is not None


@pytest.mark.django_db
def test_a_failed_flush_keeps_its_counts_for_the_next(monkeypatch):
    from django.db import OperationalError
    from django.db.models.query import QuerySet

    tally = Tally("w1")
    tally.add("default", "t", "succeeded", 0.1)

    def broken(self, *args, **kwargs):
        raise OperationalError("database is away")

    with monkeypatch.context() as patched:
        patched.setattr(QuerySet, "bulk_create", broken)
        with pytest.raises(OperationalError):
            tally.flush("default")
    tally.add("default", "t", "succeeded", 0.1)
    assert tally.flush("default") == 1
    assert MinuteStat.objects.get().count == 2


@pytest.mark.django_db
def test_compaction_merges_old_rows_over_workers_and_keeps_the_sums():
    now = timezone.now()
    old = now - dt.timedelta(hours=3)  # past the 10-minute tier's lag, not the hour's
    recent = now - dt.timedelta(minutes=5)
    for _worker in range(2):  # two workers' rows for the same minutes
        for minutes in range(30):
            minute_stat(old - dt.timedelta(minutes=minutes), "t", "succeeded", 3, seconds=0.2)
        minute_stat(recent, "t", "succeeded", 1)
    minute_stat(now - dt.timedelta(days=2), "t", "failed", 4, seconds=4)
    before = {key: history.read(key, "default", now) for key in history.RANGES}
    stats.compact("default", now)
    spans = sorted(MinuteStat.objects.values_list("span", flat=True))
    assert spans.count(60) == 2  # the recent minute of each worker stays
    assert 3 <= spans.count(600) <= 4  # 30 minutes: three or four 10-minute windows
    assert spans.count(3600) == 1  # the day-old failure, past the 25 h lag
    assert MinuteStat.objects.filter(span=600).aggregate(n=Sum("count"))["n"] == 180
    for key in ("24h", "7d"):  # the coarse charts read the same figures as before
        after = history.read(key, "default", now)
        assert after.finished == before[key].finished
        assert [(t.runs, t.failed, t.p95) for t in after.tasks] == [
            (t.runs, t.failed, t.p95) for t in before[key].tasks
        ]
    stats.compact("default", now)  # nothing more to merge
    assert sorted(MinuteStat.objects.values_list("span", flat=True)) == spans
