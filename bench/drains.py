"""What W9 and W10 share: worker processes draining a preloaded queue, watched through the
claim log their workers write, stopped once a time window has passed, and the drain rate
each system's rows give.

Every worker appends ``<pid> <seconds> <wall-clock start> <jobs>`` for each claim to the
file named by ``BENCH_CLAIM_LOG`` (jobqueue's through ``bench/backlog_settings.py``,
pgqueuer's through its driver). From it the bench learns when every worker has claimed
jobs, and the claim's p50 and p99.
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.systems.base import REPO
from bench.systems.peers import Peer
from bench.workload import BenchError

TIMEOUT = 3600  # s: a drain that takes longer than this has collapsed anyway
STOP_TIMEOUT = 60  # s for stopped workers to exit before they are killed
# Past the window, before the workers are stopped: the window is counted from the rows'
# moment every worker started, which the claim log sees a moment later.
MARGIN = 1.0
POLL = 0.2  # s between looks at the processes and the claim log


@dataclass(frozen=True)
class Claim:
    pid: int
    seconds: float
    at: float  # wall-clock time the claim was sent
    jobs: int


def claims(path: Path) -> list[Claim]:
    """The claims logged so far (a line still being written is left out)."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 4:
            found.append(Claim(int(fields[0]), float(fields[1]), float(fields[2]), int(fields[3])))
    return found


def all_started(logged: list[Claim], workers: int = 1) -> float | None:
    """The moment the last worker to claim jobs claimed its first, once at least ``workers``
    have (None before). A worker that never claimed a job (a small queue that the others
    drained first) does not count, as jobqueue's rows cannot count it either."""
    first: dict[int, float] = {}
    for claim in logged:
        if claim.jobs > 0:
            first.setdefault(claim.pid, claim.at)
    return max(first.values()) if first and len(first) >= workers else None


def percentiles(logged: list[Claim]) -> dict[str, float]:
    """The claims' p50 and p99 in ms, and how many there were."""
    ms = sorted(claim.seconds * 1000 for claim in logged)
    if not ms:
        raise BenchError("no claim was timed")
    return {
        "p50": statistics.median(ms),
        "p99": ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))],
        "claims": float(len(ms)),
    }


def run(
    commands: list[list[str]],
    env: dict[str, str],
    claim_log: Path,
    workers: int,
    window: float | None,
) -> bool:
    """Run ``commands`` at once until they exit, or, with a ``window``, until ``window`` s
    after every one of ``workers`` workers has claimed jobs, then stop them with SIGTERM;
    True if they were stopped. Raises BenchError if one failed."""
    with tempfile.TemporaryDirectory(prefix="jobqueue-drain-") as folder:
        logs = [(Path(folder) / f"process-{n}.log").open("w") for n in range(len(commands))]
        procs = [
            subprocess.Popen(
                command,
                env={**env, "BENCH_CLAIM_LOG": str(claim_log)},
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            for command, log in zip(commands, logs, strict=True)
        ]
        stopped = False
        deadline = time.monotonic() + TIMEOUT
        try:
            while any(proc.poll() is None for proc in procs):
                began = all_started(claims(claim_log), workers) if window else None
                if began is not None and window and time.time() > began + window + MARGIN:
                    stopped = True
                    break
                if time.monotonic() > deadline:
                    raise BenchError(f"the drain took longer than {TIMEOUT} s")
                time.sleep(POLL)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for log in logs:
                log.close()
        failed = [
            f"{commands[n][-3:]} exited with {proc.returncode}:\n"
            + Path(logs[n].name).read_text()[-3000:]
            for n, proc in enumerate(procs)
            if proc.returncode and not (stopped and proc.returncode == -signal.SIGTERM)
        ]
        if failed:
            raise BenchError("\n".join(failed))
    return stopped


def jobqueue_rate(window: float | None = None, since: float | None = None) -> dict[str, float]:
    """jobqueue's drain from its rows: the jobs that finished after every worker had started
    its first job (and within ``window`` s of that moment), over the time from then to the
    last of them; so that several workers' start-ups, which take turns on the cores, are
    not counted as a slower drain. With the jobs succeeded and failed in all.

    ``since`` (epoch seconds), when given, is that moment as the claim log saw it
    (:func:`all_started`), which the stop of a windowed drain was timed from; the earlier
    of the two moments counts. Each can only come late: the rows' moment is the latest
    first start of any worker id they name, which a worker that started its first job as
    a windowed drain was being stopped moves to the window's end, leaving almost nothing
    counted; the log's counts a claim that found nothing as one that claimed (jobqueue's
    claim returns one row then), which a worker that first looked once the others had
    drained a small queue moves past the last finish."""
    from django.db import connection

    from jobqueue.models import Job

    table = Job._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FILTER (WHERE status = 'succeeded'), "
            f"count(*) FILTER (WHERE status IN ('failed', 'abandoned', 'discarded')) FROM {table}"
        )
        [(done, failed)] = cursor.fetchall()
        cursor.execute(
            f"""
            WITH first AS (SELECT least(to_timestamp(%(since)s::float8), max(began)) AS at
                FROM (SELECT min(started_at) AS began FROM {table} GROUP BY worker) AS each),
            done AS (
                SELECT finished_at FROM {table}, first WHERE finished_at > first.at
                AND (%(window)s::float8 IS NULL
                     OR finished_at <= first.at + make_interval(secs => %(window)s::float8)))
            SELECT count(*), extract(epoch FROM max(finished_at) - (SELECT at FROM first))
            FROM done
            """,
            {"window": window, "since": since},
        )
        [(after, span)] = cursor.fetchall()
    connection.close()
    return {
        "jobs/s": float(after) / max(float(span or 0), 1e-3),
        "after": float(after),
        "succeeded": float(done),
        "failed": float(failed),
    }


def peer_rate(peer: Peer, logged: list[Claim], window: float | None) -> dict[str, float]:
    """A peer's drain from its rows (its driver's ``drained``): the jobs whose success was
    recorded after every worker had claimed jobs (the claim log's moment, on this host's
    clock, which is the server's), within ``window`` s, over the time to the last of them."""
    began = all_started(logged)
    if began is None:
        raise BenchError(f"no worker of {peer.name} claimed a job")
    reply = peer.call("drained", "--since", repr(began), "--window", repr(float(window or 0)))
    return {
        "jobs/s": reply["after"] / max(float(reply["span"]), 1e-3),
        "after": float(reply["after"]),
        "succeeded": float(reply["succeeded"]),
        "failed": float(reply["failed"]),
    }


def checked(rate: dict[str, float], jobs: int, stopped: bool, what: str) -> dict[str, float]:
    """``rate``, once every job has succeeded (or, for a drain stopped by its window, none
    has failed)."""
    if rate["failed"]:
        raise BenchError(f"{what}: {rate['failed']:,.0f} jobs failed")
    if not stopped and rate["succeeded"] != jobs:
        raise BenchError(f"{what}: {rate['succeeded']:,.0f} of {jobs:,} jobs succeeded")
    return rate
