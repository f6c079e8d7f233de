"""W9: does the drain hold up with more worker processes? ``python bench/run.py --only W9``.

For each N of ``--processes`` (1, 2 and 4): ``--processes-jobs`` (10,000) no-op jobs
enqueued in bulk and analysed, then drained by one ``runjobs --burst`` supervisor whose
default pool has ``processes`` = N (``bench/processes_settings.py``), the rest of the pool
as the example project has it. Each N is repeated ``--repeat`` times.

The drain rate is from the rows, as W10's: the jobs that finished after every worker had
started its first job, over the time from that moment to the last finish, so that N
start-ups taking turns on the cores are not counted as a slower drain. CPU per job: the
client's is the supervisor's and its workers' (``/proc/<pid>/stat`` of the supervisor
once it has exited and before the bench reaps it, which counts the children it reaped),
the server's every local ``postgres`` process's, as W11 reads it; both over the whole
run, start-up and exit included. jobqueue alone (the peers' drivers run one worker per
process, and the bench does not start several of them yet). PostgreSQL only.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench import procfs
from bench.backlog import drain_rate
from bench.report import Table, number, progress, ratio, spread
from bench.systems.base import REPO
from bench.workloads import BenchError

BATCH = 10_000  # jobs per enqueue_many call
TIMEOUT = 1800  # s
# A backend's CPU time moves into the postmaster's count of its children once the postmaster
# has reaped it, a moment after its connection closes.
SETTLE = 0.2


def processes(jobs: int, counts: list[int], repeat: int) -> Table:
    """Each number of processes drains ``jobs``, ``repeat`` times; the W9 table."""
    runs: dict[int, list[dict[str, float | None]]] = {n: [] for n in counts}
    for run in range(1, repeat + 1):
        for n in counts:  # interleaved, so a noisy moment hits every N
            measured = _measure(jobs, n)
            runs[n].append(measured)
            progress(
                f"W9 [{n} process(es)] run {run}: {measured['jobs/s']:,.0f} jobs/s, "
                f"client {measured['client']:.0f} us/job"
            )
    return _table(runs, counts, jobs, repeat)


def _load(jobs: int) -> None:
    from django.db import connection

    from bench.benchapp.tasks import noop

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_job, jobqueue_worker")
    for first in range(0, jobs, BATCH):
        noop.enqueue_many([(n,) for n in range(first, min(first + BATCH, jobs))])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
    connection.close()  # nothing of the bench's stays open beside the drain


def _measure(jobs: int, count: int) -> dict[str, float | None]:
    _load(jobs)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "testproject")]),
        "DJANGO_SETTINGS_MODULE": "bench.processes_settings",
        "BENCH_PROCESSES": str(count),
    }
    with tempfile.TemporaryFile("w+") as log:
        server_before = procfs.postgres_cpu()
        proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runjobs", "--burst"],
            env=env,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        client = _cpu_at_exit(proc)
        time.sleep(SETTLE)
        server_after = procfs.postgres_cpu()
        if proc.returncode:
            log.seek(0)
            raise BenchError(f"the supervisor exited with {proc.returncode}:\n{log.read()[-3000:]}")
    done, rate = drain_rate()
    if done != jobs:
        raise BenchError(f"{done:,} of {jobs:,} jobs succeeded after the drain")
    server = (
        None
        if server_before is None or server_after is None
        else (server_after - server_before) / jobs * 1e6
    )
    return {"jobs/s": rate, "client": client / jobs * 1e6, "server": server}


def _cpu_at_exit(proc: subprocess.Popen[bytes]) -> float:
    """The CPU seconds of ``proc`` and the children it reaped, read once it has exited but
    before it is reaped (``WNOWAIT``), so that nothing else is counted with it."""
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    seconds = procfs.cpu_seconds(proc.pid)
    proc.wait(timeout=TIMEOUT)
    if seconds is None:
        raise BenchError("the supervisor was reaped before its CPU time was read")
    return seconds


def _table(
    runs: dict[int, list[dict[str, float | None]]], counts: list[int], jobs: int, repeat: int
) -> Table:
    def median(n: int, key: str) -> float | None:
        values = [r[key] for r in runs[n] if r[key] is not None]
        return statistics.median(values) if values else None

    first = median(counts[0], "jobs/s") or 1.0
    rows = []
    for n in counts:
        rates = [float(r["jobs/s"] or 0) for r in runs[n]]
        server = [float(r["server"]) for r in runs[n] if r["server"] is not None]
        rows.append(
            [
                str(n),
                spread(rates, "jobs/s"),
                ratio((median(n, "jobs/s") or 0) / first),
                number(median(n, "client") or 0, "us/job"),
                number(statistics.median(server), "us/job") if server else "n/a",
            ]
        )
    return Table(
        key="W9",
        title="more processes: one runjobs supervisor, the default pool with N processes",
        intro=(
            f"{jobs:,} no-op jobs per drain, {repeat} run(s) of each N, median (min-max). "
            "The drain rate counts the jobs finished from the moment every worker had "
            "started one to the last finish; CPU per job (median) is over the whole run, "
            "the client's the supervisor's and its workers', the server's every local "
            "postgres process's (other databases' work on the server included)."
        ),
        headings=[
            "processes",
            "drain, jobs/s",
            f"share of {counts[0]}'s",
            "client CPU us/job",
            "server CPU us/job",
        ],
        rows=rows,
        after=["jobqueue alone: the bench does not yet run several workers of a peer."],
    )
