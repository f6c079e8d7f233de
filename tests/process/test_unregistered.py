"""A pending job of a task no live worker has registered is named, not left waiting silently."""

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.conftest import wait_for
from tests.factories import JobFactory
from tests.testapp import tasks

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

WARNING = re.compile(
    r"WARNING jobqueue\.worker: worker \S+: 2 pending job\(s\) of task\(s\) no live worker has "
    r"registered: shop\.other\.send \(2\)\. A worker claims only tasks it imported"
)


def test_a_pending_job_of_an_unregistered_task_is_named_in_the_log_and_by_jobs_queues(
    start_worker,
):
    # Defined outside any tasks.py the worker imports: no worker registers it.
    stranded = JobFactory.create_batch(2, task_name="shop.other.send", queue="emails")
    known = tasks.add.enqueue(2, 3)
    worker = start_worker("--verbosity", "2")

    wait_for(lambda: WARNING.search(worker.output()), timeout=30, message="the warning")
    wait_for(lambda: Job.objects.get(pk=known.pk).status == "succeeded", timeout=30)
    # At verbosity 2 the start-up log names what the worker registered, not only a count.
    registered = re.search(r"registered task\(s\): (.*)", worker.output())
    assert registered and "tests.testapp.tasks.add" in registered.group(1).split(", ")
    [row] = WorkerRow.objects.all()
    assert "tests.testapp.tasks.add" in row.tasks and "shop.other.send" not in row.tasks

    out, err = StringIO(), StringIO()
    call_command("jobs", "queues", stdout=out, stderr=err)
    assert "pending jobs of tasks no live worker has registered: shop.other.send (2)" in (
        out.getvalue()
    )
    assert "A worker claims only tasks it imported" in err.getvalue()
    out = StringIO()
    call_command("jobs", "queues", "--json", stdout=out)
    rows = {r["queue"]: r for r in json.loads(out.getvalue())}
    assert rows["emails"]["unregistered"] == {"shop.other.send": 2}
    assert rows["emails"]["due"] == 2
    assert all(not r["unregistered"] for queue, r in rows.items() if queue != "emails")
    # The worker left them alone: still pending, no attempt spent.
    for job in stranded:
        job.refresh_from_db()
        assert (job.status, job.attempts) == ("pending", 0)
