"""The supervisor: pools of real worker processes, started, reaped, recycled and stopped."""

import re
import signal
import time

import pytest

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

TIERS = {
    "POOLS": {
        "fast": {"queues": ["emails"], "concurrency": 1},
        "slow": {"queues": "*", "concurrency": 1},
    },
    "SHUTDOWN_TIMEOUT": 1,
    "POLL_INTERVAL": 0.2,
}


def workers_of(pool):
    return WorkerRow.objects.filter(pool=pool).count()


def test_a_long_job_in_slow_does_not_delay_an_email(start_worker, tmp_path):
    supervisor = start_worker(supervisor=True, settings=TIERS)
    wait_for(
        lambda: workers_of("fast") == 1 and workers_of("slow") == 1,
        timeout=30,
        message="one worker per pool",
    )
    slow = tasks.slow.enqueue(20)
    wait_for(
        lambda: Execution.objects.filter(label="slow:start").exists(),
        timeout=10,
        message="the slow job to start",
    )
    email = tasks.noop.using(queue="emails").enqueue("email")
    wait_for(
        lambda: Execution.objects.filter(label="email").exists(),
        timeout=5,
        interval=0.01,
        message="the email to be sent",
    )
    started = Execution.objects.get(label="email").created
    assert (started - email.enqueued_at).total_seconds() < 1.0

    sent = time.monotonic()
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0
    assert time.monotonic() - sent < TIERS["SHUTDOWN_TIMEOUT"] + 3
    assert not Job.objects.filter(status="running").exists()
    assert Job.objects.get(pk=slow.pk).status == "pending"  # handed back, not lost
    assert not WorkerRow.objects.exists()
    log = supervisor.output()
    assert "started worker" in log and "pool fast" in log and "pool slow" in log


def test_an_on_demand_pool_runs_only_while_jobs_are_due(start_worker):
    settings = {
        "POOLS": {
            "default": {"queues": "*", "resident": False, "idle_timeout": 1.5, "processes": 2}
        },
        "POLL_INTERVAL": 0.2,
    }
    tasks.noop.using(delay=7 * 86400).enqueue("next week")
    supervisor = start_worker(supervisor=True, settings=settings)
    wait_for(lambda: "pool default" in supervisor.output(), timeout=30, message="start-up")
    time.sleep(3)
    assert not WorkerRow.objects.exists()  # a job due next week starts nothing

    tasks.noop.enqueue("now")
    wait_for(
        lambda: Execution.objects.filter(label="now").exists(),
        timeout=10,
        message="an on-demand worker to run the job",
    )
    assert supervisor.output().count("started worker") == 1  # one due job, one worker
    wait_for(
        lambda: "(idle_timeout)" in supervisor.output() and not WorkerRow.objects.exists(),
        timeout=15,
        message="the idle worker to exit",
    )


def test_a_killed_worker_is_replaced_and_its_job_recovered_at_once(start_worker, tmp_path):
    gate = tmp_path / "gate"
    settings = {"LEASE": 120, "SAFETY_BUFFER": 5, "POLL_INTERVAL": 0.2}
    job = tasks.block_until.enqueue(str(gate))
    supervisor = start_worker(supervisor=True, settings=settings)
    wait_for(
        lambda: Execution.objects.filter(label="block:start").exists(),
        timeout=30,
        message="the job to start",
    )
    victim = Execution.objects.get(label="block:start").pid
    killed_at = time.monotonic()
    import os

    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: Job.objects.get(pk=job.pk).crashes == 1,
        timeout=10,
        message="the job to be recovered",
    )
    assert time.monotonic() - killed_at < 5  # well before the 120 s lease
    row = Job.objects.get(pk=job.pk)
    assert f"worker process {victim} died (killed by SIGKILL)" in row.errors[-1]["message"]
    wait_for(
        lambda: Execution.objects.filter(label="block:start").count() == 2,
        timeout=20,
        message="a replacement worker to take the job",
    )
    assert Execution.objects.filter(label="block:start").last().pid != victim
    gate.touch()
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "succeeded",
        timeout=10,
        message="the job to finish",
    )
    assert "restart" in supervisor.output()


def test_a_worker_over_max_memory_finishes_its_jobs_and_is_replaced(start_worker):
    settings = {
        # Below any Python process's size: every worker retires after its first job.
        "POOLS": {"default": {"queues": "*", "concurrency": 2, "max_memory": "1M"}},
        "POLL_INTERVAL": 0.2,
    }
    first = [tasks.slow.enqueue(1, label=f"pair{i}") for i in range(2)]
    supervisor = start_worker(supervisor=True, settings=settings)
    wait_for(
        lambda: all(Job.objects.get(pk=j.pk).status == "succeeded" for j in first),
        timeout=30,
        message="the first two jobs",
    )
    later = tasks.noop.enqueue("later")
    wait_for(
        lambda: Job.objects.get(pk=later.pk).status == "succeeded",
        timeout=30,
        message="a job after the recycle",
    )
    # Both in-flight jobs finished in the same process, which then left for a clean one.
    pair_pids = set(
        Execution.objects.filter(label__startswith="pair").values_list("pid", flat=True)
    )
    assert len(pair_pids) == 1
    assert Execution.objects.get(label="later").pid not in pair_pids
    assert set(Job.objects.values_list("crashes", flat=True)) == {0}
    assert "over max_memory" in supervisor.output()


def _gone(pid):
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers: it is gone if its state says so.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] == "Z"


def test_workers_do_not_outlive_a_killed_supervisor(start_worker):
    supervisor = start_worker(supervisor=True, settings={"POLL_INTERVAL": 0.2})
    wait_for(lambda: WorkerRow.objects.exists(), timeout=30, message="a worker")
    child = WorkerRow.objects.get().pid
    supervisor.kill()
    wait_for(lambda: _gone(child), timeout=10, message="the orphaned worker to stop")
    wait_for(lambda: not WorkerRow.objects.exists(), timeout=5, message="it to deregister")


def test_a_worker_orphaned_during_its_start_up_stops_too(start_worker):
    # Killed before its child has even set Django up: the child's parent is init already
    # when it looks, so it must know its supervisor's pid from the command line.
    supervisor = start_worker(supervisor=True, settings={"POLL_INTERVAL": 0.2})
    started = wait_for(
        lambda: re.search(r"started worker (\d+) for pool", supervisor.output()),
        timeout=30,
        interval=0.005,
        message="the supervisor to start its worker",
    )
    supervisor.kill()
    child = int(started.group(1))
    assert not WorkerRow.objects.exists()  # it had not registered yet
    wait_for(lambda: _gone(child), timeout=20, message="the orphaned worker to stop")
    assert not WorkerRow.objects.exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_whole_group_is_one_graceful_stop(start_worker, tmp_path, signum):
    gate = tmp_path / "gate"
    settings = {"SHUTDOWN_TIMEOUT": 1, "POLL_INTERVAL": 0.2}
    job = tasks.block_until.enqueue(str(gate))
    supervisor = start_worker(supervisor=True, settings=settings)
    wait_for(
        lambda: Execution.objects.filter(label="block:start").exists(),
        timeout=30,
        message="the job to start",
    )
    supervisor.signal_group(signum)  # Ctrl-C, or systemd signalling every process
    assert supervisor.wait(15) == 0
    row = Job.objects.get(pk=job.pk)
    # The worker had its SHUTDOWN_TIMEOUT and handed the job back: nothing left running.
    assert (row.status, row.crashes) == ("pending", 1)
    assert "shut down before the job finished" in row.last_error
    assert not WorkerRow.objects.exists()
    gate.touch()
