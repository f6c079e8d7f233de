"""The supervisor's restart policy: a worker that was ready is replaced at once, however
often it dies; one that dies during start-up, or in a crash loop, is restarted with backoff."""

import datetime as dt
import itertools
import os
import re
import signal
import time

import pytest

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.conftest import wait_for
from tests.testapp import tasks

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

KILLS = 20
BUSY = {
    "POOLS": {"default": {"queues": "*", "concurrency": 2}},
    "POLL_INTERVAL": 0.2,
    # Each kill counts a crash for the jobs in flight: never enough to park one here.
    "MAX_CRASHES": 1000,
}
STARTED = re.compile(
    r"^(\S+ \S+) \d+ INFO jobqueue\.supervisor: supervisor: started worker (\d+) for pool",
    re.M,
)


def _when(stamp):
    # The log's asctime: local time, to the millisecond, as time.time() is.
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def started_workers(supervisor):
    """(wall-clock time, pid) of every worker the supervisor started, in order."""
    return [(_when(m.group(1)), int(m.group(2))) for m in STARTED.finditer(supervisor.output())]


def succeeded():
    return Job.objects.filter(status="succeeded").count()


def test_a_busy_worker_killed_twenty_times_is_replaced_within_a_second_each_time(
    start_worker,
):
    supervisor = start_worker(supervisor=True, settings=BUSY)
    tasks.nap.enqueue_many([(0.02,)] * 50)
    victim = wait_for(
        lambda: WorkerRow.objects.values_list("pid", flat=True).first(),
        timeout=30,
        message="the pool's worker",
    )
    last_kill = 0.0
    for kill in range(KILLS):
        # The queue drains between kills, on the worker that replaced the last one.
        before = succeeded()
        wait_for(
            lambda: succeeded() > before,  # noqa: B023 timeout=10, message=f"jobs to run before kill {kill}"
        )
        if Job.objects.filter(status="pending").count() < 30:
            tasks.nap.enqueue_many([(0.02,)] * 50)
        time.sleep(max(0.0, last_kill + 0.5 - time.monotonic()))  # one every 0.5 s at most
        starts = len(started_workers(supervisor))
        os.kill(victim, signal.SIGKILL)
        killed, last_kill = time.time(), time.monotonic()
        wait_for(
            lambda: len(started_workers(supervisor)) > starts,  # noqa: B023
            timeout=10,
            message=f"a replacement after kill {kill}",
        )
        replaced_at, victim = started_workers(supervisor)[starts]
        assert replaced_at - killed < 1.0, f"kill {kill}: replaced after {replaced_at - killed} s"
        wait_for(
            lambda: WorkerRow.objects.filter(pid=victim).exists(),  # noqa: B023
            timeout=10,
            message=f"replacement {victim} to register",
        )
    log = supervisor.output()
    assert log.count("died after it was ready (killed by SIGKILL") == KILLS
    assert log.count("restarting it now") == KILLS
    assert "during start-up" not in log and "crash loop" not in log
    # Nothing was lost: every job ends up succeeded.
    wait_for(
        lambda: not Job.objects.exclude(status="succeeded").exists(),
        timeout=30,
        message="every job to succeed",
    )


def test_a_worker_that_fails_at_import_is_restarted_with_growing_delays(start_worker):
    settings = {
        "POOLS": {"default": {"queues": "*", "concurrency": 1}},
        "TASK_MODULES": ["tests.testapp.broken_in_workers"],
    }
    supervisor = start_worker(supervisor=True, settings=settings)
    wait_for(
        lambda: len(started_workers(supervisor)) >= 4,
        timeout=30,
        message="four starts of the failing worker",
    )
    log = supervisor.output()
    starts = [when for when, _ in started_workers(supervisor)][:4]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    for delay, gap in zip([1, 2, 4], gaps, strict=True):
        assert gap >= delay, gaps  # each restart waited its delay, and the delay doubled
    assert gaps[0] < gaps[1] < gaps[2], gaps
    died = re.findall(
        r"died during start-up \(exit status 1, [\d.]+ s after it started\); "
        r"restarting it in (\d+) s",
        log,
    )
    assert died[:3] == ["1", "2", "4"], log
    assert "broken on purpose in worker processes" in log  # the worker's own error, too
    assert not WorkerRow.objects.exists()


def test_ready_workers_that_die_at_once_again_and_again_back_off(start_worker):
    # Each worker registers, claims a job that kills it, and never finishes one.
    settings = {
        "POOLS": {"default": {"queues": "*", "concurrency": 1, "processes": 4}},
        "POLL_INTERVAL": 0.2,
        "MAX_CRASHES": 1000,
    }
    tasks.kill_self.enqueue_many([()] * 100)
    supervisor = start_worker(supervisor=True, settings=settings)
    wait_for(
        lambda: "a crash loop" in supervisor.output(),
        timeout=60,
        message="the supervisor to see a crash loop",
    )
    log = supervisor.output()
    assert re.search(
        r"died after it was ready \(killed by SIGKILL, [\d.]+ s after it started\): 11 ready "
        r"workers of this pool died within 10 s without finishing a job, a crash loop; "
        r"restarting it in 1 s",
        log,
    ), log
    assert log.count("restarting it now") >= 10
