"""procrastinate, with its psycopg 3 connector and its own schema. It keeps no results:
the ``ten_kb`` task builds 10 KB and drops it."""

from __future__ import annotations

import argparse
from typing import Any

import procrastinate
import psycopg
from _common import DSN, main, paced, stamp, ten_kb, timed

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=DSN))


@app.task(name="noop")
def noop(n: int) -> None:
    """Do nothing."""


@app.task(name="ten_kb")
def ten_kb_task(n: int) -> None:
    ten_kb(n)


TASKS = {"noop": noop, "ten_kb": ten_kb_task}


@app.task(name="stamp")
def stamp_task(n: int) -> None:
    stamp(n)


def setup(args: argparse.Namespace) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    with app.open():
        app.schema_manager.apply_schema()


def reset(args: argparse.Namespace) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("TRUNCATE procrastinate_jobs RESTART IDENTITY CASCADE")


def enqueue(args: argparse.Namespace) -> dict[str, Any]:
    with app.open():
        app.check_connection()  # connect before the clock starts
        if args.bulk:
            task_kwargs: list[dict[str, Any]] = [{"n": n} for n in range(args.jobs)]
            return timed(lambda: TASKS[args.task].batch_defer(*task_kwargs))
        return timed(lambda: [TASKS[args.task].defer(n=n) for n in range(args.jobs)])


def stamps(args: argparse.Namespace) -> dict[str, Any]:
    with app.open():
        return {
            "committed": paced(
                args.start, args.jobs, args.interval, lambda n: stamp_task.defer(n=n)
            )
        }


def work(args: argparse.Namespace) -> None:
    concurrency = 16 if args.setting == "tuned" else 1
    with app.open():
        app.run_worker(wait=not args.burst, concurrency=concurrency)


def succeeded(args: argparse.Namespace) -> dict[str, Any]:
    with psycopg.connect(DSN) as conn:
        row = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        ).fetchone()
    return {"succeeded": row[0] if row else 0}


def versions(args: argparse.Namespace) -> dict[str, Any]:
    return {"versions": {"procrastinate": procrastinate.__version__}}


if __name__ == "__main__":
    main(globals())
