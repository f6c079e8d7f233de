"""Prompt cancel with real processes: an operator's Discard of a running job reaches its
handler within a second, through NOTIFY on PostgreSQL and the next look on SQLite, long
before the heartbeat (every 100 s here) would have noticed."""

import io

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

# The default lease: the heartbeat beats every 100 s and the poll every 25 s, so neither
# can be what tells the handler within a second.
SLOW = {"LEASE": 300, "POLL_INTERVAL": 25}


def started(label):
    wait_for(
        lambda: Execution.objects.filter(label=f"{label}:start").exists(),
        timeout=30,
        message=f"the handler {label} to start",
    )


def cancelled_at(label):
    wait_for(
        lambda: Execution.objects.filter(label=f"{label}:cancelled").exists(),
        timeout=10,
        interval=0.01,
        message=f"the handler {label} to see its cancel",
    )
    return Execution.objects.get(label=f"{label}:cancelled").created


def test_a_discarded_running_job_is_cancelled_within_a_second(start_worker):
    """One sync handler (it waits on ``ctx.cancelled``), one async handler (its coroutine
    is cancelled in its ``await``), both discarded through ``manage.py jobs discard``."""
    worker = start_worker("--concurrency", "3", settings=SLOW)
    wait_for(lambda: WorkerRow.objects.exists(), timeout=30, message="the worker to register")
    sync_job = tasks.until_cancelled.enqueue(label="sync")
    async_job = tasks.async_until_cancelled.enqueue(label="async")
    other = tasks.until_cancelled.enqueue(label="other", seconds=5)
    for label in ("sync", "async", "other"):
        started(label)

    discarded = timezone.now()
    out = io.StringIO()
    call_command("jobs", "discard", str(sync_job.pk), str(async_job.pk), stdout=out)
    assert "2 were running" in out.getvalue()

    for label in ("sync", "async"):
        latency = (cancelled_at(label) - discarded).total_seconds()
        assert latency < 1.0, (label, latency)
    # The fence still refuses what they write late: the sync handler returned a success.
    wait_for(
        lambda: worker.output().count("outcome discarded") >= 2,
        timeout=10,
        message="both late outcomes to be refused",
    )
    for job in (sync_job, async_job):
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.result) == ("discarded", None)
    # The job that was not discarded ran on, untouched, and its slot is still in service.
    wait_for(
        lambda: Job.objects.get(pk=other.pk).status == "succeeded",
        timeout=15,
        message="the job left alone to finish",
    )
    assert not Execution.objects.filter(label="other:cancelled").exists()
    # Nothing stranded: the freed slots run new work.
    after = tasks.noop.enqueue("after")
    wait_for(
        lambda: Job.objects.get(pk=after.pk).status == "succeeded",
        timeout=10,
        message="a new job to run on the freed slots",
    )
    assert "lost its lease" not in worker.output(), "the heartbeat was not what told them"
