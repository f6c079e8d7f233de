"""Prometheus metrics of a supervisor and its workers, with real processes: ``/metrics``
sums every worker it ever ran, so a counter never goes backwards when one is replaced."""

from __future__ import annotations

import os
import re
import signal
import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.conftest import wait_for
from tests.testapp import tasks

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

TASK = "tests.testapp.tasks.slow"
POOL_OF_TWO = {
    "POOLS": {"default": {"queues": "*", "processes": 2, "concurrency": 1}},
    "SHUTDOWN_TIMEOUT": 1,
    "POLL_INTERVAL": 0.2,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> list[tuple[str, dict[str, str], float]] | None:
    """The samples of ``/metrics``, or None while nothing answers on ``port``."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def total(samples, name: str, **labels: str) -> float:
    return sum(
        value
        for sample, sample_labels, value in samples
        if sample == name and all(sample_labels.get(k) == v for k, v in labels.items())
    )


def test_finished_jobs_sum_to_all_of_them_after_a_worker_was_killed_and_replaced(start_worker):
    port = free_port()
    supervisor = start_worker("--metrics-port", str(port), supervisor=True, settings=POOL_OF_TWO)
    wait_for(lambda: WorkerRow.objects.count() == 2, timeout=30, message="two workers")
    for _ in range(20):
        tasks.slow.enqueue(0.3)

    def busy_worker_with_successes() -> str | None:
        running = Job.objects.filter(status="running").values_list("worker", flat=True)
        done = Job.objects.filter(status="succeeded", worker__in=list(running))
        return done.values_list("worker", flat=True).first()

    # Kill a worker that runs a job and has had successes: those stay counted though it is
    # gone, and the job it held is recovered and runs again.
    held = wait_for(busy_worker_with_successes, timeout=30, message="a worker with successes")
    victim = WorkerRow.objects.get(pk=held).pid
    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: (
            WorkerRow.objects.count() == 2 and not WorkerRow.objects.filter(pid=victim).exists()
        ),
        timeout=30,
        message="the supervisor to replace the killed worker",
    )
    wait_for(
        lambda: Job.objects.filter(status="succeeded").count() == 20,
        timeout=60,
        message="all 20 jobs to succeed",
    )
    # Counted once each job's success is written: the last may be counted just after.
    samples = wait_for(
        lambda: (
            (s := scrape(port))
            and total(s, "jobqueue_jobs_finished_total", task=TASK, outcome="succeeded") >= 20
            and s
        ),
        timeout=10,
        message="/metrics to count 20 successes",
    )
    assert total(samples, "jobqueue_jobs_finished_total", task=TASK, outcome="succeeded") == 20
    assert total(samples, "jobqueue_jobs_started_total", task=TASK) >= 21  # one started twice
    # The supervisor recovered the killed worker's job (counted in the supervisor's process).
    assert total(samples, "jobqueue_jobs_recovered_total", task=TASK, result="pending") >= 1
    assert total(samples, "jobqueue_job_duration_seconds_count", task=TASK) == 20
    assert total(samples, "jobqueue_job_wait_seconds_count", queue="default") >= 21

    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0
    # The files of this run are gone with it: the next start makes a fresh directory.
    [directory] = re.findall(r"their files: (\S+)\)", supervisor.output())
    assert not os.path.exists(directory)


def test_a_single_worker_serves_its_own_counters(start_worker):
    port = free_port()
    start_worker("--metrics-port", str(port))
    for i in range(3):
        tasks.add.enqueue(i, i)
    wait_for(
        lambda: Job.objects.filter(status="succeeded").count() == 3,
        timeout=30,
        message="three jobs to succeed",
    )
    samples = wait_for(
        lambda: (
            (s := scrape(port))
            and total(s, "jobqueue_jobs_finished_total", outcome="succeeded") >= 3
            and s
        ),
        timeout=10,
        message="/metrics to count 3 successes",
    )
    labels = {"queue": "default", "task": "tests.testapp.tasks.add"}
    assert total(samples, "jobqueue_jobs_finished_total", outcome="succeeded", **labels) == 3
    assert total(samples, "jobqueue_jobs_started_total", **labels) == 3
