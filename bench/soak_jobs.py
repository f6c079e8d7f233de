"""The soak database and the queue in it: dropping it, its tables, the jobs the soak
enqueues, and what the rows say (the jobs left, the busy workers, the throughput); the
soak's progress lines. Every look at the rows during the chaos is on the soak's own
connection, and says None while PostgreSQL is away.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from bench import database

T = TypeVar("T")
OPEN = "('pending', 'running')"  # the statuses of a job that is not finished


def progress(message: str) -> None:
    stamp = dt.datetime.now().strftime("%H:%M:%S")
    print(f"{stamp} soak: {message}", file=sys.stderr, flush=True)


def drop_database(config: dict[str, Any]) -> None:
    import psycopg
    from psycopg import sql

    name = sql.Identifier(str(config["NAME"]))
    for _ in range(30):  # the server may be coming back from the last restart
        try:
            with psycopg.connect(**database.server(config), autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
            return
        except psycopg.OperationalError:
            time.sleep(1)
    progress(f"could not drop database {config['NAME']}")


def db(block: Callable[[], T]) -> T | None:
    """Run ``block`` on the soak's own connection; None while the server is away."""
    from django.db import InterfaceError, OperationalError, connection

    try:
        return block()
    except (OperationalError, InterfaceError):
        connection.close()  # reconnect on the next call
        return None


def fetch(sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def wait_for_database(timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while db(lambda: fetch("SELECT 1")) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"PostgreSQL did not come back within {timeout:g} s")
        time.sleep(0.2)


def set_up_tables() -> None:
    from django.core.management import call_command

    from bench.soakapp import records

    call_command("migrate", verbosity=0)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(records.SCHEMA)


def empty_tables() -> None:
    from django.db import connection

    from bench.soakapp import records

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE jobqueue_job, jobqueue_worker, {records.TABLE} RESTART IDENTITY")


def enqueue(jobs: int, park_share: float) -> list[int]:
    """Enqueue ``jobs`` jobs in bulk, the two policies interleaved in the claim order."""
    from django.db import connection

    from bench.soakapp.tasks import soak_park, soak_retry

    ids: list[int] = []
    chunk = 500
    for start in range(0, jobs, chunk):
        size = min(chunk, jobs - start)
        parks = round(size * park_share)
        for bound, count, first in (
            (soak_retry, size - parks, start),
            (soak_park, parks, start + size - parks),
        ):
            if count:
                made = bound.enqueue_many([(n,) for n in range(first, first + count)])
                ids.extend(job.pk for job in made if job is not None)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")  # a stable plan for the claim
    return ids


def unfinished() -> int | None:
    rows = db(lambda: fetch(f"SELECT count(*) FROM jobqueue_job WHERE status IN {OPEN}"))
    return None if rows is None else int(rows[0][0])


def ready_pids() -> set[int] | None:
    """Pids of workers that registered and hold a running job (busy), or else registered."""
    rows = db(
        lambda: fetch(
            "SELECT w.pid, bool_or(j.id IS NOT NULL) FROM jobqueue_worker AS w "
            "LEFT JOIN jobqueue_job AS j ON j.worker = w.id AND j.status = 'running' "
            "GROUP BY w.pid"
        )
    )
    if rows is None:
        return None
    busy = {int(pid) for pid, running in rows if running}
    return busy or {int(pid) for pid, _ in rows}


def throughput(until: dt.datetime | None) -> float:
    """Jobs finished per second from the first recorded start (to ``until``, if given)."""
    from bench.soakapp import records

    rows = fetch(
        f"SELECT count(*), extract(epoch FROM coalesce(%(until)s, max(finished_at)) "
        f"  - (SELECT min(at) FROM {records.TABLE})) "
        "FROM jobqueue_job WHERE finished_at IS NOT NULL "
        "AND (%(until)s::timestamptz IS NULL OR finished_at <= %(until)s)",
        {"until": until},
    )
    count, seconds = rows[0]
    return float(count) / float(seconds) if seconds else 0.0
