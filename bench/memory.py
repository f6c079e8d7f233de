"""W13: the workers' memory: ``python bench/run.py --only W13``.

One worker process of each system, at its W3 default settings, not in burst mode, on empty
tables: jobqueue's ``runjobs --pool default`` at the example project's settings, and each
peer in --systems through its driver (``work --setting default``; the bench never imports a
peer). Its resident set (``VmRSS`` of ``/proc/<pid>/status``, and the peak, ``VmHWM``,
summed with those of any child process it has) is read three times: idle after start-up
(once it has registered, or connected to its own database, and a settle), after it has
drained ``--memory-jobs`` (100,000) no-op jobs, and after as many jobs whose handler builds
10 KB and returns it (stored as the job's result where the system keeps results, dropped
where it does not); each batch is enqueued in bulk while the worker runs and waited for
until every job has succeeded. The slow peers drain ``--memory-slow-jobs`` (2,000) of
each. Goal (issue 19, jobqueue's): idle at most 80 MB, at most 10% growth over the jobs.
PostgreSQL only.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import IO

from bench import procfs
from bench.report import Table, progress
from bench.systems.base import REPO, System
from bench.workload import BenchError

BATCH = 10_000  # jobs per bulk enqueue call
SETTLE = 2.0  # s idle after the worker has started, before the first reading
START = 120  # s for a worker to start
TIMEOUT = 1800  # s for a batch to drain
LOOK = 5.0  # s between two looks at a draining worker: is it alive, is it late
MB = 1024  # KiB
TASKS = ("noop", "ten_kb")  # drained in this order, after the idle reading
Attempt = Callable[[str, Callable[[], "list[Reading]"]], "list[Reading]"]


@dataclass(frozen=True)
class Reading:
    """One moment of one worker: its resident set and peak, in KiB, over its processes."""

    moment: str
    rss: int
    peak: int
    drained: int  # jobs succeeded since it started
    processes: int  # the worker and its descendants


def takes_part(system: System | type[System]) -> bool:
    """Every system but the raw baselines, which are drains, not a queue's worker."""
    return "W13" not in system.skips


def memory(systems: list[System], jobs: int, slow_jobs: int, attempt: Attempt) -> Table:
    """Each system's worker idle, after its no-op jobs and after its 10 KB jobs; a system's
    measurement is retried by ``attempt`` on its own."""
    measured = []
    for system in [s for s in systems if takes_part(s)]:
        n = slow_jobs if system.slow else jobs
        readings = attempt(f"W13 [{system.name}]", partial(measure, system, n))
        measured.append((system, readings))
    return _table(measured, jobs, slow_jobs)


def label(system: System, task: str, jobs: int) -> str:
    if task == "noop":
        return f"after {jobs:,} no-op jobs"
    kept = "returning" if system.keeps_results else "building"
    return f"after {jobs:,} jobs {kept} 10 KB"


def measure(system: System, jobs: int) -> list[Reading]:
    """Start the system's worker, read it idle, after ``jobs`` of each task, stop it."""
    system.reset()
    readings: list[Reading] = []
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            system.worker_command("default", burst=False),
            env=system.worker_env(),
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_started(system, proc, log)
            time.sleep(SETTLE)
            readings.append(_read(proc, log, "idle after start-up", 0))
            for task in TASKS:
                drained = readings[-1].drained + jobs
                _drain(system, proc, log, task, jobs, drained)
                readings.append(_read(proc, log, label(system, task, jobs), drained))
                progress(f"W13 [{system.name}] {readings[-1].moment}: {_mb(readings[-1].rss)} MB")
        finally:
            _stop(proc)
    system.reset()  # the 10 KB results make a big table
    return readings


def _wait_started(system: System, proc: subprocess.Popen[bytes], log: IO[str]) -> None:
    deadline = time.monotonic() + START
    while not system.serving(proc.pid):
        _alive(system, proc, log)
        if time.monotonic() > deadline:
            raise BenchError(f"{system.name}: the worker did not start within {START} s")
        time.sleep(0.2)


def _drain(
    system: System,
    proc: subprocess.Popen[bytes],
    log: IO[str],
    task: str,
    jobs: int,
    target: int,
) -> None:
    """Enqueue ``jobs`` of ``task`` in bulk while the worker runs; wait until ``target``
    jobs have succeeded in all, looking every few seconds that the worker is alive."""
    for first in range(0, jobs, BATCH):
        system.enqueue_bulk(min(BATCH, jobs - first), task)
    deadline = time.monotonic() + TIMEOUT
    while system.wait_succeeded(target, LOOK) < target:
        _alive(system, proc, log)
        if time.monotonic() > deadline:
            raise BenchError(f"{system.name}: {jobs:,} {task} jobs not drained in {TIMEOUT} s")


def _alive(system: System, proc: subprocess.Popen[bytes], log: IO[str]) -> None:
    if proc.poll() is not None:
        log.seek(0)
        raise BenchError(
            f"{system.name}: the worker exited with {proc.returncode}:\n{log.read()[-3000:]}"
        )


def _read(proc: subprocess.Popen[bytes], log: IO[str], moment: str, drained: int) -> Reading:
    """The worker's and its descendants' resident sets and peaks, summed."""
    family = [proc.pid, *procfs.descendants(proc.pid)]
    sizes = [size for pid in family if (size := procfs.rss_kib(pid)) is not None]
    if proc.poll() is not None or not sizes:
        log.seek(0)
        raise BenchError(f"the worker is gone:\n{log.read()[-3000:]}")
    rss, peak = (sum(column) for column in zip(*sizes, strict=True))
    return Reading(moment, rss, peak, drained, len(sizes))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)  # a graceful stop: nothing is running by now
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _mb(kib: int) -> str:
    return f"{kib / MB:.1f}"


def _table(measured: list[tuple[System, list[Reading]]], jobs: int, slow_jobs: int) -> Table:
    rows = []
    for system, readings in measured:
        idle = readings[0].rss
        rows += [
            [
                system.name,
                r.moment,
                _mb(r.rss),
                _mb(r.peak),
                f"{(r.rss - idle) / idle * 100:+.1f}%",
                f"{r.drained:,}",
            ]
            for r in readings
        ]
    return Table(
        key="W13",
        title="memory: one worker's resident set, idle and after the jobs",
        intro=(
            "One worker process per system, at its W3 default settings, not in burst mode: "
            "jobqueue's `runjobs --pool default` at the example project's settings, each "
            "peer's own worker through its driver. `VmRSS` and `VmHWM` of "
            "`/proc/<pid>/status` idle after start-up, then after "
            f"{jobs:,} no-op jobs and {jobs:,} jobs whose handler builds 10 KB, in that "
            "order; jobs drained counts both batches. Goal (jobqueue's): idle at most 80 MB, "
            "growth at most 10%."
        ),
        headings=[
            "system",
            "moment",
            "RSS, MB",
            "peak RSS, MB",
            "growth over idle",
            "jobs drained",
        ],
        rows=rows,
        left=2,
        after=_after(measured, jobs, slow_jobs),
    )


def _after(measured: list[tuple[System, list[Reading]]], jobs: int, slow_jobs: int) -> list[str]:
    systems = [system for system, _ in measured]
    lines = []
    slow = [s.name for s in systems if s.slow]
    if slow:
        lines.append(
            f"{' and '.join(slow)} drain --memory-slow-jobs ({slow_jobs:,}) jobs of each kind "
            f"instead of --memory-jobs ({jobs:,}): they drain at a few hundred jobs/s or less."
        )
    kept = [s.name for s in systems if s.keeps_results]
    dropped = [s.name for s in systems if not s.keeps_results]
    if kept:
        lines.append(f"{', '.join(kept)}: the 10 KB is returned and stored as the job's result.")
    if dropped:
        lines.append(
            f"{', '.join(dropped)}: no results are kept, so the handler builds 10 KB and drops it."
        )
    families = {s.name: max(r.processes for r in rs) for s, rs in measured}
    forked = [f"{name} ({n - 1} children)" for name, n in families.items() if n > 1]
    if forked:
        lines.append(
            f"Workers with child processes, whose resident sets and peaks are summed: "
            f"{', '.join(forked)}; every other worker is one process."
        )
    elif measured:
        lines.append("Every worker is one process, with no children.")
    return lines
