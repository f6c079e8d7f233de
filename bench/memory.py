"""W13: a worker's memory: ``python bench/run.py --only W13``.

One worker process, ``runjobs --pool default`` at the example project's settings, not in
burst mode, on empty tables. Its resident set (``VmRSS`` of ``/proc/<pid>/status``, and
the peak, ``VmHWM``) is read three times: idle after start-up (once its worker row is
written, and a settle), after it has drained ``--memory-jobs`` (100,000) no-op jobs, and
after as many jobs that each return 10 KB (``bench.ten_kb``), each batch enqueued in bulk
while it runs and waited for until every job has succeeded. Goal (issue 19): idle at most
80 MB, and at most 10% growth over the jobs. jobqueue alone. PostgreSQL only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench import procfs
from bench.report import Table, progress
from bench.systems.base import REPO
from bench.workloads import BenchError

BATCH = 10_000  # jobs per enqueue_many call
SETTLE = 2.0  # s idle after the worker row is written, before the first reading
TIMEOUT = 1800  # s for a batch to drain
MB = 1024  # KiB


def memory(jobs: int) -> Table:
    """The worker's RSS idle, after ``jobs`` no-op jobs and after ``jobs`` 10 KB results."""
    from django.db import connection

    from bench.benchapp.tasks import noop, ten_kb

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_job, jobqueue_worker")
    connection.close()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "testproject")]),
        "DJANGO_SETTINGS_MODULE": "bench.settings",
    }
    readings: list[tuple[str, tuple[int, int]]] = []
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runjobs", "--pool", "default"],
            env=env,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait(proc, log, "its worker row", lambda: _worker_row(proc.pid), 120)
            time.sleep(SETTLE)
            readings.append(("idle after start-up", _rss(proc, log)))
            for label, task in [("no-op jobs", noop), ("jobs returning 10 KB", ten_kb)]:
                _drain(proc, log, task, jobs)
                readings.append((f"after {jobs:,} {label}", _rss(proc, log)))
                progress(f"W13 {readings[-1][0]}: {readings[-1][1][0] / MB:.1f} MB")
        finally:
            proc.send_signal(signal.SIGTERM)  # a graceful stop: nothing is running by now
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_job, jobqueue_worker")  # 10 KB each: a big table
    connection.close()
    return _table(readings, jobs)


def _worker_row(pid: int) -> bool:
    from django.db import connection

    from jobqueue.models import Worker

    found = Worker.objects.filter(pid=pid).exists()
    connection.close()
    return found


def _succeeded() -> int:
    from django.db import connection

    from jobqueue.models import Job

    done = Job.objects.filter(status="succeeded").count()
    connection.close()
    return done


def _drain(proc: subprocess.Popen[bytes], log: Any, task: Any, jobs: int) -> None:
    before = _succeeded()
    for first in range(0, jobs, BATCH):
        task.enqueue_many([(n,) for n in range(first, min(first + BATCH, jobs))])
    _wait(proc, log, f"{jobs:,} {task.name} jobs", lambda: _succeeded() >= before + jobs, TIMEOUT)


def _wait(
    proc: subprocess.Popen[bytes], log: Any, what: str, done: Callable[[], bool], within: float
) -> None:
    deadline = time.monotonic() + within
    while not done():
        if proc.poll() is not None:
            log.seek(0)
            raise BenchError(f"the worker exited with {proc.returncode}:\n{log.read()[-3000:]}")
        if time.monotonic() > deadline:
            raise BenchError(f"the worker did not finish {what} within {within:g} s")
        time.sleep(0.2)


def _rss(proc: subprocess.Popen[bytes], log: Any) -> tuple[int, int]:
    rss = procfs.rss_kib(proc.pid)
    if rss is None or proc.poll() is not None:
        log.seek(0)
        raise BenchError(f"the worker is gone:\n{log.read()[-3000:]}")
    return rss


def _table(readings: list[tuple[str, tuple[int, int]]], jobs: int) -> Table:
    idle = readings[0][1][0]
    rows = [
        [
            label,
            f"{rss / MB:.1f}",
            f"{peak / MB:.1f}",
            f"{(rss - idle) / idle * 100:+.1f}%",
        ]
        for label, (rss, peak) in readings
    ]
    return Table(
        key="W13",
        title="memory: one worker's resident set, idle and after the jobs",
        intro=(
            f"One `runjobs --pool default` worker at the example project's settings; "
            f"`VmRSS` and `VmHWM` of `/proc/<pid>/status` idle after start-up, then after "
            f"{jobs:,} no-op jobs and {jobs:,} jobs returning 10 KB each, in that order. "
            "Goal: idle at most 80 MB, growth at most 10%."
        ),
        headings=["moment", "RSS, MB", "peak RSS, MB", "growth over idle"],
        rows=rows,
        after=["jobqueue alone: the bench does not yet read its peers' workers' memory."],
    )
