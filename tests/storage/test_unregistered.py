"""The unregistered_pending statement: pending jobs of tasks no live worker has registered."""

import datetime as dt

import pytest
from django.utils import timezone

from jobqueue.models import Worker as WorkerRow
from jobqueue.store.jobs import Store
from tests.factories import FinishedJobFactory, JobFactory, WorkerFactory

pytestmark = pytest.mark.django_db(transaction=True)


def worker_row(worker_id, tasks, *, heartbeat_age=0.0):
    return WorkerFactory(id=worker_id, tasks=tasks, heartbeat_age=heartbeat_age)


def test_pending_jobs_no_live_worker_registers_are_counted_per_queue_and_task():
    worker_row("live", ["app.a"])
    # Silent for over a LEASE (300 s): dead, whatever it registered.
    worker_row("stale", ["app.b"], heartbeat_age=3600)
    JobFactory(task_name="app.a")
    JobFactory.create_batch(2, task_name="app.b")
    JobFactory(task_name="app.b", queue="emails")
    JobFactory(task_name="app.c", run_at=timezone.now() + dt.timedelta(hours=1))  # scheduled
    JobFactory(task_name="app.c", status="running", token="t" * 32)  # not pending
    JobFactory(task_name="app.d", status="failed")
    FinishedJobFactory(task_name="app.d")
    assert Store().unregistered_pending() == [
        ("default", "app.b", 2),
        ("emails", "app.b", 1),
        ("default", "app.c", 1),
    ]


def test_with_no_live_worker_every_pending_job_is_unregistered():
    worker_row("stale", ["app.a"], heartbeat_age=3600)
    JobFactory(task_name="app.a")
    assert Store().unregistered_pending() == [("default", "app.a", 1)]


def test_a_task_any_live_worker_registers_is_not_counted():
    worker_row("one", ["app.a"])
    worker_row("two", ["app.b", "app.a"])
    # A row whose tasks are not a list (tampered with) registers nothing, and breaks nothing.
    worker_row("odd", {"app.c": True})
    for name in ("app.a", "app.b", "app.c"):
        JobFactory(task_name=name)
    assert Store().unregistered_pending() == [("default", "app.c", 1)]


def test_register_worker_records_the_task_names_and_each_beat_rewrites_them():
    store = Store()
    row = {"hostname": "web-1", "pid": 10, "pool": "default", "queues": {}, "concurrency": 1}
    store.register_worker(worker="w", tasks=["app.a"], **row)
    assert WorkerRow.objects.get(pk="w").tasks == ["app.a"]
    JobFactory(task_name="app.b")
    assert store.unregistered_pending() == [("default", "app.b", 1)]
    store.register_worker(worker="w", tasks=["app.a", "app.b"], **row)
    assert WorkerRow.objects.get(pk="w").tasks == ["app.a", "app.b"]
    assert store.unregistered_pending() == []
