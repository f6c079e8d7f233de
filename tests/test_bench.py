"""The benchmark runs: a tiny N, jobqueue only, on SQLite. Its figures are not checked here:
speed is measured by bench/, never asserted in a test."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.process


def test_the_benchmark_runs_on_a_tiny_n(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "run.py"),
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
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for row in ("| W1 |", "| W2 |", "| W3 |", "statements per job"):
        assert row in result.stdout
