"""W4 and W5: ONE worker process serving (not in burst mode), idle between jobs.

W4 enqueues stamp jobs one by one, ``interval`` apart, each committed on its own; the
handler appends ``n wall-clock-time`` to a file when it starts, and the latency of job n is
that time minus the time its enqueue's commit returned. W5 lets the workers of every system
sit idle at the same time, each on its own database, and counts the statements the server
ran for each database in a window (see :mod:`bench.serverlog`).
"""

from __future__ import annotations

import contextlib
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from django.db import connections

from bench.report import Row
from bench.serverlog import MariaDBLog, ServerLog
from bench.systems.base import REPO, System
from bench.workload import BenchError, Measure, applies

WARM_UP = -1  # the stamp job each worker runs first, so that it is up and idle afterwards


@contextlib.contextmanager
def serving(system: System, stamps: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One worker of ``system`` with its default settings, until SIGTERM at the end."""
    env = {**system.worker_env(), "BENCH_STAMP_FILE": str(stamps)}
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            system.worker_command("default", burst=False),
            env=env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        try:
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def read_stamps(stamps: Path) -> dict[int, float]:
    if not stamps.exists():
        return {}
    pairs = (line.split() for line in stamps.read_text().splitlines() if line.strip())
    return {int(n): float(t) for n, t in pairs}


def wait_for(
    stamps: Path, wanted: set[int], timeout: float, poll: float = 0.05
) -> dict[int, float]:
    deadline = time.monotonic() + timeout
    while True:
        seen = read_stamps(stamps)
        if wanted <= seen.keys():
            return seen
        if time.monotonic() > deadline:
            missing = sorted(wanted - seen.keys())
            raise BenchError(f"{len(missing)} job(s) never started in {timeout:g} s: {missing[:5]}")
        time.sleep(poll)


def warm_up(system: System, stamps: Path) -> None:
    """Run one job, so that the worker is up; the time it takes is not measured."""
    system.stamp(WARM_UP, 1, 0.0)
    wait_for(stamps, {WARM_UP}, timeout=120)


def percentile(values: list[float], pct: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def latency(jobs: int, interval: float, settle: float) -> Measure:
    rows = tuple(
        Row(
            "W4",
            f"enqueue→start latency, {jobs} jobs {interval * 1000:g} ms apart, {stat}",
            "ms",
            False,
        )
        for stat in ("p50", "p95", "p99", "max")
    )

    def measure(system: System) -> list[float]:
        system.reset()
        with tempfile.TemporaryDirectory() as tmp:
            stamps = Path(tmp) / "stamps"
            with serving(system, stamps):
                warm_up(system, stamps)
                time.sleep(settle)  # idle
                committed = system.stamp(0, jobs, interval)
                started = wait_for(stamps, set(range(jobs)), timeout=120)
        ms = [(started[n] - committed[n]) * 1000 for n in range(jobs)]
        return [percentile(ms, 50), percentile(ms, 95), percentile(ms, 99), max(ms)]

    return Measure(rows, measure, lambda system: applies(system, "W4"))


IDLE_ROW = Row("W5", "statements an idle worker sends, per day", "stmt/day", False)


def idle_cost(
    systems: list[System], log: ServerLog | MariaDBLog, seconds: float, windows: int, settle: float
) -> dict[str, list[float]]:
    """Statements per day for each system's idle worker: ``windows`` consecutive windows of
    ``seconds`` each, after ``settle`` seconds of idling, every worker idling at once."""
    systems = [s for s in systems if applies(s, "W5")]
    per_day: dict[str, list[float]] = {s.name: [] for s in systems}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        for system in systems:
            system.reset()
            log.enable(system.database())
            stack.callback(log.disable, system.database())
        connections.close_all()
        workers = []
        for system in systems:
            stamps = Path(tmp) / f"{system.name}.stamps"
            workers.append(stack.enter_context(serving(system, stamps)))
            warm_up(system, stamps)
        connections.close_all()  # the bench's own connection stays out of the windows
        time.sleep(settle)
        for _ in range(windows):
            offset = log.offset()
            time.sleep(seconds)
            counts = log.count(offset)
            for system, worker in zip(systems, workers, strict=True):
                if worker.poll() is not None:
                    raise BenchError(f"{system.name}'s idle worker exited with {worker.returncode}")
            for system in systems:
                per_day[system.name].append(counts[system.database()] * 86400 / seconds)
    return per_day
