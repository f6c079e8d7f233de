"""pgqueuer, with its psycopg 3 drivers and its own schema. It keeps no results: the
``ten_kb`` handler builds 10 KB and drops it."""

from __future__ import annotations

import argparse
import asyncio
from datetime import timedelta
from typing import Any

import pgqueuer
import psycopg
from _common import DSN, main, paced, stamp, stop_on_sigterm, ten_kb, timed
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
            names = [args.task] * args.jobs
            return timed(lambda: queries.enqueue(names, payloads, [0] * args.jobs))
        return timed(
            lambda: [queries.enqueue(args.task, str(n).encode()) for n in range(args.jobs)]
        )


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


async def serve(setting: str, burst: bool) -> None:
    conn = await psycopg.AsyncConnection.connect(DSN, autocommit=True)
    manager = pgqueuer.QueueManager(pgqueuer.Queries(pgqueuer.PsycopgDriver(conn)))

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
