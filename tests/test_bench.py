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


def test_the_large_table_benchmark_runs_on_a_tiny_table(postgresql_only):
    from django.db import connection

    settings = connection.settings_dict
    host, port = settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432
    # A database of its own, named as the script demands: it empties its job table.
    password = f":{settings['PASSWORD']}" if settings["PASSWORD"] else ""
    user = f"{settings['USER']}{password}@" if settings["USER"] else ""
    url = f"postgres://{user}{host}:{port}/{settings['NAME']}_large_bench"
    output = run_script(
        "large_table.py",
        "--database-url",
        url,
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
