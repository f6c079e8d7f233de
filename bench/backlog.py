"""W10: does a big backlog slow the drain down? ``python bench/run.py --only W10``.

For each backlog in ``--backlog-sizes`` (10,000, 100,000 and 1,000,000): a fresh job table
(dropped and migrated again, so that it has no statistics yet, as a table has right after a
campaign), the backlog enqueued as a campaign would, ``enqueue_many`` calls of
``--backlog-batch`` (10,000), then drained by one ``runjobs --burst`` supervisor at default
settings, and by four at once. Nothing is analysed or vacuumed by the bench: what the
drain meets is what a user's would.

The drain rate is from the rows: the jobs that finished after every worker had started
its first job, over the time from that moment to the last finish (``started_at``,
``finished_at``, ``worker``), so the supervisors' start-up and exit are not in it. The
claim's time is measured in the workers, around the driver's call
(``bench/backlog_settings.py``): the time each ``claim`` statement took as the worker
waited for it, round trip included; its p50 and p99 over every claim of the drain.
PostgreSQL only.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import Table, number, progress, ratio
from bench.systems.base import REPO
from bench.workloads import BenchError

SUPERVISORS = (1, 4)
TIMEOUT = 3600  # s: a drain that takes longer than this has collapsed anyway


def backlog(sizes: list[int], batch: int) -> Table:
    """Each backlog drained by one supervisor and by four; the W10 table."""
    figures: dict[tuple[int, int], dict[str, float]] = {}
    for size in sizes:
        for supervisors in SUPERVISORS:
            enqueue_s = _fresh_backlog(size, batch)
            figures[size, supervisors] = measured = _drain(size, supervisors)
            progress(
                f"W10 [{size:,} jobs, {supervisors} supervisor(s)]: enqueued in "
                f"{enqueue_s:.1f} s, drained at {measured['jobs/s']:,.0f} jobs/s, claim p50 "
                f"{measured['p50']:.1f} ms, p99 {measured['p99']:.1f} ms"
            )
    return _table(figures, sizes, batch)


def _fresh_backlog(size: int, batch: int) -> float:
    """A new job table holding ``size`` due jobs; seconds the enqueue took."""
    from django.core.management import call_command
    from django.db import connection

    from bench.benchapp.tasks import noop

    connection.close()
    call_command("migrate", "jobqueue", "zero", verbosity=0)
    call_command("migrate", "jobqueue", verbosity=0)
    started = time.perf_counter()
    for first in range(0, size, batch):
        noop.enqueue_many([(n,) for n in range(first, min(first + batch, size))])
    seconds = time.perf_counter() - started
    connection.close()  # nothing of the bench's stays open beside the drain
    return seconds


def _drain(size: int, supervisors: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="jobqueue-w10-") as folder:
        claims = Path(folder) / "claims"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "testproject")]),
            "DJANGO_SETTINGS_MODULE": "bench.backlog_settings",
            "BENCH_CLAIM_LOG": str(claims),
        }
        logs = [(Path(folder) / f"supervisor-{n}.log").open("w") for n in range(supervisors)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "django", "runjobs", "--burst"],
                env=env,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            for log in logs
        ]
        failed = []
        for n, proc in enumerate(procs):
            try:
                code = proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            logs[n].close()
            if code:
                failed.append(f"supervisor {n} exited with {code}:\n" + _tail(logs[n].name))
        if failed:
            raise BenchError("\n".join(failed))
        seconds = [float(line.split()[1]) for line in claims.read_text().splitlines()]
    done, rate = drain_rate()
    if done != size:
        raise BenchError(f"{done:,} of {size:,} jobs succeeded after the drain")
    ms = sorted(s * 1000 for s in seconds)
    return {
        "jobs/s": rate,
        "p50": statistics.median(ms),
        "p99": ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))],
        "claims": float(len(ms)),
    }


def drain_rate() -> tuple[int, float]:
    """The jobs succeeded, and the drain rate from the rows: the jobs that finished after
    every worker had started its first job, over the time from then to the last finish
    (so that several supervisors' start-ups, which take turns on the cores, are not
    counted as a slower drain). W9 uses it too."""
    from django.db import connection

    from jobqueue.models import Job

    table = Job._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table} WHERE status = 'succeeded'")
        [(done,)] = cursor.fetchall()
        cursor.execute(
            f"""
            WITH first AS (SELECT max(began) AS at FROM (
                SELECT min(started_at) AS began FROM {table} GROUP BY worker) AS each)
            SELECT count(*), extract(epoch FROM max(finished_at) - min(first.at))
            FROM {table}, first WHERE finished_at > first.at
            """
        )
        [(after, span)] = cursor.fetchall()
    connection.close()
    return int(done), float(after) / max(float(span or 0), 1e-3)


def _tail(path: str) -> str:
    return Path(path).read_text()[-3000:]


def _table(figures: dict[tuple[int, int], dict[str, float]], sizes: list[int], batch: int) -> Table:
    smallest = sizes[0]
    rows = []
    for size in sizes:
        for supervisors in SUPERVISORS:
            measured = figures[size, supervisors]
            alone = figures[size, 1]["jobs/s"]
            rows.append(
                [
                    f"{size:,}",
                    str(supervisors),
                    number(measured["jobs/s"], "jobs/s"),
                    ratio(measured["jobs/s"] / figures[smallest, supervisors]["jobs/s"]),
                    ratio(measured["jobs/s"] / alone),
                    number(measured["p50"], "ms"),
                    number(measured["p99"], "ms"),
                    f"{measured['claims']:,.0f}",
                ]
            )
    return Table(
        key="W10",
        title="a big backlog: drained by one runjobs supervisor at default settings, and by four",
        intro=(
            f"One run of each. The backlog is enqueued into a fresh table by `enqueue_many` "
            f"calls of {batch:,}, not analysed; the drain rate counts the jobs finished from "
            "the moment every worker had started one to the last finish; the claim's time is "
            "each `claim` statement as the worker waited for it."
        ),
        headings=[
            "backlog",
            "supervisors",
            "drain, jobs/s",
            f"share of {smallest:,}'s",
            "share of one supervisor's",
            "claim p50, ms",
            "claim p99, ms",
            "claims",
        ],
        rows=rows,
        left=2,
    )
