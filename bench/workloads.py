"""The workloads. Each measures one repetition on one system and returns one number.

Setting up a repetition (emptying the tables, preloading jobs) is never timed.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections

from bench.counting import StatementCounter
from bench.serverlog import ServerLog
from bench.systems.base import REPO, System


class BenchError(Exception):
    """A workload did not do what it measures (a worker failed, jobs were left)."""


@dataclass(frozen=True)
class Row:
    """One line of the report."""

    key: str  # W1..W7: a system's ``skips`` names these
    title: str
    unit: str  # "jobs/s", "s", "ms", "stmt/day" or "stmt/job"
    higher_is_better: bool


@dataclass(frozen=True)
class Workload:
    """One repetition on one system gives one value per row."""

    rows: tuple[Row, ...]
    measure: Callable[[System], list[float]]
    runs_on: Callable[[System], bool] = lambda system: True

    @property
    def key(self) -> str:
        return self.rows[0].key


def applies(system: System, key: str, setting: str = "default") -> bool:
    return key not in system.skips and setting in system.drain_settings


def throughput(jobs: int, slow_jobs: int) -> list[Workload]:
    """W1-W3, in the order they are run and reported."""
    items = [
        Workload(
            (Row("W1", f"enqueue {jobs:,} jobs, one call each (autocommit)", "jobs/s", True),),
            lambda system: [jobs / timed_enqueue(system, jobs, bulk=False)],
            lambda system: applies(system, "W1"),
        ),
        Workload(
            (Row("W2", f"enqueue {jobs:,} jobs, one bulk call", "jobs/s", True),),
            lambda system: [jobs / timed_enqueue(system, jobs, bulk=True)],
            lambda system: applies(system, "W2"),
        ),
        Workload(
            (Row("W3", "worker start-up and exit, empty queue (burst)", "s", False),),
            lambda system: [startup(system)],
            lambda system: applies(system, "W3"),
        ),
    ]
    return items + [draining(jobs, slow_jobs, setting) for setting in ("default", "tuned")]


def draining(jobs: int, slow_jobs: int, setting: str) -> Workload:
    title = f"drain {jobs:,} jobs ({slow_jobs:,} for the slow), one worker, {setting}"
    rows = (
        Row("W3", title, "jobs/s", True),
        Row("W3", "the same, net of the median start-up and exit above", "jobs/s", True),
    )
    return Workload(
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


@dataclass(frozen=True)
class Counting:
    title: str
    count: Callable[[System], Counter[str]]


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
                lambda system, c=concurrency: counted_drain(system, jobs, c),
            )
        )
    return items


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


def server_counted(jobs: int, log: ServerLog) -> list[Workload]:
    """Statements per job the server ran for the system's database, from its log."""

    def row(title: str) -> tuple[Row, ...]:
        return (Row("W7", f"statements per job, server count: {title}", "stmt/job", False),)

    return [
        Workload(
            row(f"enqueue {jobs:,}, one call each"),
            lambda system: [logged(system, log, lambda: system.enqueue_one_by_one(jobs)) / jobs],
            lambda system: applies(system, "W1"),
        ),
        Workload(
            row(f"enqueue {jobs:,}, one bulk call"),
            lambda system: [logged(system, log, lambda: system.enqueue_bulk(jobs)) / jobs],
            lambda system: applies(system, "W2"),
        ),
        Workload(
            row(f"drain {jobs:,}, one worker, default, start-up and exit included"),
            lambda system: [logged_drain(system, log, jobs) / jobs],
            lambda system: applies(system, "W3"),
        ),
    ]


def logged(system: System, log: ServerLog, block: Callable[[], object]) -> int:
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


def logged_drain(system: System, log: ServerLog, jobs: int) -> int:
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
