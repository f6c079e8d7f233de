"""The raw psycopg baseline: the least database work a queue can do.

One table, a partial index on pending rows, and a worker that claims with
``FOR UPDATE SKIP LOCKED`` and marks the jobs succeeded in the same transaction, ``BATCH``
jobs per statement (1 or 100, from ``BENCH_RAW_BATCH``). Enqueue notifies in the same
statement; an idle worker waits for that notification, with a look every 30 s.
"""

from __future__ import annotations

import argparse
import os
import threading
from typing import Any

import psycopg
from _common import DSN, main, paced, stamp, stop_on_sigterm, timed
from psycopg.types.json import Jsonb

BATCH = int(os.environ.get("BENCH_RAW_BATCH", "1"))
THREADS = {"default": 1, "tuned": 4}
SAFETY_POLL = 30.0
SCHEMA = """
DROP TABLE IF EXISTS raw_job;
CREATE TABLE raw_job (
    id bigserial PRIMARY KEY,
    task text NOT NULL,
    args jsonb NOT NULL,
    status text NOT NULL DEFAULT 'pending'
);
CREATE INDEX raw_job_pending ON raw_job (id) WHERE status = 'pending';
"""
ENQUEUE = """
WITH job AS (INSERT INTO raw_job (task, args) VALUES (%s, %s) RETURNING 1)
SELECT pg_notify('raw_job', '') FROM job
"""
ENQUEUE_MANY = """
WITH job AS (INSERT INTO raw_job (task, args) SELECT %s, a FROM unnest(%s::jsonb[]) AS a
             RETURNING 1)
SELECT pg_notify('raw_job', '') FROM (SELECT 1 FROM job LIMIT 1) AS any_job
"""
CLAIM = """
SELECT id, task, args FROM raw_job WHERE status = 'pending'
ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
"""
SUCCEED = "UPDATE raw_job SET status = 'succeeded' WHERE id = ANY(%s)"
HANDLERS = {"noop": lambda n: None, "stamp": stamp}


def connect() -> psycopg.Connection[Any]:
    return psycopg.connect(DSN, autocommit=True)


def setup(args: argparse.Namespace) -> None:
    with connect() as conn:
        conn.execute(SCHEMA)


def reset(args: argparse.Namespace) -> None:
    with connect() as conn:
        conn.execute("TRUNCATE raw_job RESTART IDENTITY")


def enqueue(args: argparse.Namespace) -> dict[str, Any]:
    with connect() as conn:
        if args.bulk:
            return timed(
                lambda: conn.execute(ENQUEUE_MANY, ["noop", [Jsonb([n]) for n in range(args.jobs)]])
            )
        return timed(
            lambda: [conn.execute(ENQUEUE, ["noop", Jsonb([n])]) for n in range(args.jobs)]
        )


def stamps(args: argparse.Namespace) -> dict[str, Any]:
    with connect() as conn:
        committed = paced(
            args.start,
            args.jobs,
            args.interval,
            lambda n: conn.execute(ENQUEUE, ["stamp", Jsonb([n])]),
        )
    return {"committed": committed}


def drain(burst: bool) -> None:
    with connect() as conn:
        if not burst:
            conn.execute("LISTEN raw_job")
        while True:
            with conn.transaction():
                jobs = conn.execute(CLAIM, [BATCH]).fetchall()
                for _, task, job_args in jobs:
                    HANDLERS[task](*job_args)
                if jobs:
                    conn.execute(SUCCEED, [[job_id for job_id, _, _ in jobs]])
            if jobs:
                continue
            if burst:
                return
            for _ in conn.notifies(timeout=SAFETY_POLL, stop_after=1):
                break


def work(args: argparse.Namespace) -> None:
    stop_on_sigterm()
    threads = [
        threading.Thread(target=drain, args=[args.burst]) for _ in range(THREADS[args.setting])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def succeeded(args: argparse.Namespace) -> dict[str, Any]:
    with connect() as conn:
        row = conn.execute("SELECT count(*) FROM raw_job WHERE status = 'succeeded'").fetchone()
    return {"succeeded": row[0] if row else 0}


def versions(args: argparse.Namespace) -> dict[str, Any]:
    return {"versions": {"psycopg (raw)": psycopg.__version__}}


if __name__ == "__main__":
    main(globals())
