"""pgqueuer, with its psycopg 3 drivers and its own schema."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import timedelta
from typing import Any

import pgqueuer
import psycopg
from _common import DSN, main, paced, paced_batches, stamp, stop_on_sigterm, timed
from pgqueuer.adapters.drivers.psycopg import SyncPsycopgDriver
from pgqueuer.adapters.persistence.queries import SyncQueries
from pgqueuer.domain.types import QueueExecutionMode

BATCH_SIZE = {"default": 10, "tuned": 100}


def setup(args: argparse.Namespace) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")

    async def install() -> None:
        conn = await psycopg.AsyncConnection.connect(DSN, autocommit=True)
        await pgqueuer.Queries(pgqueuer.PsycopgDriver(conn)).install()
        await conn.close()

    asyncio.run(install())


def reset(args: argparse.Namespace) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics RESTART IDENTITY")


def enqueue(args: argparse.Namespace) -> dict[str, Any]:
    with psycopg.connect(DSN, autocommit=True) as conn:
        queries = SyncQueries(SyncPsycopgDriver(conn))
        if args.bulk:
            payloads: list[bytes | None] = [str(n).encode() for n in range(args.jobs)]
            return timed(lambda: queries.enqueue(["noop"] * args.jobs, payloads, [0] * args.jobs))
        return timed(lambda: [queries.enqueue("noop", str(n).encode()) for n in range(args.jobs)])


def stamps(args: argparse.Namespace) -> dict[str, Any]:
    with psycopg.connect(DSN, autocommit=True) as conn:
        queries = SyncQueries(SyncPsycopgDriver(conn))
        committed = paced(
            args.start,
            args.jobs,
            args.interval,
            lambda n: queries.enqueue("stamp", str(n).encode()),
        )
    return {"committed": committed}


def churn_enqueue(args: argparse.Namespace) -> dict[str, Any]:
    """W8: ``--rate`` jobs a second for ``--seconds``, a list enqueue every ``--tick`` s."""
    with psycopg.connect(DSN, autocommit=True) as conn:
        queries = SyncQueries(SyncPsycopgDriver(conn))
        numbers = iter(range(1, 1 << 62))

        def batch(k: int) -> None:
            payloads: list[bytes | None] = [str(next(numbers)).encode() for _ in range(k)]
            queries.enqueue(["noop"] * k, payloads, [0] * k)

        return paced_batches(args.rate, args.seconds, args.start_at, args.tick, batch)


def time_dequeue(queries: Any, log: str) -> None:
    """W8: time each ``Queries.dequeue`` call (its statement, and parsing its rows) as the
    worker waits for it, and how long each job it returns waited since its enqueue; one
    line per call, ``<wall clock> <seconds> <each job's wait>...``, appended to ``log``."""
    dequeue = queries.dequeue

    async def timed_dequeue(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        jobs = await dequeue(*args, **kwargs)
        seconds = time.perf_counter() - started
        now = time.time()
        waits = "".join(f" {now - job.created.timestamp():.6f}" for job in jobs)
        with open(log, "a") as file:
            file.write(f"{now:.3f} {seconds:.6f}{waits}\n")
        return jobs

    queries.dequeue = timed_dequeue


async def serve(setting: str, burst: bool) -> None:
    conn = await psycopg.AsyncConnection.connect(DSN, autocommit=True)
    manager = pgqueuer.QueueManager(pgqueuer.Queries(pgqueuer.PsycopgDriver(conn)))
    if log := os.environ.get("BENCH_CLAIM_LOG"):
        time_dequeue(manager.queries, log)

    @manager.entrypoint("noop")
    async def noop(job: pgqueuer.Job) -> None:
        """Do nothing."""

    @manager.entrypoint("stamp")
    async def stamp_job(job: pgqueuer.Job) -> None:
        stamp(int(job.payload or b"0"))

    mode = QueueExecutionMode.drain if burst else QueueExecutionMode.continuous
    await manager.run(
        batch_size=BATCH_SIZE[setting], mode=mode, dequeue_timeout=timedelta(seconds=30)
    )


def work(args: argparse.Namespace) -> None:
    stop_on_sigterm()
    asyncio.run(serve(args.setting, args.burst))


def succeeded(args: argparse.Namespace) -> dict[str, Any]:
    with psycopg.connect(DSN) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM pgqueuer_log WHERE status = 'successful')"
            " + (SELECT coalesce(sum(count), 0) FROM pgqueuer_statistics"
            "    WHERE status = 'successful')"
        ).fetchone()
    return {"succeeded": int(row[0]) if row else 0}


def versions(args: argparse.Namespace) -> dict[str, Any]:
    return {"versions": {"pgqueuer": pgqueuer.__version__}}


if __name__ == "__main__":
    main(globals())
