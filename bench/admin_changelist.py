"""How fast the admin renders with 100,000 jobs: ``python bench/admin_changelist.py``.

Loads ``--jobs`` rows (a realistic mix: mostly succeeded, some failed, a few abandoned, over
several queues and tasks) into a PostgreSQL database whose name must contain ``bench``
(default ``postgres://postgres@127.0.0.1:5432/jq_admin_bench``, created if missing; its job
table is emptied first), ``ANALYZE``s it, then renders each admin page through Django's test
client ``--repeat`` times and prints the median, min and max time and the statement count.
A benchmark, not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/jq_admin_bench"

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=DEFAULT_URL, help=f"default: {DEFAULT_URL}")
    parser.add_argument("--jobs", type=int, default=100_000, help="rows to load (100000)")
    parser.add_argument("--repeat", type=int, default=7, help="renders per page (7)")
    args = parser.parse_args()
    name = urlsplit(args.database_url).path.lstrip("/")
    if "bench" not in name:
        parser.error(f"refusing database {name!r}: its name must contain 'bench'")
    create_database(args.database_url, name)

    sys.path[:0] = [str(REPO), str(REPO / "testproject")]
    os.environ["DATABASE_URL"] = args.database_url
    os.environ["DEBUG"] = "false"  # debug mode records every statement
    os.environ["DJANGO_SETTINGS_MODULE"] = "testproject.settings"
    import django

    django.setup()
    load(args.jobs)
    rows = measure(args.repeat)
    print(f"\nadmin pages, {args.jobs:,} jobs, PostgreSQL {name}, {args.repeat} renders each\n")
    print(f"{'page':<28} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'queries':>8}")
    for page, times, queries in rows:
        print(
            f"{page:<28} {statistics.median(times):>10.1f} {min(times):>8.1f} "
            f"{max(times):>8.1f} {queries:>8}"
        )


def create_database(url: str, name: str) -> None:
    import psycopg

    parts = urlsplit(url)
    admin_url = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def load(jobs: int) -> None:
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_job RESTART IDENTITY")
        cursor.execute(LOAD, {"jobs": jobs})
        cursor.execute("ANALYZE jobqueue_job")
    print(f"loaded {jobs:,} jobs in {time.perf_counter() - started:.1f} s")
    if not User.objects.filter(username="bench").exists():
        User.objects.create_superuser("bench", "bench@example.com", "bench")


def measure(repeat: int) -> list[tuple[str, list[float], int]]:
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    from jobqueue.models import Job

    setup_test_environment()  # the test client needs it to render templates as in a test
    client = Client()
    client.force_login(User.objects.get(username="bench"))
    job = Job.objects.filter(status="failed").values_list("pk", flat=True).first()
    rows = []
    for page, url in PAGES:
        url = url.format(job=job)
        response = client.get(url)  # warm up: templates, the notice's cached count
        assert response.status_code == 200, (url, response.status_code)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        with CaptureQueriesContext(connection) as queries:
            cache.clear()  # count the notice's query too
            client.get(url)
        rows.append((page, times, len(queries)))
    return rows


if __name__ == "__main__":
    main()
