"""The admin's dashboard: its ranges, its charts' data, the per-task table and the workers."""

import datetime as dt

import pytest
from django.utils import timezone

from jobqueue.models import QueueSample
from tests.factories import FinishedJobFactory, JobFactory, WorkerFactory, minute_stat

pytestmark = pytest.mark.django_db

URL = "/admin/jobqueue/dashboard/"


def test_linked_from_the_changelist_and_the_queues_page(operator):
    for page in ("/admin/jobqueue/job/", "/admin/jobqueue/queuesummary/", "/admin/"):
        assert f'href="{URL}"' in operator.get(page).content.decode(), page


def test_needs_job_permissions(viewer, outsider):
    assert viewer.get(URL).status_code == 200
    assert outsider.get(URL).status_code == 403


def test_empty_history_renders_empty_charts(viewer):
    response = viewer.get(URL)
    html = response.content.decode()
    assert html.count('class="jq-chart"') == 3
    assert "jq-bar" not in html and "jq-point" not in html
    assert "No job finished in this range." in html


@pytest.mark.parametrize(("key", "points"), [("1h", 60), ("24h", 144), ("7d", 168)])
def test_each_range_has_its_number_of_buckets(viewer, key, points):
    now = timezone.now()
    minute_stat(now, count=3)
    minute_stat(now - dt.timedelta(minutes=30), count=2)
    minute_stat(now - dt.timedelta(days=8), count=100)  # outside every range
    response = viewer.get(URL, {"range": key})
    finished = response.context["charts"][0]
    succeeded = next(s for s in finished["series"] if s.name == "succeeded")
    assert len(succeeded.values) == points
    assert sum(succeeded.values) == 5
    assert succeeded.values[-1] >= 3  # the bucket holding now is the last one


def test_an_unknown_range_falls_back_to_one_hour(viewer):
    assert viewer.get(URL, {"range": "1y"}).context["range"].key == "1h"


def test_the_per_task_table_sums_the_stat_rows(viewer):
    now = timezone.now()
    task = "tests.testapp.tasks.add"
    for minutes in range(10):  # 10 minutes, two workers' rows each
        minute_stat(now - dt.timedelta(minutes=minutes), task, "succeeded", 9, seconds=0.2)
        minute_stat(now - dt.timedelta(minutes=minutes), task, "failed", 1, seconds=4)
    minute_stat(now, "tests.testapp.tasks.other", "succeeded", 5, seconds=20)
    minute_stat(now, task, "started", 100, seconds=0.03)  # starts are not runs
    FinishedJobFactory(
        task_name=task,
        status="failed",
        last_error="Traceback (most recent call last):\nValueError: boom",
    )
    response = viewer.get(URL)
    rows = {t.task_name: t for t in response.context["tasks"]}
    add = rows[task]
    assert (add.runs, add.failed) == (100, 10)
    assert add.failure_rate == pytest.approx(0.1)
    assert add.p50 == 0.25 and add.p95 == 5.0  # bucket upper bounds of 0.2 s and 4 s
    assert add.last_failure == "ValueError: boom"
    assert rows["tests.testapp.tasks.other"].p95 == 30.0
    html = response.content.decode()
    assert ">10 %<" in html and "ValueError: boom" in html


def test_wait_percentiles_come_from_the_starts(viewer):
    now = timezone.now()
    minute_stat(now, outcome="started", count=90, seconds=0.04)
    minute_stat(now, outcome="started", count=10, seconds=2)
    waits = viewer.get(URL).context["charts"][2]["series"]
    assert waits[0].values[-1] == 0.05 and waits[1].values[-1] == 2.5


def test_depth_is_summed_over_queues(viewer):
    minute = timezone.now().replace(second=0, microsecond=0)
    QueueSample.objects.create(minute=minute, queue="a", due=3, running=1)
    QueueSample.objects.create(minute=minute, queue="b", due=4, running=2)
    due, running = viewer.get(URL).context["charts"][1]["series"]
    assert (due.values[-1], running.values[-1]) == (7, 3)
    assert due.values[0] is None  # not sampled: a gap, not a zero


def test_workers_show_their_running_jobs_and_memory(viewer):
    worker = WorkerFactory(memory=50 * 2**20, concurrency=4)
    WorkerFactory(id="idle:1:x")
    job = JobFactory(
        status="running",
        worker=worker.id,
        token="t",
        lease_until=timezone.now() + dt.timedelta(seconds=30),
        started_at=timezone.now() - dt.timedelta(seconds=90),
    )
    response = viewer.get(URL)
    rows = {w.id: w for w in response.context["workers"]}
    assert [j.id for j in rows[worker.id].jobs] == [job.id]
    assert rows[worker.id].jobs[0].seconds == pytest.approx(90, abs=5)
    html = response.content.decode()
    assert "50.0\xa0MB" in html and "idle (0 of 1)" in html
