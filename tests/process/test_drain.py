"""Real worker processes against one database: every job runs exactly once."""

import signal

import pytest
from django.db.models import Count

from jobqueue.models import Job
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def test_two_processes_of_four_threads_run_every_job_exactly_once(start_worker, vendor):
    # SQLite's one writer at a time makes 2,000 slow there; the servers drain 2,000.
    total = 600 if vendor == "sqlite" else 2000
    fast = {"POLL_INTERVAL": 0.1}
    workers = [start_worker("--concurrency", "4", settings=fast) for _ in range(2)]
    wait_for(
        lambda: Job.objects.none().exists() or _registered() == 2,
        timeout=30,
        message="both workers to register",
    )

    jobs = tasks.noop.enqueue_many([("drain",)] * total)
    assert all(jobs)
    wait_for(
        lambda: Job.objects.filter(status="succeeded").count() == total,
        timeout=120,
        interval=0.2,
        message=f"{total} jobs to succeed",
    )
    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert [worker.wait(30) for worker in workers] == [0, 0]

    assert Execution.objects.count() == total
    per_job = Execution.objects.values("job_id").annotate(n=Count("id"))
    assert {row["n"] for row in per_job} == {1}
    assert per_job.count() == total
    # Both processes took part: the test proves concurrency, not one worker's luck.
    assert Execution.objects.values("pid").distinct().count() == 2
    assert set(Job.objects.values_list("attempts", flat=True)) == {1}


def _registered():
    from jobqueue.models import Worker

    return Worker.objects.count()


def test_runjobs_freezes_what_start_up_built(start_worker):
    job = tasks.frozen_objects.enqueue()
    assert start_worker("--burst").wait(60) == 0
    job.refresh_from_db()
    assert job.status == "succeeded"
    # Django and the apps, imported before the first job: many thousands of objects.
    assert job.result > 10_000
