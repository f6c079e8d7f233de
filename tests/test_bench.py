"""The benchmark runs: a tiny N, jobqueue only, on SQLite. Its figures are not checked here:
speed is measured by bench/, never asserted in a test."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.process


def run_script(name: str, *args: str) -> str:
    """Run ``bench/<name>`` with ``args``; its output, once it has exited with status 0."""
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / name), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_benchmark_runs_on_a_tiny_n(tmp_path):
    output = run_script(
        "run.py",
        "--database",
        "sqlite",
        "--database-url",
        f"sqlite:///{tmp_path / 'tiny_bench.sqlite3'}",
        "--systems",
        "jobqueue",
        "--only",
        "W1",
        "W2",
        "W3",
        "W7",
        "--jobs",
        "20",
        "--count-jobs",
        "20",
        "--repeat",
        "1",
        "--no-write",
    )
    for row in ("| W1 |", "| W2 |", "| W3 |", "statements per job"):
        assert row in output


def bench_database_url(suffix: str) -> str:
    """A PostgreSQL database of its own on the test server, named as the scripts demand:
    they empty its tables."""
    from django.db import connection

    settings = connection.settings_dict
    host, port = settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432
    password = f":{settings['PASSWORD']}" if settings["PASSWORD"] else ""
    user = f"{settings['USER']}{password}@" if settings["USER"] else ""
    return f"postgres://{user}{host}:{port}/{settings['NAME']}_{suffix}"


def test_the_large_table_benchmark_runs_on_a_tiny_table(postgresql_only):
    output = run_script(
        "large_table.py",
        "--database-url",
        bench_database_url("large_bench"),
        "--finished",
        "200",
        "--jobs",
        "20",
        "--concurrency",
        "2",
        "--repeat",
        "2",
    )
    for row in ("claim statement", "drain 20 no-op jobs", "`jobs queues` figures"):
        assert row in output


def test_the_floor_benchmark_drains_every_job_each_way(postgresql_only):
    output = run_script(
        "floor.py",
        "--database-url",
        bench_database_url("floor_bench"),
        "--jobs",
        "300",
        "--repeat",
        "1",
        "--connections",
        "1",
        "2",
    )
    rows = [line for line in output.splitlines() if line.startswith("| ") and "---" not in line]
    drains = [row.split(" | ")[0].lstrip("| ") for row in rows[1:]]
    assert drains == [
        *["raw-100: lock, run and mark succeeded in one transaction"] * 2,
        *["durable claim, minimal table: claim committed, then success fenced by token"] * 2,
        *["jobqueue's claim statement on its table, through Django's cursor, no worker"] * 2,
        "jobqueue's worker, in-process, default pool (one writer connection)",
    ]
    # The script counts the succeeded rows after each drain and fails on a shortfall.
    assert "Every drain finished all 300 jobs." in output
