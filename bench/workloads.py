"""The workloads. Each measures one repetition on one system and returns one number.

Setting up a repetition (emptying the tables, preloading jobs) is never timed.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from bench.counting import StatementCounter
from bench.systems.base import REPO, System


class BenchError(Exception):
    """A workload did not do what it measures (a worker failed, jobs were left)."""


@dataclass(frozen=True)
class Workload:
    key: str
    title: str
    unit: str  # "jobs/s" or "s"
    measure: Callable[[System], float]


def throughput(jobs: int, concurrencies: list[int]) -> list[Workload]:
    """W1-W3, in the order they are run and reported."""
    items = [
        Workload(
            "W1",
            f"enqueue {jobs:,} jobs, one `enqueue()` each (autocommit)",
            "jobs/s",
            lambda system: enqueue_one_by_one(system, jobs),
        ),
        Workload(
            "W2",
            f"enqueue {jobs:,} jobs, one bulk call",
            "jobs/s",
            lambda system: enqueue_bulk(system, jobs),
        ),
        Workload("W3", "worker start-up and exit, empty queue (`--burst`)", "s", startup),
    ]
    for concurrency in concurrencies:
        items.append(
            Workload(
                "W3",
                f"drain {jobs:,} jobs, one worker process, concurrency {concurrency}",
                "jobs/s",
                lambda system, c=concurrency: drain(system, jobs, c),
            )
        )
    return items


def enqueue_one_by_one(system: System, jobs: int) -> float:
    system.reset()
    start = time.perf_counter()
    system.enqueue_one_by_one(jobs)
    return jobs / (time.perf_counter() - start)


def enqueue_bulk(system: System, jobs: int) -> float:
    system.reset()
    start = time.perf_counter()
    system.enqueue_bulk(jobs)
    return jobs / (time.perf_counter() - start)


def startup(system: System) -> float:
    system.reset()
    return run_worker(system, concurrency=1)


def drain(system: System, jobs: int, concurrency: int) -> float:
    system.reset()
    system.preload(jobs)
    seconds = run_worker(system, concurrency)
    check_drained(system, jobs)
    return jobs / seconds


def run_worker(system: System, concurrency: int) -> float:
    """Seconds from starting one worker process until it exits, start-up included."""
    start = time.perf_counter()
    proc = subprocess.run(
        system.worker_command(concurrency),
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
