"""SIGTERM and SIGINT: a bounded, graceful stop; a second signal exits at once."""

import signal
import time

import pytest

from jobqueue.models import Job, Worker
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

SETTINGS = {"SHUTDOWN_TIMEOUT": 1, "POLL_INTERVAL": 0.1}


def started(label):
    return lambda: Execution.objects.filter(label=f"{label}:start").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_short_job_finishes_before_the_worker_exits(start_worker, signum):
    job = tasks.slow.enqueue(0.5)
    worker = start_worker(settings={**SETTINGS, "SHUTDOWN_TIMEOUT": 10})
    wait_for(started("slow"), timeout=30, message="the job to start")
    worker.signal(signum)
    assert worker.wait(15) == 0
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.result) == ("succeeded", "slow")
    assert not Worker.objects.exists()  # deregistered
    assert "stopped claiming; waiting up to 10 s for 1 in-flight job(s)" in worker.output()


@pytest.mark.parametrize(
    ("task", "label", "expected"),
    [(tasks.block_until, "block", "pending"), (tasks.park_block_until, "park", "abandoned")],
)
def test_a_long_job_is_handed_back_at_once_by_its_policy(
    start_worker, tmp_path, task, label, expected
):
    gate = tmp_path / "gate"
    job = task.enqueue(str(gate))
    worker = start_worker(settings=SETTINGS)
    wait_for(started(label), timeout=30, message="the job to start")
    sent = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert time.monotonic() - sent < SETTINGS["SHUTDOWN_TIMEOUT"] + 1
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.crashes, row.attempts) == (expected, 1, 0)
    assert "shut down before the job finished" in row.last_error
    assert "handed back" in worker.output()
    gate.touch()


@pytest.mark.parametrize(
    ("task", "label", "expected"),
    [(tasks.block_until, "block", "pending"), (tasks.park_block_until, "park", "abandoned")],
)
def test_a_second_signal_hands_back_the_jobs_and_exits_at_once(
    start_worker, tmp_path, task, label, expected
):
    job = task.enqueue(str(tmp_path / "never"))
    worker = start_worker(settings={**SETTINGS, "SHUTDOWN_TIMEOUT": 60})
    wait_for(started(label), timeout=30, message="the job to start")
    worker.signal(signal.SIGTERM)
    wait_for(lambda: "stopped claiming" in worker.output(), timeout=10, message="the first stop")
    worker.signal(signal.SIGTERM)  # the same stop delivered twice at once counts once
    time.sleep(1.1)
    assert worker.proc.poll() is None
    sent = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(5) == 130
    assert time.monotonic() - sent < 2
    # Handed back by its policy before the exit, not left running until its lease expires.
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.crashes, row.attempts) == (expected, 1, 0)
    assert "stopped by a second signal" in row.last_error
    assert not Worker.objects.exists()
    assert f"1 job(s) handed back at the second signal: {job.pk} -> {expected}" in worker.output()


def test_a_second_signal_to_the_supervisor_hands_back_its_workers_jobs(start_worker, tmp_path):
    job = tasks.block_until.enqueue(str(tmp_path / "never"))
    supervisor = start_worker(supervisor=True, settings={**SETTINGS, "SHUTDOWN_TIMEOUT": 60})
    wait_for(started("block"), timeout=30, message="the job to start")
    supervisor.signal(signal.SIGTERM)
    wait_for(
        lambda: "stopped claiming" in supervisor.output(), timeout=10, message="the first stop"
    )
    time.sleep(1.1)  # a second signal, not the first one delivered twice
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait(10) == 130
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.crashes) == ("pending", 1)
    assert "stopped by a second signal" in row.last_error
    assert not Worker.objects.exists()
