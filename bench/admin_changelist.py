"""W12: how fast the admin renders with many jobs: ``python bench/run.py --only W12``.

Loads ``--admin-jobs`` rows (a realistic mix: mostly succeeded, some failed, a few
abandoned, over several queues and tasks) into the bench database's emptied job table,
``ANALYZE``s it, then renders each admin page through Django's test client
``--admin-renders`` times: the median, p95, min and max time and the statement count of each.
The dashboard's pages read ``--admin-minutes`` of history (a week by default) as 4 workers
running 10 tasks write it, compacted as the workers compact it.
PostgreSQL only. A benchmark, not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import statistics
import time

from bench.report import Table, number, progress
from bench.workload import BenchError

# One INSERT for every row: statuses, queues and tasks cycle so that each filter has work.
LOAD = """
INSERT INTO jobqueue_job (
    task_name, queue, priority, args, kwargs, status, run_at, attempts, max_attempts, crashes,
    on_crash, idempotency_key, last_error, errors, steps, enqueued_at, started_at,
    finished_at, updated_at, worker)
SELECT 'shop.tasks.task_' || (i %% 12),
       (ARRAY['default', 'emails', 'feeds', 'payments', 'webhooks'])[1 + i %% 5],
       0, '[1, 2]', '{}',
       CASE WHEN i %% 1000 = 0 THEN 'abandoned'
            WHEN i %% 50 = 0 THEN 'failed'
            WHEN i %% 20 = 0 THEN 'pending'
            ELSE 'succeeded' END,
       now() - make_interval(secs => i), 1, 3, 0, 'retry',
       CASE WHEN i %% 3 = 0 THEN 'key:' || i END,
       CASE WHEN i %% 50 = 0 THEN 'ValueError: row ' || i || ' has no price' ELSE '' END,
       '[]', '{}', now() - make_interval(secs => i), now() - make_interval(secs => i),
       now() - make_interval(secs => i), now() - make_interval(secs => i),
       CASE WHEN i %% 1000 = 0 THEN 'web-1:42:dead' END
FROM generate_series(1, %(jobs)s) AS i
"""

# A week of the dashboard's history as 4 workers running 10 tasks would write it: each worker
# flushes, every minute, a "started" and a "succeeded" row per task, plus a "failed" row for
# one task in ten; and one depth sample per queue and minute.
STAT_WORKERS, STAT_TASKS, STAT_MINUTES = 4, 10, 7 * 24 * 60
LOAD_STATS = """
INSERT INTO jobqueue_minutestat (
    minute, span, queue, task_name, outcome, count, seconds,
    h00, h01, h02, h03, h04, h05, h06, h07, h08, h09, h10, h11, h12, h13, h14, h15)
SELECT date_trunc('minute', now()) - make_interval(mins => m), 60,
       (ARRAY['default', 'emails', 'feeds', 'payments', 'webhooks'])[1 + t %% 5],
       'shop.tasks.task_' || t, o, 5 + (m + w) %% 7, 0.3 * (5 + (m + w) %% 7),
       0, (m %% 3), 1, 2, 2 + (t %% 3), (m + w) %% 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
FROM generate_series(0, %(minutes)s - 1) AS m,
     generate_series(1, %(workers)s) AS w,
     generate_series(0, %(tasks)s - 1) AS t,
     unnest(ARRAY['started', 'succeeded', 'failed']) AS o
WHERE o <> 'failed' OR t = 0
"""
LOAD_SAMPLES = """
INSERT INTO jobqueue_queuesample (minute, queue, due, scheduled, running)
SELECT date_trunc('minute', now()) - make_interval(mins => m), q, m %% 17, 3, 4
FROM generate_series(0, %(minutes)s - 1) AS m,
     unnest(ARRAY['default', 'emails', 'feeds', 'payments', 'webhooks']) AS q
"""

PAGES = [
    ("changelist, unfiltered", "/admin/jobqueue/job/"),
    ("changelist, page 100", "/admin/jobqueue/job/?p=100"),
    ("changelist, failed", "/admin/jobqueue/job/?status__exact=failed"),
    ("changelist, abandoned", "/admin/jobqueue/job/?status__exact=abandoned"),
    ("changelist, queue + task", "/admin/jobqueue/job/?queue=emails&task_name=shop.tasks.task_1"),
    ("changelist, search by id", "/admin/jobqueue/job/?q=4242"),
    ("changelist, search task", "/admin/jobqueue/job/?q=task_7"),
    ("job page", "/admin/jobqueue/job/{job}/change/"),
    ("queues overview", "/admin/jobqueue/queuesummary/"),
    ("admin index (notice)", "/admin/"),
    ("dashboard, 1 h", "/admin/jobqueue/dashboard/?range=1h"),
    ("dashboard, 24 h", "/admin/jobqueue/dashboard/?range=24h"),
    ("dashboard, 7 d", "/admin/jobqueue/dashboard/?range=7d"),
]


def admin_pages(jobs: int, renders: int, minutes: int = STAT_MINUTES) -> Table:
    """Every page of :data:`PAGES` on a table of ``jobs`` rows; the W12 table."""
    from django.test.utils import setup_test_environment, teardown_test_environment

    _load(jobs)
    stat_rows = _load_history(minutes)
    setup_test_environment()  # the test client needs it to render templates as in a test
    try:
        rows = _render(renders)
    finally:
        teardown_test_environment()  # the bench process goes on with its own settings
    return Table(
        key="W12",
        title=f"admin pages with {jobs:,} jobs",
        intro=f"Each page rendered {renders} times after one to warm up, through Django's "
        "test client; its statements counted on one more render, with the cache cleared. "
        f"The dashboard reads a week of history: {stat_rows:,} stat rows ({STAT_WORKERS} "
        f"workers, {STAT_TASKS} tasks, {minutes:,} minutes) as the workers' compaction "
        "leaves them.",
        headings=["page", "median ms", "p95 ms", "min ms", "max ms", "queries"],
        rows=[
            [
                page,
                number(statistics.median(times), "ms"),
                number(p95(times), "ms"),
                number(min(times), "ms"),
                number(max(times), "ms"),
                str(queries),
            ]
            for page, times, queries in rows
        ],
    )


def _load(jobs: int) -> None:
    from django.contrib.auth.models import User
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_job RESTART IDENTITY")
        cursor.execute(LOAD, {"jobs": jobs})
        cursor.execute("ANALYZE jobqueue_job")
    progress(f"W12: loaded {jobs:,} jobs in {time.perf_counter() - started:.1f} s")
    if not User.objects.filter(username="bench").exists():
        User.objects.create_superuser("bench", "bench@example.com", "bench")


def p95(times: list[float]) -> float:
    """The 95th percentile of ``times`` (the largest for fewer than 20 of them)."""
    if len(times) < 20:
        return max(times)
    return statistics.quantiles(times, n=20)[-1]


def _load_history(minutes: int) -> int:
    """A week of dashboard history (see LOAD_STATS), compacted; the stat rows loaded."""
    from django.db import connection
    from django.utils import timezone

    from jobqueue.models import MinuteStat
    from jobqueue.store import stats

    started = time.perf_counter()
    params = {"minutes": minutes, "workers": STAT_WORKERS, "tasks": STAT_TASKS}
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_minutestat, jobqueue_queuesample RESTART IDENTITY")
        cursor.execute(LOAD_STATS, params)
        rows = cursor.rowcount
        cursor.execute(LOAD_SAMPLES, params)
    progress(f"W12: loaded {rows:,} stat rows in {time.perf_counter() - started:.1f} s")
    # What the workers' compaction makes of a week of minute rows (stats.TIERS), timed:
    # once it has caught up, each run merges only the few windows that came of age.
    started = time.perf_counter()
    stats.compact("default", timezone.now())
    kept = MinuteStat.objects.count()
    progress(f"W12: compacted them into {kept:,} rows in {time.perf_counter() - started:.1f} s")
    with connection.cursor() as cursor:
        # The compaction deleted 850,000 rows at once; a table the workers compact a few
        # windows at a time has its space reused by autovacuum, so it holds only its live
        # rows: rewrite it to look like that.
        cursor.execute("VACUUM FULL ANALYZE jobqueue_minutestat")
        cursor.execute("ANALYZE jobqueue_queuesample")
    return rows


def _render(renders: int) -> list[tuple[str, list[float], int]]:
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from jobqueue.models import Job

    client = Client()
    client.force_login(User.objects.get(username="bench"))
    job = Job.objects.filter(status="failed").values_list("pk", flat=True).first()
    rows = []
    for page, url in PAGES:
        url = url.format(job=job)
        response = client.get(url)  # warm up: templates, the notice's cached count
        if response.status_code != 200:
            raise BenchError(f"{url} answered {response.status_code}")
        times = []
        for _ in range(renders):
            started = time.perf_counter()
            client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        with CaptureQueriesContext(connection) as queries:
            cache.clear()  # count the notice's query too
            client.get(url)
        rows.append((page, times, len(queries)))
        progress(f"W12 {page}: {statistics.median(times):.1f} ms, {len(queries)} queries")
    return rows
