"""W1-W3, enqueue and drain, and W7, statements per job: each measure is one repetition
on one system (see :mod:`bench.workload`).
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from functools import partial

from django.db import connections

from bench.counting import StatementCounter
from bench.report import Counted, Counting, Row, progress
from bench.serverlog import MariaDBLog, ServerLog
from bench.systems.base import REPO, System
from bench.workload import BenchError, Context, Measure, applies

StatementLog = ServerLog | MariaDBLog


def enqueuing(jobs: int, bulk: bool) -> Measure:
    """W1 (one call each) or W2 (one bulk call)."""
    if bulk:
        row = Row("W2", f"enqueue {jobs:,} jobs, one bulk call", "jobs/s", True)
    else:
        row = Row("W1", f"enqueue {jobs:,} jobs, one call each (autocommit)", "jobs/s", True)
    return Measure(
        (row,),
        lambda system: [jobs / timed_enqueue(system, jobs, bulk=bulk)],
        lambda system: applies(system, row.key),
    )


def start_and_drain(jobs: int, slow_jobs: int) -> list[Measure]:
    """W3: the start-up first, which the net drain rates subtract, then the drains."""
    starting = Measure(
        (Row("W3", "worker start-up and exit, empty queue (burst)", "s", False),),
        lambda system: [startup(system)],
        lambda system: applies(system, "W3"),
    )
    return [starting, *(draining(jobs, slow_jobs, setting) for setting in ("default", "tuned"))]


def drain_settings(systems: list[System]) -> list[str]:
    """W3's notes: what each system's default and tuned settings are."""
    return [
        f"{s.name}, W3 {setting}: {meaning}{' (a slow system)' if s.slow else ''}"
        for s in systems
        for setting, meaning in s.drain_settings.items()
    ]


def draining(jobs: int, slow_jobs: int, setting: str) -> Measure:
    title = f"drain {jobs:,} jobs ({slow_jobs:,} for the slow), one worker, {setting}"
    rows = (
        Row("W3", title, "jobs/s", True),
        Row("W3", "the same, net of the median start-up and exit above", "jobs/s", True),
    )
    return Measure(
        rows,
        lambda system: drain(system, slow_jobs if system.slow else jobs, setting),
        lambda system: applies(system, "W3", setting),
    )


STARTUP: dict[str, list[float]] = {}  # system -> its start-up runs so far, for the net rate


def timed_enqueue(system: System, jobs: int, bulk: bool) -> float:
    system.reset()
    return system.time_enqueue(jobs, bulk)


def startup(system: System) -> float:
    system.reset()
    seconds = run_worker(system, "default")
    STARTUP.setdefault(system.name, []).append(seconds)
    return seconds


def drain(system: System, jobs: int, setting: str) -> list[float]:
    """Jobs per second from spawn to exit, and net of the median start-up and exit."""
    system.reset()
    system.preload(jobs)
    seconds = run_worker(system, setting)
    check_drained(system, jobs)
    fixed = statistics.median(STARTUP.get(system.name, [0.0]))
    return [jobs / seconds, jobs / max(seconds - fixed, 1e-3)]


def run_worker(system: System, setting: str) -> float:
    """Seconds from starting one worker process until it exits, start-up included."""
    start = time.perf_counter()
    proc = subprocess.run(
        system.worker_command(setting),
        env=system.worker_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise BenchError(
            f"{system.name} worker exited with {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return seconds


def check_drained(system: System, jobs: int) -> None:
    done = system.succeeded()
    if done != jobs:
        raise BenchError(f"{system.name}: {done} of {jobs} jobs succeeded after the drain")


# -- W7: statements per job, counted -----------------------------------------------------


def statements(jobs: int, concurrencies: list[int]) -> list[Counting]:
    items = [
        Counting(
            f"`enqueue()` x {jobs:,}",
            lambda system: counted_enqueue(system, lambda: system.enqueue_one_by_one(jobs)),
        ),
        Counting(
            f"bulk enqueue of {jobs:,}",
            lambda system: counted_enqueue(system, lambda: system.enqueue_bulk(jobs)),
        ),
    ]
    for concurrency in concurrencies:
        items.append(
            Counting(
                f"drain {jobs:,}, in-process worker, concurrency {concurrency}",
                partial(counted_drain, jobs=jobs, concurrency=concurrency),
            )
        )
    return items


def count_runs(context: Context, counting: Counting, jobs: int) -> Counted:
    """``counting`` ``--repeat`` times on each system that counts statements, interleaved."""
    result = Counted(counting, jobs)
    for run in range(1, context.args.repeat + 1):
        for system in [s for s in context.systems if s.counts_statements]:
            counts = counting.count(system)
            result.samples.setdefault(system.name, []).append(counts)
            progress(
                f"W7 {counting.title} [{system.name}] run {run}: "
                f"{counts.total() / jobs:.3f} statements/job"
            )
    return result


def counted_enqueue(system: System, enqueue: Callable[[], None]) -> Counter[str]:
    system.reset()
    return counted(system, enqueue)


def counted_drain(system: System, jobs: int, concurrency: int) -> Counter[str]:
    system.reset()
    system.preload(jobs)
    counts = counted(system, lambda: system.drain_in_process(concurrency))
    check_drained(system, jobs)
    return counts


def counted(system: System, block: Callable[[], None]) -> Counter[str]:
    with StatementCounter(system.classify) as counter:
        block()
    return counter.counts


# -- W7, counted on the server: the same figure for every system, peers included --------


def server_counted(jobs: int, log: StatementLog) -> list[Measure]:
    """Statements per job the server ran for the system's database, from its log."""

    def row(title: str) -> tuple[Row, ...]:
        return (Row("W7", f"statements per job, server count: {title}", "stmt/job", False),)

    return [
        Measure(
            row(f"enqueue {jobs:,}, one call each"),
            lambda system: [logged(system, log, lambda: system.enqueue_one_by_one(jobs)) / jobs],
            lambda system: applies(system, "W1"),
        ),
        Measure(
            row(f"enqueue {jobs:,}, one bulk call"),
            lambda system: [logged(system, log, lambda: system.enqueue_bulk(jobs)) / jobs],
            lambda system: applies(system, "W2"),
        ),
        Measure(
            row(f"drain {jobs:,}, one worker, default, start-up and exit included"),
            lambda system: [logged_drain(system, log, jobs) / jobs],
            lambda system: applies(system, "W3"),
        ),
    ]


def logged(system: System, log: StatementLog, block: Callable[[], object]) -> int:
    system.reset()
    database = system.database()
    log.enable(database)
    try:
        connections.close_all()  # the bench's own next connection logs its statements too
        offset = log.offset()
        block()
        return log.count(offset)[database]
    finally:
        log.disable(database)
        connections.close_all()


def logged_drain(system: System, log: StatementLog, jobs: int) -> int:
    system.reset()
    system.preload(jobs)
    database = system.database()
    log.enable(database)
    try:
        offset = log.offset()
        run_worker(system, "default")
        count = log.count(offset)[database]
    finally:
        log.disable(database)
    check_drained(system, jobs)
    return count
