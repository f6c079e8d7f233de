"""W6: does a table of finished jobs slow the queue down? ``python bench/run.py --only W6``.

Measures, on an empty job table and then with ``--large-finished`` (1,000,000) finished
rows retained: the claim statement's execution time (``EXPLAIN ANALYZE``, median of 30), a
drain of ``--large-jobs`` no-op jobs by one in-process worker at ``--large-concurrency``,
and the figures of ``manage.py jobs queues``, each ``--repeat`` times. One table of medians
(min-max) with the ratio of each median with the rows to the median without: 1.0 is flat.
PostgreSQL only.
"""

from __future__ import annotations

import json
import statistics
import time

from bench.report import Table, progress, ratio, spread
from bench.workload import BenchError

CLAIM_RUNS = 30  # EXPLAIN ANALYZE runs of the claim per measure, whose median is taken

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


def large_table(finished: int, jobs: int, concurrency: int, repeat: int) -> Table:
    """The figures on an empty table, then with ``finished`` rows; the W6 table."""
    results = {}
    for label, rows in (("empty table", 0), (f"{finished:,} finished rows", finished)):
        _reset(rows)
        runs = []
        for run in range(1, repeat + 1):
            runs.append(_measure(jobs, concurrency))
            figures = runs[-1]
            progress(
                f"W6 [{label}] run {run}: claim {figures['claim ms']:.1f} ms, "
                f"drain {figures['jobs/s']:,.0f} jobs/s, queues {figures['queues ms']:.1f} ms"
            )
        results[label] = {figure: [run[figure] for run in runs] for figure in runs[0]}
    return _table(results, jobs, concurrency, repeat)


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
    from jobqueue.console import overview
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
        for _ in range(CLAIM_RUNS):
            # Rolled back, so every run claims from the same rows.
            cursor.execute("BEGIN")
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + q.statements["claim"], params)
            plan = cursor.fetchone()[0]
            cursor.execute("ROLLBACK")
            plan = plan if isinstance(plan, list) else json.loads(plan)
            claim_ms.append(plan[0]["Execution Time"])
    started = time.perf_counter()
    overview.queue_rows()
    queues_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    if Worker(burst=True, concurrency=concurrency).run():
        raise BenchError("the worker failed")
    drain = jobs / (time.perf_counter() - started)
    return {"claim ms": statistics.median(claim_ms), "jobs/s": drain, "queues ms": queues_ms}


def _table(
    results: dict[str, dict[str, list[float]]], jobs: int, concurrency: int, repeat: int
) -> Table:
    (empty_label, empty), (full_label, full) = results.items()
    figures = {  # key: (label, unit)
        "claim ms": (
            f"claim statement, execution (EXPLAIN ANALYZE, median of {CLAIM_RUNS}), ms",
            "ms",
        ),
        "jobs/s": (
            f"drain {jobs:,} no-op jobs, one in-process worker, concurrency {concurrency}, jobs/s",
            "jobs/s",
        ),
        "queues ms": ("`jobs queues` figures, ms", "ms"),
    }
    rows = [
        [
            label,
            spread(empty[key], unit),
            spread(full[key], unit),
            ratio(statistics.median(full[key]) / statistics.median(empty[key])),
        ]
        for key, (label, unit) in figures.items()
    ]
    return Table(
        key="W6",
        title="a large table: finished rows retained against an empty table",
        intro=f"Medians of {repeat} (min-max).",
        headings=["figure", empty_label, full_label, "ratio"],
        rows=rows,
    )
