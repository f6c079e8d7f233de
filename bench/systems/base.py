"""What the workloads need from a job queue under test: one subclass per system."""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

REPO = Path(__file__).resolve().parents[2]


class System(ABC):
    """One job queue, set up in the bench database, driven the same way as every other.

    Throughput workloads (W1-W3) need every abstract method. Statement counting (W7) also
    needs :meth:`drain_in_process` and :meth:`classify`; it counts the statements that go
    through Django's connections, so a system with connections of its own needs another
    counter (pg_stat_statements, say) before it can take part.
    """

    name: ClassVar[str]
    counts_statements: ClassVar[bool] = False  # True once drain_in_process and classify work
    # W3's settings: "default" (always) and "tuned" (if the system has a knob worth turning),
    # each with what it means, for the report.
    drain_settings: ClassVar[dict[str, str]] = {"default": "defaults"}
    slow: ClassVar[bool] = False  # drains --slow-jobs instead of --jobs in W3
    skips: ClassVar[frozenset[str]] = frozenset()  # workload keys not run for this system
    on_sqlite: ClassVar[bool] = False  # also runs on the bench's SQLite file (jobqueue does)
    on_mysql: ClassVar[bool] = False  # also runs on MariaDB (jobqueue does)
    keeps_results: ClassVar[bool] = False  # stores what a handler returns (W13's 10 KB)

    @abstractmethod
    def setup(self) -> None:
        """Drop and recreate the system's tables in the bench database."""

    @abstractmethod
    def reset(self) -> None:
        """Delete every job and worker row: each repetition starts from empty tables."""

    @abstractmethod
    def enqueue_one_by_one(self, jobs: int) -> None:
        """Enqueue ``jobs`` no-op jobs, one call (and one autocommit) each."""

    @abstractmethod
    def enqueue_bulk(self, jobs: int, task: str = "noop") -> None:
        """Enqueue ``jobs`` jobs with the system's bulk API: no-op jobs, or (``"ten_kb"``,
        W13) jobs that build 10 KB and return it (or drop it, without :attr:`keeps_results`)."""

    def time_enqueue(self, jobs: int, bulk: bool) -> float:
        """Seconds to enqueue ``jobs`` no-op jobs, one by one or in one bulk call."""
        start = time.perf_counter()
        if bulk:
            self.enqueue_bulk(jobs)
        else:
            self.enqueue_one_by_one(jobs)
        return time.perf_counter() - start

    @abstractmethod
    def stamp(self, start: int, jobs: int, interval: float) -> list[float]:
        """Enqueue W4's stamp jobs ``start..`` one every ``interval`` s, each committed on
        its own; return the wall-clock time each commit returned. The stamp task appends
        ``n time`` to the file named by ``BENCH_STAMP_FILE`` when its handler starts."""

    @abstractmethod
    def database(self) -> str:
        """The name of the database the system uses, and no other system does."""

    def preload(self, jobs: int) -> None:
        """Put ``jobs`` due no-op jobs in the queue, untimed, ready for a drain."""
        self.enqueue_bulk(jobs)

    @abstractmethod
    def worker_command(self, setting: str, burst: bool = True) -> list[str]:
        """A command line for ONE worker process with one of ``drain_settings``: it drains
        the queue and then exits (``burst``), or it serves until SIGTERM."""

    def worker_env(self) -> dict[str, str]:
        """The worker's environment: this one, with the repo and the test project importable."""
        path = os.pathsep.join([str(REPO), str(REPO / "testproject")])
        return {**os.environ, "PYTHONPATH": path}

    @abstractmethod
    def succeeded(self) -> int:
        """How many jobs have succeeded."""

    def wait_succeeded(self, jobs: int, within: float) -> int:
        """How many jobs have succeeded, once ``jobs`` have or ``within`` s have passed."""
        deadline = time.monotonic() + within
        while (done := self.succeeded()) < jobs and time.monotonic() < deadline:
            time.sleep(0.2)
        return done

    @abstractmethod
    def serving(self, pid: int) -> bool:
        """True once the worker process ``pid`` has started up: it has registered or
        connected to the system's database."""

    def drain_in_process(self, concurrency: int) -> None:
        """Drain the queue with a worker in this process, so its statements can be counted."""
        raise NotImplementedError(f"{self.name} cannot drain in process")

    def classify(self, sql: str) -> str:
        """``"<kind>/<statement>"`` for one executed statement; kind is one of ``KINDS``."""
        raise NotImplementedError(f"{self.name} cannot classify statements")

    def versions(self) -> dict[str, str]:
        """Name -> version of what this system runs on, for the report."""
        return {}

    def notes(self) -> list[str]:
        """What a reader of this system's numbers should know, for the report."""
        return []


# The hot-path statement kinds W7 reports, in column order.
KINDS = ("enqueue", "notify", "claim", "succeed", "heartbeat", "other")
