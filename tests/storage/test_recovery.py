"""Crash recovery and retention in the store: one guarded statement each."""

import datetime as dt
import threading

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.lease import Heartbeat
from jobqueue.store import explain
from jobqueue.store.jobs import ClaimScope, Store
from tests.factories import FinishedJobFactory, JobFactory
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def expired_running(n=1, **kwargs):
    past = timezone.now() - dt.timedelta(seconds=5)
    return JobFactory.create_batch(
        n,
        status="running",
        attempts=1,
        token="a" * 32,
        worker="gone:1:x",
        lease_until=past,
        started_at=past,
        **kwargs,
    )


def test_expired_lease_returns_the_job_without_spending_an_attempt():
    WorkerRow.objects.create(
        id="gone:1:x",
        hostname="web-3",
        pid=4242,
        pool="default",
        concurrency=4,
        last_heartbeat=timezone.now() - dt.timedelta(hours=1),
    )
    [job] = expired_running()
    [(job_id, _, status)] = Store().rescue_expired()
    row = Job.objects.get(pk=job.pk)
    assert (job_id, status) == (job.pk, "pending")
    assert (row.status, row.attempts, row.crashes, row.token, row.worker) == (
        "pending",
        0,
        1,
        None,
        None,
    )
    assert "host web-3, pid 4242, last heartbeat" in row.last_error
    assert "crash 1 of at most 3" in row.last_error
    assert row.errors[-1]["type"] == "WorkerLost" and row.errors[-1]["attempt"] == 1
    assert dt.datetime.fromisoformat(row.errors[-1]["at"]).utcoffset() == dt.timedelta(0)
    assert Store().reap_workers() == 1


def test_a_live_lease_is_left_alone():
    job = JobFactory(
        status="running", token="b" * 32, lease_until=timezone.now() + dt.timedelta(minutes=1)
    )
    assert Store().rescue_expired() == []
    assert Job.objects.get(pk=job.pk).status == "running"


def test_park_policy_and_the_crash_limit_abandon():
    [parked] = expired_running(on_crash="park")
    [last_chance] = expired_running(crashes=2)
    Store().rescue_expired()
    for job, reason in [(parked, 'on_crash="park"'), (last_chance, "after 3 crashes")]:
        row = Job.objects.get(pk=job.pk)
        assert row.status == "abandoned" and reason in row.last_error
        assert row.finished_at is not None and row.worker == "gone:1:x"


def test_a_crash_entry_holds_the_facts_and_its_words_are_rendered_from_them():
    WorkerRow.objects.create(
        id="gone:1:x", hostname="web-3", pid=4242, pool="default", concurrency=4
    )
    [job] = expired_running(crashes=2)
    [(_, _, status)] = Store().rescue_expired()
    row = Job.objects.get(pk=job.pk)
    entry = row.errors[-1]
    lease_until = dt.datetime.fromisoformat(entry["lease_until"])
    heartbeat = dt.datetime.fromisoformat(entry["last_heartbeat"])
    assert status == "abandoned" and lease_until == job.lease_until
    assert heartbeat == WorkerRow.objects.get(pk="gone:1:x").last_heartbeat
    assert {key: entry[key] for key in ("worker", "host", "pid", "policy", "outcome")} == {
        "worker": "gone:1:x",
        "host": "web-3",
        "pid": 4242,
        "policy": "retry",
        "outcome": "abandoned",
    }
    assert (entry["crashes"], entry["max_crashes"], entry["attempt"]) == (3, 3, 1)
    assert entry["reason"].startswith("The worker stopped renewing its lease")
    # The words, once: the entry's message and last_error are what explain renders.
    assert entry["message"] == row.last_error == explain.crash(entry)
    assert "Parked as abandoned after 3 crashes (MAX_CRASHES)" in row.last_error


def test_an_abandoned_job_frees_its_idempotency_key():
    expired_running(on_crash="park", idempotency_key="pay:1")
    Store().rescue_expired()
    assert tasks.add.using(idempotency_key="pay:1").enqueue(1, 1) is not None


def test_two_rescuers_at_once_apply_the_policy_once():
    jobs = expired_running(300)
    barrier = threading.Barrier(2)
    results = []

    def rescue():
        try:
            barrier.wait()
            results.append(Store().rescue_expired())
        finally:
            connections.close_all()

    threads = [threading.Thread(target=rescue) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sum(len(r) for r in results) == len(jobs)
    assert set(Job.objects.values_list("crashes", flat=True)) == {1}
    assert set(Job.objects.values_list("status", flat=True)) == {"pending"}


def test_heartbeat_renews_held_leases_and_flags_lost_ones():
    JobFactory.create_batch(2)
    store = Store()
    held = store.claim(worker="w", task_names=[tasks.add.name], queues=None, limit=2)
    attempts = [Attempt(job=j, task=tasks.add) for j in held]
    Job.objects.filter(pk=held[0].id).update(lease_until=timezone.now() + dt.timedelta(seconds=40))
    Job.objects.filter(pk=held[1].id).update(token="c" * 32)  # someone else owns it now
    beat = Heartbeat(
        store=store, worker="w", held=lambda: attempts, register=lambda: None, interval=100
    )
    beat.beat()
    assert Job.objects.get(pk=held[0].id).lease_until > timezone.now() + dt.timedelta(seconds=250)
    assert not attempts[0].cancelled.is_set()
    assert attempts[1].cancelled.is_set()


def test_prune_deletes_old_finished_rows_in_batches(settings):
    settings.JOBQUEUE = {"RETENTION": {"succeeded": 3600, "failed": None}}
    old = timezone.now() - dt.timedelta(hours=2)
    Job.objects.bulk_create(
        [Job(task_name="x", status="succeeded", finished_at=old) for _ in range(2500)]
    )
    keep = [
        FinishedJobFactory(),  # recent
        FinishedJobFactory(status="failed", finished_at=old),  # failed: kept forever here
        JobFactory(status="abandoned", finished_at=old),  # waits for an operator, never pruned
        JobFactory(),
    ]
    assert Store().prune() == {"succeeded": 2500, "discarded": 0}
    assert sorted(Job.objects.values_list("pk", flat=True)) == sorted(j.pk for j in keep)


def test_prune_in_slices_reports_what_is_left(settings):
    settings.JOBQUEUE = {"RETENTION": {"succeeded": 3600}}
    old = timezone.now() - dt.timedelta(hours=2)
    Job.objects.bulk_create(
        [Job(task_name="x", status="succeeded", finished_at=old) for _ in range(2500)]
    )
    store = Store()
    assert store.prune(max_batches=2)["succeeded"] == 2000
    assert store.more_to_prune
    # One statement per status is enough now: nothing is left to come back for.
    assert store.prune(max_batches=3)["succeeded"] == 500
    assert not store.more_to_prune
    assert not Job.objects.exists()


# -- jobs claimed ahead: only a job whose handler started counts a crash ----------------


def held_and_started(worker="gone:1:x", lease_until=None):
    """Two running jobs of one worker, as a worker holds them: one claimed ahead and never
    started (started_at NULL), one whose handler started."""
    lease_until = lease_until or timezone.now() - dt.timedelta(seconds=5)
    earlier = {"type": "ValueError", "message": "boom", "attempt": 1}
    common = {
        "status": "running",
        "attempts": 2,  # one failed attempt before, and this claim
        "worker": worker,
        "lease_until": lease_until,
        "last_error": "ValueError: boom",
        "errors": [earlier],
    }
    run_at = timezone.now() - dt.timedelta(minutes=3)
    held = JobFactory(token="h" * 32, started_at=None, run_at=run_at, **common)
    started = JobFactory(token="s" * 32, started_at=timezone.now(), run_at=run_at, **common)
    return held, started


RECOVERIES = {
    "lease expiry": lambda store, worker: store.rescue_expired(),
    "supervisor": lambda store, worker: store.release_worker(worker, "The worker died."),
    "shutdown": lambda store, worker: store.release(worker, ["h" * 32, "s" * 32], "Stopped."),
}


@pytest.mark.parametrize("recovery", RECOVERIES)
def test_a_held_job_goes_back_unspent_and_only_a_started_one_counts_a_crash(recovery, caplog):
    held, started = held_and_started()
    with caplog.at_level("INFO", logger="jobqueue"):
        recovered = RECOVERIES[recovery](Store(), "gone:1:x")
    assert sorted(recovered) == sorted(
        [(held.pk, held.task_name, "pending"), (started.pk, started.task_name, "pending")]
    )
    row = Job.objects.get(pk=held.pk)
    # As unclaim hands a job back: the attempt given back, no crash, no error entry.
    assert (row.status, row.attempts, row.crashes) == ("pending", 1, 0)
    assert (row.token, row.worker, row.lease_until, row.started_at) == (None, None, None, None)
    assert row.last_error == "ValueError: boom" and row.errors == held.errors
    assert row.run_at == held.run_at
    row = Job.objects.get(pk=started.pk)
    assert (row.status, row.attempts, row.crashes) == ("pending", 1, 1)
    assert row.errors[-1]["type"] == "WorkerLost" and "crash 1 of at most 3" in row.last_error
    assert row.run_at > started.run_at
    assert f"job {started.pk} ({started.task_name}) recovered as pending" in caplog.text
    assert f"job {held.pk} " not in caplog.text
    assert "1 job(s) claimed ahead and never started went back to pending" in caplog.text


def test_a_held_job_is_never_parked_by_a_crash_it_did_not_start():
    # Held, though it would park on a crash (an older version held such jobs; or the claim
    # is changed one day): it never ran, so neither on_crash="park" nor MAX_CRASHES applies.
    past = timezone.now() - dt.timedelta(seconds=5)
    common = {"status": "running", "attempts": 1, "worker": "gone:1:x", "lease_until": past}
    park = JobFactory(on_crash="park", token="p" * 32, **common)
    last_chance = JobFactory(crashes=2, token="l" * 32, **common)
    Store().rescue_expired()
    for job, crashes in [(park, 0), (last_chance, 2)]:
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.crashes, row.finished_at, row.errors) == (
            "pending",
            crashes,
            None,
            [],
        )


def test_a_held_job_whose_start_was_recorded_counts_a_crash():
    JobFactory()
    store = Store()
    [held] = store.claim(worker="w", task_names=[tasks.add.name], queues=None, limit=0, ahead=1)
    assert held.held
    scope = ClaimScope("w", (tasks.add.name,), None)
    store.record([], scope=scope, limit=0, started=[held])  # what the writer sends
    [(_, _, status)] = store.release_worker("w", "The worker died.")
    row = Job.objects.get(pk=held.id)
    assert (status, row.crashes, row.errors[-1]["type"]) == ("pending", 1, "WorkerLost")


def dead_worker(worker_id="gone:1:x"):
    return WorkerRow.objects.create(
        id=worker_id,
        hostname="web-3",
        pid=4242,
        pool="default",
        concurrency=4,
        last_heartbeat=timezone.now() - dt.timedelta(hours=1),
    )


def test_an_idle_recovery_pass_is_one_statement_on_postgresql_and_still_reaps(vendor):
    dead_worker()
    live = JobFactory(
        status="running", token="b" * 32, lease_until=timezone.now() + dt.timedelta(minutes=1)
    )
    connection = connections["default"]
    with CaptureQueriesContext(connection) as queries:
        assert Store().rescue_pass() == []
    # SQLite has no writing CTEs: the check, then the reap, as before the pass was folded.
    assert len(queries.captured_queries) == (1 if vendor == "postgresql" else 2), [
        q["sql"] for q in queries.captured_queries
    ]
    assert not WorkerRow.objects.exists()
    assert Job.objects.get(pk=live.pk).status == "running"


def test_a_recovery_pass_that_finds_an_expired_lease_recovers_it_then_reaps():
    dead_worker()
    [job] = expired_running()
    [(job_id, _, status)] = Store().rescue_pass()
    row = Job.objects.get(pk=job.pk)
    assert (job_id, status, row.status, row.crashes) == (job.pk, "pending", "pending", 1)
    # Recovered before the reap: the crash's words still name the dead worker's host.
    assert "host web-3, pid 4242, last heartbeat" in row.last_error
    assert not WorkerRow.objects.exists()
    assert Store().rescue_pass() == []


def test_the_recovery_check_reads_the_running_lease_index_with_many_finished_rows():
    Job.objects.bulk_create(
        [
            Job(task_name=tasks.add.name, status="succeeded", finished_at=timezone.now())
            for _ in range(20_000)
        ]
    )
    JobFactory.create_batch(
        20, status="running", token="c" * 32, lease_until=timezone.now() + dt.timedelta(minutes=1)
    )
    q = Store().queries
    connection = connections["default"]
    with connection.cursor() as cursor:
        explain = "EXPLAIN QUERY PLAN" if q.vendor == "sqlite" else "EXPLAIN"
        if q.vendor == "mysql":
            cursor.execute("ANALYZE TABLE jobqueue_job")
            cursor.fetchall()
        else:
            cursor.execute("ANALYZE jobqueue_job" if q.vendor == "postgresql" else "ANALYZE")
        cursor.execute(f"{explain} {q.statements['rescue_check']}", {"lease": 300, **q.clock()})
        plan = "\n".join(" ".join(map(str, row)) for row in cursor.fetchall())
    assert "jobqueue_job_running_lease" in plan, plan
