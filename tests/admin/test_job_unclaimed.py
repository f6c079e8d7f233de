"""A pending job's page says why no worker will claim it, when none will."""

import pytest

from tests.factories import JobFactory, WorkerFactory

pytestmark = pytest.mark.django_db

UNREGISTERED = "No live worker has registered this task"
NO_WORKER = "No worker is running"


def page(operator, job):
    response = operator.get(f"/admin/jobqueue/job/{job.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def worker_row(worker_id, tasks, *, heartbeat_age=0.0):
    return WorkerFactory(id=worker_id, tasks=tasks, heartbeat_age=heartbeat_age)


def test_a_pending_job_of_a_task_no_live_worker_registers_says_so(operator):
    worker_row("live", ["tests.testapp.tasks.add"])
    worker_row(
        "stale", ["shop.other.send"], heartbeat_age=3600
    )  # dead: its names count for nothing
    html = page(operator, JobFactory(task_name="shop.other.send"))
    assert UNREGISTERED in html and "JOBQUEUE[&quot;TASK_MODULES&quot;]" in html
    assert NO_WORKER not in html


def test_with_no_live_worker_at_all_the_page_says_no_worker_is_running(operator):
    worker_row("stale", ["tests.testapp.tasks.add"], heartbeat_age=3600)
    html = page(operator, JobFactory())
    assert NO_WORKER in html and UNREGISTERED not in html


def test_a_job_a_live_worker_will_claim_says_nothing_of_the_kind(operator):
    worker_row("other", ["shop.tasks.rebuild_feed"])
    worker_row("live", ["tests.testapp.tasks.add"])
    html = page(operator, JobFactory())
    assert UNREGISTERED not in html and NO_WORKER not in html


def test_only_pending_jobs_carry_the_sentence(operator):
    html = page(operator, JobFactory(task_name="shop.other.send", status="failed"))
    assert UNREGISTERED not in html and NO_WORKER not in html


def test_staff_who_may_only_view_jobs_see_it_too(viewer):
    worker_row("live", ["tests.testapp.tasks.add"])
    assert UNREGISTERED in page(viewer, JobFactory(task_name="shop.other.send"))
