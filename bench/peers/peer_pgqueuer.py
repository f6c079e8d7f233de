"""pgqueuer, with its psycopg 3 drivers and its own schema. It keeps no results: the
``ten_kb`` handler builds 10 KB and drops it.

For W9 and W10: ``enqueue --bulk --batch`` enqueues a backlog in calls of ``--batch``,
``workers --processes N`` runs N worker processes (pgqueuer has no supervisor), a worker
with ``BENCH_CLAIM_LOG`` set times each of its dequeues (:class:`TimedQueries`), and
``drained`` gives the rate from ``pgqueuer_log``'s rows. For W8: ``churn-enqueue``, a
paced enqueuer, and ``BENCH_WAIT_LOG``, each dequeued job's wait since its enqueue.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import timedelta
from typing import Any

import pgqueuer
import psycopg
from _common import (
    DSN,
    claim_logger,
    main,
    paced,
    paced_batches,
    stamp,
    stop_on_sigterm,
    ten_kb,
    timed,
    worker_processes,
)
from pgqueuer.adapters.drivers.psycopg import SyncPsycopgDriver
from pgqueuer.adapters.persistence.queries import SyncQueries
from pgqueuer.domain.types import QueueExecutionMode

BATCH_SIZE = {"default": 10, "tuned": 100}
CLAIM_LOG = claim_logger(os.environ.get("BENCH_CLAIM_LOG"))
WAIT_LOG = os.environ.get("BENCH_WAIT_LOG")


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
            batch = args.batch or args.jobs

            def bulk() -> None:
                for first in range(0, args.jobs, batch):
                    size = min(batch, args.jobs - first)
                    payloads: list[bytes | None] = [
                        str(n).encode() for n in range(first, first + size)
                    ]
                    queries.enqueue([args.task] * size, payloads, [0] * size)

            reply = timed(bulk)
        else:
            reply = timed(
                lambda: [queries.enqueue(args.task, str(n).encode()) for n in range(args.jobs)]
            )
        if args.analyze:
            conn.execute("ANALYZE pgqueuer")
    return reply


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


class TimedQueries(pgqueuer.Queries):
    """pgqueuer's queries, with each dequeue (its one claim statement) timed as the worker
    waits for it, round trip included, and appended to ``BENCH_CLAIM_LOG``; with
    ``BENCH_WAIT_LOG`` (W8), also how long each job it returned had waited since its
    enqueue, one line per dequeue: ``<wall clock at its end> <each job's wait>...``."""

    async def dequeue(self, *args: Any, **kwargs: Any) -> list[pgqueuer.Job]:
        wall, started = time.time(), time.perf_counter()
        jobs = await super().dequeue(*args, **kwargs)
        if CLAIM_LOG is not None:
            CLAIM_LOG(wall, time.perf_counter() - started, len(jobs))
        if WAIT_LOG and jobs:
            now = time.time()
            waits = "".join(f" {now - job.created.timestamp():.6f}" for job in jobs)
            with open(WAIT_LOG, "a") as file:
                file.write(f"{now:.6f}{waits}\n")
        return jobs


async def serve(setting: str, burst: bool) -> None:
    conn = await psycopg.AsyncConnection.connect(DSN, autocommit=True)
    manager = pgqueuer.QueueManager(TimedQueries(pgqueuer.PsycopgDriver(conn)))

    @manager.entrypoint("noop")
    async def noop(job: pgqueuer.Job) -> None:
        """Do nothing."""

    @manager.entrypoint("ten_kb")
    async def ten_kb_job(job: pgqueuer.Job) -> None:
        ten_kb(int(job.payload or b"0"))

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


def workers(args: argparse.Namespace) -> None:
    worker_processes(args)


def drained(args: argparse.Namespace) -> dict[str, Any]:
    """The jobs whose success was logged after ``--since`` (epoch seconds) and within
    ``--window`` s of it (0: no end), the span from ``--since`` to the last of them (at most
    the window), and the jobs succeeded, failed and left in all."""
    with psycopg.connect(DSN) as conn:
        row = conn.execute(
            """
            WITH span AS (
                SELECT to_timestamp(%(since)s) AS since,
                       CASE WHEN %(window)s > 0
                            THEN to_timestamp(%(since)s + %(window)s) END AS until
            ), done AS (
                SELECT created FROM pgqueuer_log, span
                WHERE status = 'successful' AND created > span.since
                  AND (span.until IS NULL OR created <= span.until)
            )
            SELECT (SELECT count(*) FROM done),
                   (SELECT extract(epoch FROM max(created) - min(span.since)) FROM done, span),
                   (SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'),
                   (SELECT count(*) FROM pgqueuer_log WHERE status IN ('exception', 'failed')),
                   (SELECT count(*) FROM pgqueuer)
            """,
            {"since": args.since, "window": args.window},
        ).fetchone()
    assert row is not None
    after, span, done, failed, left = row
    return {
        "after": int(after),
        "span": float(span or 0),
        "succeeded": int(done),
        "failed": int(failed),
        "left": int(left),
    }


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
