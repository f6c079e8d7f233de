"""W9: does the drain hold up with more worker processes? ``python bench/run.py --only W9``.

For each N of ``--processes`` (1, 2 and 4), for jobqueue and for pgqueuer (when it is in
``--systems``): ``--processes-jobs`` (10,000) no-op jobs enqueued in bulk and analysed,
then drained by one ``runjobs --burst`` supervisor whose default pool has ``processes`` =
N (``bench/processes_settings.py``), the rest of the pool as the example project has it;
pgqueuer's by N processes of its worker in drain mode (batch_size 10, W3's default),
started and waited for by its driver's ``workers`` command, as pgqueuer has no supervisor.
Each N is repeated ``--repeat`` times.

The drain rate is from the rows, as W10's (``bench/drains.py``): the jobs that finished
after every worker had started its first job, over the time from that moment to the last
finish, so that N start-ups taking turns on the cores are not counted as a slower drain
(pgqueuer's log names no worker: its moment is the last worker's first dequeue, from the
claim log its driver writes). CPU per job: the client's is the supervisor's (or the
driver's) and its workers' (``/proc/<pid>/stat`` of that process once it has exited and
before the bench reaps it, which counts the children it reaped), the server's every local
``postgres`` process's, as W11 reads it; both over the whole run, start-up and exit
included. PostgreSQL only.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import drains, procfs
from bench.report import Table, number, progress, ratio, spread
from bench.systems.base import REPO
from bench.systems.peers import Peer
from bench.workload import BenchError

BATCH = 10_000  # jobs per enqueue_many call
TIMEOUT = 1800  # s
# A backend's CPU time moves into the postmaster's count of its children once the postmaster
# has reaped it, a moment after its connection closes.
SETTLE = 0.2


JOBQUEUE = "jobqueue"
Runs = dict[tuple[str, int], list[dict[str, float | None]]]


def processes(jobs: int, counts: list[int], repeat: int, peers: list[Peer]) -> Table:
    """Each number of processes drains ``jobs``, ``repeat`` times, for jobqueue and each of
    ``peers``; the W9 table."""
    names = [JOBQUEUE, *(peer.name for peer in peers)]
    runs: Runs = {(name, n): [] for name in names for n in counts}
    for run in range(1, repeat + 1):
        for n in counts:  # interleaved, so a noisy moment hits every N and system
            for peer in [None, *peers]:
                name = peer.name if peer else JOBQUEUE
                measured = _measure(jobs, n) if peer is None else _measure_peer(peer, jobs, n)
                runs[name, n].append(measured)
                progress(
                    f"W9 [{name}, {n} process(es)] run {run}: {measured['jobs/s']:,.0f} "
                    f"jobs/s, client {measured['client']:.0f} us/job"
                )
    return _table(runs, names, counts, jobs, repeat)


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
    rate = drains.checked(drains.jobqueue_rate(), jobs, False, f"jobqueue, {count} processes")
    return _per_job(rate["jobs/s"], client, server_before, server_after, jobs)


def _measure_peer(peer: Peer, jobs: int, count: int) -> dict[str, float | None]:
    peer.call("reset")
    peer.call("enqueue", "--jobs", str(jobs), "--bulk", "--batch", str(BATCH), "--analyze")
    with tempfile.TemporaryDirectory(prefix="jobqueue-w9-") as folder:
        claim_log = Path(folder) / "claims"
        env = {**peer.worker_env(), "BENCH_CLAIM_LOG": str(claim_log)}
        command = peer.command("workers", "--processes", str(count), "--burst")
        with tempfile.TemporaryFile("w+") as log:
            server_before = procfs.postgres_cpu()
            proc = subprocess.Popen(
                command, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
            )
            client = _cpu_at_exit(proc)
            time.sleep(SETTLE)
            server_after = procfs.postgres_cpu()
            if proc.returncode:
                log.seek(0)
                raise BenchError(
                    f"{peer.name}'s workers exited with {proc.returncode}:\n{log.read()[-3000:]}"
                )
        logged = drains.claims(claim_log)
    rate = drains.peer_rate(peer, logged, None)
    drains.checked(rate, jobs, False, f"{peer.name}, {count} processes")
    return _per_job(rate["jobs/s"], client, server_before, server_after, jobs)


def _per_job(
    rate: float, client: float, server_before: float | None, server_after: float | None, jobs: int
) -> dict[str, float | None]:
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


def _table(runs: Runs, names: list[str], counts: list[int], jobs: int, repeat: int) -> Table:
    def median(name: str, n: int, key: str) -> float | None:
        values = [float(v) for r in runs[name, n] if (v := r[key]) is not None]
        return statistics.median(values) if values else None

    several = len(names) > 1  # jobqueue alone: the table it has always had
    rows = []
    for name in names:
        first = median(name, counts[0], "jobs/s") or 1.0
        for n in counts:
            rates = [float(r["jobs/s"] or 0) for r in runs[name, n]]
            server = [float(r["server"]) for r in runs[name, n] if r["server"] is not None]
            rows.append(
                [
                    *([name] if several else []),
                    str(n),
                    spread(rates, "jobs/s"),
                    ratio((median(name, n, "jobs/s") or 0) / first),
                    number(median(name, n, "client") or 0, "us/job"),
                    number(statistics.median(server), "us/job") if server else "n/a",
                ]
            )
    return Table(
        key="W9",
        title=(
            "more processes: jobqueue's one runjobs supervisor with N processes in its "
            "default pool, pgqueuer's N worker processes"
            if several
            else "more processes: one runjobs supervisor, the default pool with N processes"
        ),
        intro=(
            f"{jobs:,} no-op jobs per drain, {repeat} run(s) of each N, median (min-max). "
            "The drain rate counts the jobs finished from the moment every worker had "
            "started one to the last finish; CPU per job (median) is over the whole run, "
            "the client's the supervisor's and its workers'"
            + (" (pgqueuer's: its driver's and its N workers', batch_size 10)" if several else "")
            + ", the server's every local postgres process's (other databases' work on the "
            "server included)."
        ),
        headings=[
            *(["system"] if several else []),
            "processes",
            "drain, jobs/s",
            f"share of {counts[0]}'s",
            "client CPU us/job",
            "server CPU us/job",
        ],
        rows=rows,
        left=2 if several else 1,
        after=(
            []
            if several
            else ["jobqueue alone: `--systems` with pgqueuer adds its N worker processes."]
        ),
    )
