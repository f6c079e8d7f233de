"""Wake-up: LISTEN/NOTIFY on PostgreSQL, the commit watcher on SQLite, sleeping until a
delayed job is due, polling."""

import datetime as dt
import io
import itertools
import re
import statistics
import time

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.conftest import database_is_back, wait_for
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

# A long poll proves that what wakes the worker is not its poll.
SLOW_POLL = {"POLL_INTERVAL": 25}


def idle_worker(start_worker, settings=SLOW_POLL):
    worker = start_worker(settings=settings)
    wait_for(lambda: WorkerRow.objects.exists(), timeout=30, message="the worker to register")
    if connection.vendor == "postgresql":
        wait_for(
            lambda: "LISTEN connection" not in worker.output() and _listening(),
            timeout=10,
            message="the worker to LISTEN",
        )
    elif connection.vendor == "sqlite":
        wait_for(
            lambda: "for other connections' commits" in worker.output(),
            timeout=10,
            message="the worker to watch the database",
        )
    # (MySQL: nothing to wait for, the worker polls.)
    time.sleep(0.3)  # let its first (empty) looks pass
    return worker


def _listening():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'LISTEN%%'"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.usefixtures("postgresql_only")
def test_a_job_from_another_process_starts_within_milliseconds(start_worker):
    idle_worker(start_worker)
    latencies = []
    for i in range(50):
        job = tasks.noop.enqueue(f"latency-{i}")
        wait_for(
            lambda job=job: Execution.objects.filter(job_id=job.pk).exists(),
            timeout=5,
            interval=0.002,
            message=f"job {i} to start",
        )
        started = Execution.objects.get(job_id=job.pk).created
        latencies.append((started - job.enqueued_at).total_seconds())
        time.sleep(0.02)
    assert statistics.median(latencies) < 0.1, latencies
    assert max(latencies) < 1.0, latencies


@pytest.mark.usefixtures("postgresql_only")
def test_a_rolled_back_enqueue_wakes_nobody(start_worker):
    worker = idle_worker(start_worker)
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.send_email.enqueue("ada@example.com")
        raise RuntimeError("the view failed")
    time.sleep(0.5)
    assert "woken by a notification" not in worker.output()
    assert not Job.objects.exists()

    tasks.send_email.enqueue("bob@example.com")
    wait_for(
        lambda: "woken by a notification for queue emails" in worker.output(),
        timeout=5,
        message="a committed enqueue to wake the worker",
    )


@pytest.mark.usefixtures("postgresql_only")
def test_a_notification_for_a_queue_it_does_not_serve_does_not_wake_it(start_worker):
    worker = start_worker("--queue", "emails", settings=SLOW_POLL)
    wait_for(lambda: WorkerRow.objects.exists() and _listening(), timeout=30, message="LISTEN")
    time.sleep(0.3)
    tasks.add.enqueue(1, 1)  # queue "default"
    time.sleep(0.5)
    assert "woken by a notification" not in worker.output()


def test_a_delayed_job_starts_when_due(start_worker, vendor):
    if vendor == "postgresql":
        idle_worker(start_worker)
        job = tasks.noop.using(delay=3).enqueue("delayed")
    else:
        # Without LISTEN the worker learns of the job on its first look, then sleeps until
        # it is due rather than until its next poll.
        job = tasks.noop.using(delay=3).enqueue("delayed")
        start_worker(settings=SLOW_POLL)
    wait_for(
        lambda: Execution.objects.filter(label="delayed").exists(),
        timeout=10,
        interval=0.01,
        message="the delayed job to start",
    )
    started = Execution.objects.get(label="delayed").created
    assert abs((started - job.run_at).total_seconds()) < 0.5


def _looks(output):
    return [
        dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
        for m in re.finditer(r"^(\S+ \S+) \d+ DEBUG jobqueue\.worker: looked for", output, re.M)
    ]


@pytest.mark.usefixtures("postgresql_only")
def test_an_idle_worker_without_listen_backs_off(start_worker):
    # A LISTEN address that refuses: the worker polls (on SQLite the watcher stands in for
    # LISTEN, and a file it cannot open polls the same way, tests/runtime/test_watcher.py).
    refused = {"POLL_INTERVAL": 0.25, "LISTEN_URL": "postgres://postgres@127.0.0.1:1/none"}
    worker = start_worker(settings=refused)
    wait_for(lambda: len(_looks(worker.output())) >= 6, timeout=20, message="six looks")
    looks = _looks(worker.output())
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(looks)][:5]
    # 0.25, 0.5, 1, 2, 4 s: each wait twice the one before.
    for expected, gap in zip([0.25, 0.5, 1, 2, 4], gaps, strict=False):
        assert expected * 0.9 < gap < expected + 0.4, gaps


def test_an_idle_worker_with_listen_only_looks_on_its_safety_poll(start_worker, vendor):
    if vendor == "mysql":
        pytest.skip("MySQL has no LISTEN and no file to watch: its idle workers poll")
    # On SQLite the watcher asks the database about forty times meanwhile, and not one of
    # its questions is a statement against the jobs table.
    worker = idle_worker(start_worker, settings={"POLL_INTERVAL": 0.25})
    looks_before = len(_looks(worker.output()))
    time.sleep(4)
    # Polling, it would have looked about four more times by now (0.25, 0.5, 1, 2 s).
    assert len(_looks(worker.output())) == looks_before


def test_a_job_from_another_process_starts_within_a_second_on_sqlite(start_worker, vendor):
    if vendor != "sqlite":
        pytest.skip("SQLite: PostgreSQL's LISTEN has its own test above")
    worker = idle_worker(start_worker)
    time.sleep(1)  # settled: its next look is its safety poll, 30 s away
    looks = len(_looks(worker.output()))
    waits = []
    for i in range(5):
        job = tasks.noop.enqueue(f"from the test's process {i}")
        wait_for(
            lambda job=job: Execution.objects.filter(job_id=job.pk).exists(),
            timeout=5,
            interval=0.01,
            message=f"job {i} to start",
        )
        started = Execution.objects.get(job_id=job.pk).created
        waits.append((started - job.enqueued_at).total_seconds())
        time.sleep(0.5)
    # POLL_INTERVAL is 25 s and the safety poll 30 s: only the watcher can do this.
    assert max(waits) < 2.0, waits
    # One look for each job, and the few that the worker's own commits (the job's start
    # and success) and the test's (the Execution row) cause; never one per watch.
    assert len(_looks(worker.output())) - looks <= 5 * 4, worker.output()


def test_restarting_postgresql_under_an_idle_worker(start_worker, pg_ctl):
    worker = idle_worker(start_worker)
    connection.close()
    pg_ctl("restart")
    wait_for(database_is_back, timeout=60, interval=0.05, message="PostgreSQL to be back")
    back = timezone.now()
    job = tasks.noop.enqueue("after restart")
    wait_for(
        lambda: Execution.objects.filter(job_id=job.pk).exists(),
        timeout=10,
        interval=0.02,
        message="the job to start after the restart",
    )
    started = Execution.objects.get(job_id=job.pk).created
    assert (started - back).total_seconds() < 1.0
    assert worker.proc.poll() is None
    assert "LISTEN connection lost" in worker.output()


@pytest.mark.usefixtures("postgresql_only")
def test_a_job_retried_from_jobs_retry_starts_within_a_second(start_worker):
    job = tasks.noop.enqueue("retried")
    Job.objects.filter(pk=job.pk).update(
        status="failed", attempts=3, finished_at=timezone.now(), last_error="ValueError: boom"
    )
    worker = idle_worker(start_worker)
    retried_at = timezone.now()
    call_command("jobs", "retry", str(job.pk), stdout=io.StringIO())
    wait_for(
        lambda: Execution.objects.filter(job_id=job.pk).exists(),
        timeout=5,
        interval=0.005,
        message="the retried job to start",
    )
    started = Execution.objects.get(job_id=job.pk).created
    # The safety poll is 30 s away and POLL_INTERVAL 25 s: only the NOTIFY can do this.
    assert (started - retried_at).total_seconds() < 1.0
    assert "woken by a notification for queue default" in worker.output()
