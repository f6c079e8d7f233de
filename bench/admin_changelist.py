"""W12: how fast the admin renders with many jobs: ``python bench/run.py --only W12``.

Loads ``--admin-jobs`` rows (a realistic mix: mostly succeeded, some failed, a few
abandoned, over several queues and tasks) into the bench database's emptied job table,
``ANALYZE``s it, then renders each admin page through Django's test client
``--admin-renders`` times: the median, min and max time and the statement count of each.
PostgreSQL only. A benchmark, not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import statistics
import time

from bench.report import Table, number, progress
from bench.workloads import BenchError

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
]


def admin_pages(jobs: int, renders: int) -> Table:
    """Every page of :data:`PAGES` on a table of ``jobs`` rows; the W12 table."""
    from django.test.utils import setup_test_environment, teardown_test_environment

    _load(jobs)
    setup_test_environment()  # the test client needs it to render templates as in a test
    try:
        rows = _render(renders)
    finally:
        teardown_test_environment()  # the bench process goes on with its own settings
    return Table(
        key="W12",
        title=f"admin pages with {jobs:,} jobs",
        intro=f"Each page rendered {renders} times after one to warm up, through Django's "
        "test client; its statements counted on one more render, with the cache cleared.",
        headings=["page", "median ms", "min ms", "max ms", "queries"],
        rows=[
            [
                page,
                number(statistics.median(times), "ms"),
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
