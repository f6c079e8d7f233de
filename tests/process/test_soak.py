"""The chaos soak's short variant, as CI runs it: ``bench/soak.py`` for about a minute.

It SIGKILLs busy workers every second, pauses one past its lease, restarts PostgreSQL three
times (the cluster of ``pg_cluster()``: in CI the main one, which is why the suite runs
serially there) and SIGKILLs the supervisor once, on a database of its own that it drops.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from django.db import connection, connections

from tests.conftest import REPO, pg_cluster

pytestmark = [pytest.mark.process]

PROMISES = [
    "no job lost",
    'every "retry" job succeeded',
    'no "park" job started twice',
    "no two runs of one job overlapped",
    "no finished step ran twice",
    "every job is terminal",
    "all of the chaos happened",
    "orphaned workers stopped by themselves",
]


def soak_database_url() -> str:
    """The soak's own database on the server of the test database, never through a pooler."""
    direct = os.environ.get("DATABASE_DIRECT_URL")
    settings = connection.settings_dict
    if direct:
        parts = urlsplit(direct)
        host, port = parts.hostname, parts.port
        user, password = parts.username, parts.password
    else:
        host, port = settings.get("HOST"), settings.get("PORT")
        user, password = settings.get("USER"), settings.get("PASSWORD")
    credentials = quote(user or "postgres") + (f":{quote(password)}" if password else "")
    return f"postgres://{credentials}@{host or '127.0.0.1'}:{port or 5432}/jobqueue_soak_ci"


def test_the_chaos_soak_keeps_every_promise(postgresql_only: None, tmp_path: Path) -> None:
    if os.environ.get("JOBQUEUE_SOAK") != "1":
        # A minute and three restarts of the server: once per CI run is enough, in the
        # py312-django61-postgres environment, which sets JOBQUEUE_SOAK=1.
        pytest.skip("the soak runs where JOBQUEUE_SOAK=1 (tox -e py312-django61-postgres)")
    cluster = pg_cluster()
    if cluster is None:
        pytest.skip("needs a local pg_ctlcluster-managed server (or JOBQUEUE_PG_CLUSTER)")
    log = tmp_path / "soak-workers.log"
    command = [
        sys.executable,
        str(REPO / "bench" / "soak.py"),
        "--database-url",
        soak_database_url(),
        "--pg-cluster",
        " ".join(cluster),
        "--jobs",
        "8000",
        "--duration",
        "60",
        "--baseline-jobs",
        "500",
        "--timeout",
        "150",
        "--log",
        str(log),
    ]
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    finally:
        # The restarts closed this process's connections under it.
        connections.close_all()
    report = f"{done.stdout}\n--- stderr ---\n{done.stderr}"
    if done.returncode != 0:
        report += "\n--- workers (tail) ---\n" + "\n".join(
            log.read_text(errors="replace").splitlines()[-200:]
        )
    assert done.returncode == 0, report
    assert "result: PASS" in done.stdout, report
    lines = done.stdout.splitlines()
    for promise in PROMISES:
        assert any(line.startswith(f"| {promise} ") and "| ok:" in line for line in lines), (
            promise,
            report,
        )
    restarts = next(line for line in lines if line.startswith("| PostgreSQL restarts "))
    assert "| 3 (" in restarts, report


# The soak's checks themselves, on made-up histories: each promise it reports as kept must
# be one it would have caught broken.


def _history(rows: list[tuple[int, str, str, str | None, int]]) -> None:
    """Rows of the soak's side table: (job id, token, kind, step, seconds after a start)."""
    from bench.soakapp import records

    with connection.cursor() as cursor:
        cursor.execute(records.SCHEMA)
        for job_id, token, kind, step, second in rows:
            cursor.execute(
                f"INSERT INTO {records.TABLE} (job_id, token, kind, step, pid, at) "
                "VALUES (%s, %s, %s, %s, 1, '2026-01-01'::timestamptz + make_interval(secs => %s))",
                [job_id, token, kind, step, second],
            )


def _soak_job(task: str, status: str, steps: dict[str, str]) -> int:
    from tests.factories import JobFactory

    return JobFactory(task_name=f"soak.{task}", status=status, steps=steps).pk


@pytest.mark.django_db
def test_the_soak_checks_pass_a_history_that_keeps_every_promise(postgresql_only: None) -> None:
    from bench import soak

    # Run t1 executed "first" and was killed; t2 reused it, executed "second" and succeeded.
    resumed = _soak_job("retry", "succeeded", {"first": "t1", "second": "t2"})
    once = _soak_job("park", "succeeded", {"first": "p1", "second": "p1"})
    _history(
        [
            (resumed, "t1", "start", None, 0),
            (resumed, "t1", "step", "first", 1),
            (resumed, "t2", "start", None, 8),
            (resumed, "t2", "step", "second", 9),
            (resumed, "t2", "end", None, 10),
            (once, "p1", "start", None, 0),
            (once, "p1", "step", "first", 1),
            (once, "p1", "step", "second", 2),
            (once, "p1", "end", None, 3),
        ]
    )
    held = soak.checks([resumed, once])
    assert all(ok for ok, _ in held.values()), held


@pytest.mark.django_db
def test_the_soak_checks_catch_each_broken_promise(postgresql_only: None) -> None:
    from bench import soak

    twice = _soak_job("park", "abandoned", {})
    failed = _soak_job("retry", "failed", {})
    overlapping = _soak_job("retry", "succeeded", {})
    step_again = _soak_job("retry", "succeeded", {"first": "s1"})
    stranded = _soak_job("retry", "running", {})
    _history(
        [
            (twice, "a", "start", None, 0),
            (twice, "b", "start", None, 10),
            (overlapping, "o1", "start", None, 0),
            (overlapping, "o1", "end", None, 10),
            (overlapping, "o2", "start", None, 5),
            (step_again, "s1", "start", None, 0),
            (step_again, "s1", "step", "first", 1),
            (step_again, "s2", "start", None, 8),
            (step_again, "s2", "step", "first", 9),
        ]
    )
    held = soak.checks([twice, failed, overlapping, step_again, stranded, 10**9])
    broken = {name: detail for name, (ok, detail) in held.items() if not ok}
    assert broken == {
        "no job lost": "5 of 6 enqueued ids found, 5 rows",
        'every "retry" job succeeded': "1 failed, 1 running",
        'no "park" job started twice': "1 started twice",
        "no two runs of one job overlapped": "1 overlaps, 0 claims started other than once",
        "no finished step ran twice": "1 ran again after being stored, 0 stored by no run",
        "every job is terminal": "1 pending or running",
    }
