"""W8's systems: what the churn needs of jobqueue (on the bench database) and of pgqueuer
(on its own): their statements on the jobs tables, their serving worker and their paced
enqueuer. jobqueue's enqueuer is this module: ``python -m bench.churners churn-enqueue``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.systems.base import REPO, System
from bench.workload import BenchError

TICK = 0.05  # s between the enqueuer's batches
NO_CLAIM = -1.0  # a line of waits only, not a timed claim


class Churner(ABC):
    """One system's part of W8: its statements, its worker and its enqueuer."""

    table: str  # the jobs table
    history: tuple[str, ...] = ()  # more tables whose sizes are sampled
    vacuumed: tuple[str, ...] = ()

    def __init__(self, system: System, folder: Path) -> None:
        self.system = system
        self.folder = folder

    @abstractmethod
    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` on the system's database, in autocommit; its rows."""

    def relations(self) -> list[str]:
        """The jobs table, then its indexes by name, then the history tables."""
        indexes = self.rows(
            "SELECT indexrelid::regclass::text FROM pg_index "
            "WHERE indrelid = %s::regclass ORDER BY 1",
            [self.table],
        )
        return [self.table, *(name for (name,) in indexes), *self.history]

    def sizes(self, relations: list[str]) -> dict[str, int]:
        found = self.rows(
            "SELECT relname, pg_relation_size(oid) FROM pg_class WHERE relname = ANY(%s)",
            [relations],
        )
        return {name: int(size) for name, size in found}

    def table_stats(self) -> tuple[int, int]:
        """The jobs table's dead rows and autovacuum count, from the statistics collector."""
        found = self.rows(
            "SELECT n_dead_tup, autovacuum_count FROM pg_stat_user_tables WHERE relname = %s",
            [self.table],
        )
        return (int(found[0][0]), int(found[0][1])) if found else (0, 0)

    def vacuum(self) -> None:
        for table in self.vacuumed:
            self.rows(f"VACUUM {table}")

    def reloptions(self) -> str:
        found = self.rows("SELECT reloptions FROM pg_class WHERE relname = %s", [self.table])
        options = found[0][0] if found else None
        return ", ".join(options) if options else "none"

    def scan(self) -> tuple[int, float] | None:
        """What a look for work costs the server: buffers and ms of the claim's scan of its
        index, where the bench can run it without taking jobs (jobqueue's)."""
        return None

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        """``sql``'s one figure, a ``count(*)``."""
        [(count,)] = self.rows(sql, params)
        return int(count)

    def reset(self) -> None:
        self.system.reset()

    @abstractmethod
    def probe(self, jobs: int) -> float:
        """Drain ``jobs`` preloaded jobs with one burst worker at default settings; jobs/s."""

    @abstractmethod
    def worker(self, claim_log: Path, retention: float) -> subprocess.Popen[bytes]: ...

    def enqueuer(self, rate: float, seconds: float, start_at: float) -> subprocess.Popen[str]:
        """The paced enqueuer, started; it prints one JSON line (``paced_batches``)."""
        options = [
            "churn-enqueue",
            f"--rate={rate:.3f}",
            f"--seconds={seconds:.3f}",
            f"--start-at={start_at:.3f}",
            f"--tick={TICK}",
        ]
        return subprocess.Popen(
            self.enqueuer_command(options),
            env=self.system.worker_env(),
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )

    @abstractmethod
    def enqueuer_command(self, options: list[str]) -> list[str]:
        """The command line of the paced enqueuer, with ``options``."""

    def enqueue_one(self) -> None:
        self.system.enqueue_one_by_one(1)

    @abstractmethod
    def unfinished(self) -> int: ...

    @abstractmethod
    def pending(self) -> int: ...

    @abstractmethod
    def finished(self, start: float, end: float) -> tuple[int, tuple[float, float] | None]:
        """Jobs finished from ``start`` to ``end`` (wall clock), and the p50 and p99 of their
        wait from enqueue to claim if the rows give it."""

    @abstractmethod
    def prune(self, retention: float) -> int:
        """Delete finished rows older than ``retention`` s; the successes deleted."""

    @abstractmethod
    def succeeded_left(self) -> int: ...

    @abstractmethod
    def failed(self) -> int: ...

    def claims(self, claim_log: Path) -> list[tuple[float, float, list[float]]]:
        """Each timed claim: wall clock at its end, seconds, the waits of the jobs it got.
        The claim log is W9's and W10's (:func:`bench.drains.claims` reads it)."""
        from bench import drains

        return [(c.at + c.seconds, c.seconds, []) for c in drains.claims(claim_log)]

    @abstractmethod
    def settings(self) -> str:
        """The worker's settings, for the report."""

    def _burst(self, command: list[str], env: dict[str, str]) -> None:
        log = self.folder / "probe.log"
        with log.open("w") as out:
            code = subprocess.run(
                command, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, check=False
            ).returncode
        if code:
            raise BenchError(f"the probe's worker exited with {code}:\n{log.read_text()[-3000:]}")


class JobqueueChurner(Churner):
    table = "jobqueue_job"
    vacuumed = ("jobqueue_job",)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall()) if cursor.description else []

    def scan(self) -> tuple[int, float] | None:
        # The `due` part of jobqueue's claim statement (jobqueue/sql/postgresql.sql) for the
        # default pool's 4 slots and 64 ahead, without FOR UPDATE: it reads what a claim
        # reads, in the order of the partial index jobqueue_job_claim, and locks nothing.
        [(plan,)] = self.rows(
            """
            EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
            SELECT id FROM jobqueue_job
            WHERE status = 'pending' AND run_at <= now()
            ORDER BY priority DESC, run_at, id LIMIT 68
            """
        )
        found = plan if isinstance(plan, list) else json.loads(plan)
        top = found[0]["Plan"]
        buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
        return buffers, float(found[0]["Execution Time"])

    def probe(self, jobs: int) -> float:
        from bench.drains import jobqueue_rate

        self.reset()
        self.system.preload(jobs)
        self._burst(self.system.worker_command("default"), self.system.worker_env())
        measured = jobqueue_rate()
        done, rate = int(measured["succeeded"]), measured["jobs/s"]
        if done != jobs:
            raise BenchError(f"the probe's drain finished {done:,} of {jobs:,} jobs")
        self.reset()
        return rate

    def worker(self, claim_log: Path, retention: float) -> subprocess.Popen[bytes]:
        return _serve(
            self.system,
            self.folder,
            {
                "DJANGO_SETTINGS_MODULE": "bench.churn_settings",
                "BENCH_CLAIM_LOG": str(claim_log),
                "BENCH_CHURN_RETENTION": str(retention),
            },
        )

    def enqueuer_command(self, options: list[str]) -> list[str]:
        return [sys.executable, "-m", "bench.churners", *options]

    def unfinished(self) -> int:
        from jobqueue import states

        return self.count(
            "SELECT count(*) FROM jobqueue_job WHERE status = ANY(%s)", [list(states.UNFINISHED)]
        )

    def pending(self) -> int:
        return self.count("SELECT count(*) FROM jobqueue_job WHERE status = 'pending'")

    def finished(self, start: float, end: float) -> tuple[int, tuple[float, float] | None]:
        [(count, p50, p99)] = self.rows(
            """
            SELECT count(*),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY wait),
                   percentile_cont(0.99) WITHIN GROUP (ORDER BY wait)
            FROM (SELECT extract(epoch FROM started_at - enqueued_at) AS wait
                  FROM jobqueue_job WHERE status = 'succeeded'
                    AND finished_at >= to_timestamp(%s) AND finished_at < to_timestamp(%s)
            ) AS done
            """,
            [start, end],
        )
        return int(count), None if p50 is None else (float(p50), float(p99))

    def prune(self, retention: float) -> int:
        from jobqueue import conf, states
        from jobqueue.store import Store

        kept = dict.fromkeys(states.PRUNABLE, retention)
        deleted = Store(settings=dataclasses.replace(conf.get(), retention=kept)).prune()
        return deleted.get(states.SUCCEEDED, 0)

    def succeeded_left(self) -> int:
        return self.count("SELECT count(*) FROM jobqueue_job WHERE status = 'succeeded'")

    def failed(self) -> int:
        return self.count(
            "SELECT count(*) FROM jobqueue_job WHERE status IN ('failed', 'abandoned', 'discarded')"
        )

    def settings(self) -> str:
        return (
            "one `runjobs --pool default` supervisor (concurrency 4, prefetch 64), not burst; "
            "`enqueue_many` batches"
        )


class PgqueuerChurner(Churner):
    table = "pgqueuer"
    history = ("pgqueuer_log",)
    vacuumed = ("pgqueuer", "pgqueuer_log")

    def __init__(self, system: System, folder: Path) -> None:
        import psycopg

        from bench.systems.peers import peer_dsn

        super().__init__(system, folder)
        self.waits = folder / "waits"
        self.connection = psycopg.connect(peer_dsn(system.database()), autocommit=True)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self.connection.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []

    def probe(self, jobs: int) -> float:
        self.reset()
        self.system.preload(jobs)
        self._burst(self.system.worker_command("default"), self.system.worker_env())
        [(done, span)] = self.rows(
            "SELECT count(*), extract(epoch FROM max(created) - min(created)) "
            "FROM pgqueuer_log WHERE status = 'successful'"
        )
        if done != jobs:
            raise BenchError(f"the probe's drain finished {done:,} of {jobs:,} jobs")
        self.reset()
        return float(done) / max(float(span or 0), 1e-3)

    def worker(self, claim_log: Path, retention: float) -> subprocess.Popen[bytes]:
        return _serve(
            self.system,
            self.folder,
            {"BENCH_CLAIM_LOG": str(claim_log), "BENCH_WAIT_LOG": str(self.waits)},
        )

    def enqueuer_command(self, options: list[str]) -> list[str]:
        from bench.systems.peers import Peer

        assert isinstance(self.system, Peer)
        return self.system.command(*options)

    def unfinished(self) -> int:
        return self.count("SELECT count(*) FROM pgqueuer")

    def pending(self) -> int:
        return self.count("SELECT count(*) FROM pgqueuer WHERE status = 'queued'")

    def finished(self, start: float, end: float) -> tuple[int, tuple[float, float] | None]:
        [(count,)] = self.rows(
            "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful' "
            "AND created >= to_timestamp(%s) AND created < to_timestamp(%s)",
            [start, end],
        )
        return int(count), None

    def prune(self, retention: float) -> int:
        return self.count(
            """
            WITH gone AS (
                DELETE FROM pgqueuer_log
                WHERE created < now() - make_interval(secs => %s) RETURNING status
            )
            SELECT count(*) FROM gone WHERE status = 'successful'
            """,
            [retention],
        )

    def succeeded_left(self) -> int:
        return self.count("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'")

    def failed(self) -> int:
        return self.count(
            "SELECT count(*) FROM pgqueuer_log WHERE status NOT IN "
            "('queued', 'picked', 'successful')"
        )

    def claims(self, claim_log: Path) -> list[tuple[float, float, list[float]]]:
        # The claim log, as jobqueue's; and the wait log: ``<wall clock> <each job's
        # wait>...`` per dequeue with jobs.
        found = super().claims(claim_log)
        if self.waits.exists():
            for line in self.waits.read_text().splitlines():
                at, *waits = line.split()
                found.append((float(at), NO_CLAIM, [float(w) for w in waits]))
        return found

    def settings(self) -> str:
        return (
            "one `QueueManager.run(mode=continuous)` worker, batch_size 10 (W3's default); "
            "list `enqueue` batches"
        )


CHURNERS: dict[str, Callable[[System, Path], Churner]] = {
    "jobqueue": JobqueueChurner,
    "pgqueuer": PgqueuerChurner,
}


def _serve(system: System, folder: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """ONE worker of ``system`` at default settings, serving, with ``env`` added to its
    environment and its output in ``folder/worker.log``."""
    out = (folder / "worker.log").open("w")
    return subprocess.Popen(
        system.worker_command("default", burst=False),
        env={**system.worker_env(), **env},
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT,
    )


# -- jobqueue's paced enqueuer: ``python -m bench.churners churn-enqueue ...`` -----------------


def _enqueue_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["churn-enqueue"])
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--start-at", type=float, required=True)
    parser.add_argument("--tick", type=float, default=TICK)
    args = parser.parse_args(argv)
    import django

    django.setup()
    from bench.benchapp.tasks import noop
    from bench.peers._common import paced_batches

    numbers = iter(range(1, 1 << 62))

    def batch(k: int) -> None:
        noop.enqueue_many([(next(numbers),) for _ in range(k)])

    reply = paced_batches(args.rate, args.seconds, args.start_at, args.tick, batch)
    print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    _enqueue_main(sys.argv[1:])
