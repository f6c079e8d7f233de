"""Does a table of finished jobs slow the queue down? ``python bench/large_table.py``.

Measures, on an empty job table and then with ``--finished`` (1,000,000) finished rows
retained, in a PostgreSQL database whose name contains ``bench``: the claim statement's
execution time (``EXPLAIN ANALYZE``, median of many), a drain of ``--jobs`` no-op jobs by
one in-process worker, and the figures of ``manage.py jobs queues``, each ``--repeat``
times. Prints one table of medians (min-max) with the ratio of each median with the rows to
the median without: 1.0 is flat.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/jq_large_bench"

# Finished rows as retention keeps them: mostly succeeded, some failed and discarded.
LOAD_FINISHED = """
INSERT INTO jobqueue_job (
    task_name, queue, priority, args, kwargs, status, run_at, attempts, max_attempts, crashes,
    on_crash, last_error, errors, steps, enqueued_at, started_at, finished_at, updated_at)
SELECT 'bench.noop', (ARRAY['default', 'emails', 'feeds'])[1 + i %% 3], 0, '[1]', '{}',
       CASE WHEN i %% 50 = 0 THEN 'failed' WHEN i %% 97 = 0 THEN 'discarded'
            ELSE 'succeeded' END,
       t.at, 1, 3, 0, 'retry', '', '[]', '{}', t.at, t.at, t.at, t.at
FROM generate_series(1, %(rows)s) AS i,
     -- All within the last two days: retention keeps them, so the table stays this large.
     LATERAL (SELECT now() - make_interval(secs => i %% 172800)) AS t(at)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--finished", type=int, default=1_000_000, help="rows retained")
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per drain")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="measures of each figure")
    args = parser.parse_args()
    if "bench" not in args.database_url.rsplit("/", 1)[-1]:
        sys.exit("the database's name must contain 'bench': its job table is emptied")
    sys.path[:0] = [str(REPO), str(REPO / "testproject")]
    os.environ["DATABASE_URL"] = args.database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    _create_database(args.database_url)

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    results = {}
    for label, rows in (("empty table", 0), (f"{args.finished:,} finished rows", args.finished)):
        _reset(rows)
        runs = [_measure(args.jobs, args.concurrency) for _ in range(args.repeat)]
        results[label] = {figure: [run[figure] for run in runs] for figure in runs[0]}
    _report(results, args)


def _create_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _reset(rows: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_job, jobqueue_worker")
        if rows:
            cursor.execute(LOAD_FINISHED, {"rows": rows})
        cursor.execute("VACUUM ANALYZE jobqueue_job")
        # Loading a million rows leaves WAL to flush: let it out now, not during the measure.
        cursor.execute("CHECKPOINT")


def _measure(jobs: int, concurrency: int) -> dict[str, float]:
    from django.db import connection

    from bench.benchapp.tasks import noop
    from jobqueue import overview
    from jobqueue.runtime.demand import PREFETCH_PER_SLOT
    from jobqueue.runtime.worker import Worker
    from jobqueue.sql import Queries

    noop.enqueue_many([(i,) for i in range(jobs)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
    q = Queries("default")
    params = {
        "worker": "bench",
        "task_names": q.names([noop.name]),
        "all_queues": True,
        "queues": q.names([]),
        "excluded": q.names([]),
        "limit": concurrency,
        # As a busy worker claims: jobs for its free slots and, the jobs being short, more.
        "ahead": PREFETCH_PER_SLOT * concurrency,
        "max_crashes": 3,
        "lease": 300,
        "done": "[]",  # the claim statement also records successes; none here
        "done_ids": [],
        "started": "[]",  # and the starts of held jobs; none either
        "started_ids": [],
        "buffer": 5,
    }
    claim_ms = []
    with connection.cursor() as cursor:
        for _ in range(30):
            # Rolled back, so every run claims from the same rows.
            cursor.execute("BEGIN")
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + q.statements["claim"], params)
            plan = cursor.fetchone()[0]
            cursor.execute("ROLLBACK")
            plan = plan if isinstance(plan, list) else __import__("json").loads(plan)
            claim_ms.append(plan[0]["Execution Time"])
    started = time.perf_counter()
    overview.queue_rows()
    queues_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    if Worker(burst=True, concurrency=concurrency).run():
        raise RuntimeError("the worker failed")
    drain = jobs / (time.perf_counter() - started)
    return {"claim ms": statistics.median(claim_ms), "jobs/s": drain, "queues ms": queues_ms}


def _report(results: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> None:
    (empty_label, empty), (full_label, full) = results.items()
    from bench.report import spread

    figures = {  # key: (label, unit)
        "claim ms": ("claim statement, execution (EXPLAIN ANALYZE, median of 30), ms", "ms"),
        "jobs/s": (
            f"drain {args.jobs:,} no-op jobs, one in-process worker, concurrency "
            f"{args.concurrency}, jobs/s",
            "jobs/s",
        ),
        "queues ms": ("`jobs queues` figures, ms", "ms"),
    }
    lines = [
        f"Medians of {args.repeat} (min-max).",
        "",
        f"| figure | {empty_label} | {full_label} | ratio |",
        "|---|---:|---:|---:|",
    ]
    for key, (label, unit) in figures.items():
        ratio = statistics.median(full[key]) / statistics.median(empty[key])
        lines.append(
            f"| {label} | {spread(empty[key], unit)} | {spread(full[key], unit)} | {ratio:.2f} |"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
