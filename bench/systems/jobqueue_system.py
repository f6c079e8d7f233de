"""jobqueue, driven through its public API and its ``runjobs`` command."""

from __future__ import annotations

import sys
from typing import ClassVar

from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection

import jobqueue
from bench.peers._common import paced
from bench.systems.base import System
from jobqueue import conf, states
from jobqueue.models import Job, Worker
from jobqueue.runtime.worker import Worker as JobWorker
from jobqueue.sql import load

# jobqueue's named statements, by hot-path kind; every other statement is "other".
KIND_OF = {
    "enqueue": "enqueue",
    "enqueue_one": "enqueue",
    "enqueue_keyless": "enqueue",
    "notify": "notify",
    "claim": "claim",
    "succeed": "succeed",
    "succeed_many": "succeed",
    "register_worker": "heartbeat",
    "renew_leases": "heartbeat",
}


class JobqueueSystem(System):
    name: ClassVar[str] = "jobqueue"
    counts_statements: ClassVar[bool] = True
    on_sqlite: ClassVar[bool] = True
    on_mysql: ClassVar[bool] = True
    keeps_results: ClassVar[bool] = True
    drain_settings: ClassVar[dict[str, str]] = {
        "default": "`runjobs`: the default pool (concurrency 4, prefetch 64)",
        "tuned": "`runjobs --concurrency 16` (prefetch 256)",
    }
    TUNED: ClassVar[list[str]] = ["--concurrency", "16"]

    def __init__(self) -> None:
        self._names = {sql: name for name, sql in load(connection.vendor).items()}

    def setup(self) -> None:
        call_command("migrate", "jobqueue", "zero", verbosity=0)
        call_command("migrate", verbosity=0)

    def reset(self) -> None:
        tables = [Job._meta.db_table, Worker._meta.db_table]
        flush = connection.ops.sql_flush(no_style(), tables, reset_sequences=True)
        with connection.cursor() as cursor:
            for sql in flush:
                cursor.execute(sql)

    def enqueue_one_by_one(self, jobs: int) -> None:
        from bench.benchapp.tasks import noop

        for n in range(jobs):
            noop.enqueue(n)

    def enqueue_bulk(self, jobs: int, task: str = "noop") -> None:
        from bench.benchapp import tasks

        getattr(tasks, task).enqueue_many([(n,) for n in range(jobs)])

    def stamp(self, start: int, jobs: int, interval: float) -> list[float]:
        from bench.benchapp.tasks import stamp

        return paced(start, jobs, interval, stamp.enqueue)

    def database(self) -> str:
        return str(connection.settings_dict["NAME"])

    def preload(self, jobs: int) -> None:
        super().preload(jobs)
        # Fresh statistics, as a table in service would have, so the claim's plan is stable.
        analyze = "ANALYZE TABLE {}" if connection.vendor == "mysql" else "ANALYZE {}"
        with connection.cursor() as cursor:
            cursor.execute(analyze.format(Job._meta.db_table))

    def worker_command(self, setting: str, burst: bool = True) -> list[str]:
        command = [sys.executable, "-m", "django", "runjobs", "--pool", "default"]
        if burst:
            command.append("--burst")
        return command + (self.TUNED if setting == "tuned" else [])

    def succeeded(self) -> int:
        return Job.objects.filter(status=states.SUCCEEDED).count()

    def serving(self, pid: int) -> bool:
        """Its worker row is written."""
        return Worker.objects.filter(pid=pid).exists()

    def drain_in_process(self, concurrency: int) -> None:
        exit_code = JobWorker(burst=True, concurrency=concurrency).run()
        if exit_code:
            raise RuntimeError(f"the in-process worker exited with {exit_code}")

    def classify(self, sql: str) -> str:
        name = self._names.get(sql)
        if name is None:
            return "other/" + " ".join(sql.split()[:3])
        return f"{KIND_OF.get(name, 'other')}/{name}"

    def versions(self) -> dict[str, str]:
        return {"jobqueue": jobqueue.__version__}

    def notes(self) -> list[str]:
        interval = conf.get().heartbeat_interval
        return [
            f"The heartbeat beats every LEASE / 3 = {interval:g} s, longer than a W7 drain: "
            "its column holds only the worker's registration at start. In service it costs "
            f"2 statements (register_worker, renew_leases) per worker every {interval:g} s, "
            "whatever the number of jobs.",
            "On PostgreSQL the successes are recorded by the writer thread's `claim` "
            "statement, which also claims the next jobs: the claim column counts those "
            "statements, and succeed stays at 0.",
            "Not counted: connection set-up, such as the `SELECT set_config('TimeZone', ...)` "
            "Django runs on each new PostgreSQL connection whose server time zone is not "
            "named UTC (one connection per slot thread, the heartbeat and the main thread).",
        ]
