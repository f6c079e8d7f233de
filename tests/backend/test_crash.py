"""A django.tasks task whose worker is killed is recovered exactly like a jobqueue.task one.

The same scenarios as tests/process/test_crash.py, with the tasks written for django.tasks.
"""

import time

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.tasks import TaskResultStatus

from jobqueue.models import Job
from jobqueue.store.errors import WorkerLost
from tests.conftest import wait_for
from tests.process.test_crash import LEASE, RESCUE_INTERVAL, SHORT
from tests.testapp import django_tasks
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]
needs_task_options = pytest.mark.skipif(
    not django_tasks.OPTIONS_SUPPORTED, reason="Django 6.1 hands @task options to the backend"
)


def executions(label):
    return Execution.objects.filter(label=label)


def test_kill_9_returns_the_task_and_another_worker_completes_it(start_worker, tmp_path):
    gate = tmp_path / "gate"
    result = django_tasks.block_until.enqueue(str(gate))
    first = start_worker(settings=SHORT)
    wait_for(lambda: executions("dj_block:start").exists(), timeout=30, message="the first run")
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING and result.attempts == 1
    first.kill()

    second = start_worker(settings=SHORT)
    wait_for(
        lambda: executions("dj_block:start").count() == 2,
        timeout=LEASE + RESCUE_INTERVAL + 10,
        message="a second worker to start the task",
    )
    row = Job.objects.get(pk=int(result.id))
    assert (row.status, row.attempts, row.crashes) == ("running", 1, 1)
    # The crash did not spend an attempt: the context still says attempt 1.
    assert list(executions("dj_block:start").values_list("attempt", flat=True)) == [1, 1]

    gate.touch()
    wait_for(lambda: result.refresh() or result.is_finished, timeout=10, message="the success")
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == f"done by {second.pid}"
    assert [error.exception_class for error in result.errors] == [WorkerLost]
    assert f"pid {first.pid}" in result.errors[0].traceback or "no longer" in (
        result.errors[0].traceback
    )
    assert executions("dj_block:end").get().pid == second.pid


@needs_task_options
def test_kill_9_with_park_fails_the_result_and_never_runs_it_again(start_worker, tmp_path):
    result = django_tasks.park_block_until.enqueue(str(tmp_path / "never"))
    first = start_worker(settings=SHORT)
    wait_for(lambda: executions("dj_park:start").exists(), timeout=30, message="the first run")
    first.kill()
    start_worker(settings=SHORT)
    wait_for(
        lambda: Job.objects.get(pk=int(result.id)).status == "abandoned",
        timeout=LEASE + 10,
        message="the task to be parked",
    )
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert 'on_crash="park"' in result.errors[0].traceback
    time.sleep(2 * RESCUE_INTERVAL + 0.5)
    assert executions("dj_park:start").count() == 1


def test_a_task_that_kills_its_worker_is_parked_after_max_crashes(start_worker):
    result = django_tasks.kill_self.enqueue()
    deadline = time.monotonic() + 4 * (LEASE + RESCUE_INTERVAL + 3)
    worker = start_worker(settings={**SHORT, "MAX_CRASHES": 2})
    while Job.objects.get(pk=int(result.id)).status != "abandoned":
        assert time.monotonic() < deadline, "the task was never parked"
        if worker.proc.poll() is not None:  # a supervisor would restart it
            worker = start_worker(settings={**SHORT, "MAX_CRASHES": 2})
        time.sleep(0.1)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and len(result.errors) == 2
    assert "after 2 crashes (MAX_CRASHES)" in result.errors[-1].traceback
