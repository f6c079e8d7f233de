"""A paused queue with a real worker: its job does not start while paused, and starts within
a second of the resume (PostgreSQL: the NOTIFY; SQLite: the commit watcher). And the health
probe against real workers."""

import time
from io import StringIO

import pytest
from django.core.management import call_command

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from jobqueue.sql import Queries
from jobqueue.store import pauses
from tests.conftest import wait_for
from tests.process.test_wakeup import idle_worker
from tests.testapp import tasks

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

PAUSED_FOR = 5.0  # s the job must not start in: the words


def test_a_paused_queues_job_waits_and_starts_within_a_second_of_resume(start_worker, vendor):
    worker = idle_worker(start_worker)
    pauses.pause(["default"], by="test")
    job = tasks.noop.enqueue("paused")
    assert job.queue == "default"
    # The assertion is the wait itself: for five seconds, polled, the job stays pending and
    # unclaimed, though the worker heard of it (NOTIFY, or the watcher on SQLite).
    deadline = time.monotonic() + PAUSED_FOR
    while time.monotonic() < deadline:
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.started_at, row.attempts) == ("pending", None, 0), worker.output()
        time.sleep(0.1)
    assert worker.proc.poll() is None, worker.output()

    # Both times from the clock the started_at column is written with: PostgreSQL's now()
    # (the workers' statements use it), this host's on SQLite (the worker runs here too).
    resumed_at = Queries("default").database_now()
    assert pauses.resume(["default"]).changed == ["default"]
    # On MySQL nothing tells a worker in another process of the resume: it claims the job
    # at its next poll (POLL_INTERVAL doubling up to 30 s), not within a second.
    polls = vendor == "mysql"
    wait_for(
        lambda: Job.objects.get(pk=job.pk).started_at is not None,
        timeout=35 if polls else 5,
        interval=0.01,
        message="the job to start after the resume",
    )
    started = Job.objects.get(pk=job.pk).started_at
    if not polls:
        assert (started - resumed_at).total_seconds() < 1.0, worker.output()
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "succeeded",
        timeout=10,
        message="the job to succeed",
    )


def test_jobs_health_fails_until_a_real_worker_serves_the_queue(start_worker):
    # A job of a task no worker registered stays due whoever serves its queue, so the
    # probe's answer changes with the workers alone.
    Job.objects.create(task_name="shop.tasks.not_deployed_yet", queue="feeds")
    start_worker("--queue", "emails")
    wait_for(lambda: WorkerRow.objects.count() == 1, timeout=30, message="the first worker")
    code, out = health()
    assert code == 1, out
    assert out.startswith('problem: queue "feeds": 1 due job(s) and no live worker serves it')
    start_worker("--queue", "feeds")
    wait_for(lambda: WorkerRow.objects.count() == 2, timeout=30, message="the second worker")
    assert health() == (0, "healthy\n")


def health():
    out = StringIO()
    try:
        call_command("jobs", "health", stdout=out)
    except SystemExit as exit:
        return exit.code, out.getvalue()
    return 0, out.getvalue()
