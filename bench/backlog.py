"""W10: does a big backlog slow the drain down? ``python bench/run.py --only W10``.

For each backlog in ``--backlog-sizes`` (10,000, 100,000 and 1,000,000), for jobqueue and
for pgqueuer (when it is in ``--systems``): a fresh job table (jobqueue's dropped and
migrated again, pgqueuer's schema dropped and installed again, so that it has no
statistics yet, as a table has right after a campaign), the backlog enqueued as a
campaign would, bulk calls of ``--backlog-batch`` (10,000: ``enqueue_many``, a list to
pgqueuer's ``enqueue``), then drained by one worker and by four: one ``runjobs --burst``
supervisor at default settings and four at once; one pgqueuer worker process (its drain
mode, batch_size 10 as W3's default row) and four. Nothing is analysed or vacuumed by the
bench: what the drain meets is what a user's would.

The drain rate is from the rows: the jobs that finished after every worker had started its
first job, within ``--backlog-window`` s (60) of that moment, over the time from that
moment to the last of them; the workers are then stopped (SIGTERM), so that a slow drain
of a million jobs takes a minute, not hours, and the start-ups and exits are not in it. A
drain that ends within the window is counted whole. The same rule for both systems.
jobqueue's moment is from its rows (``started_at``, ``worker``); pgqueuer's log has no
worker, so its moment is when the last worker process's first dequeue returned jobs, from
the claim log. The claim's time is measured in the workers (``bench/drains.py``): each
claim statement as the worker waited for it, round trip included; its p50 and p99 over
every claim of the drain. PostgreSQL only.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from bench import drains
from bench.report import Table, number, progress, ratio
from bench.systems.base import REPO
from bench.systems.peers import Peer

WORKERS = (1, 4)
JOBQUEUE = "jobqueue"


def backlog(sizes: list[int], batch: int, window: float, peers: list[Peer]) -> Table:
    """Each backlog drained by one worker and by four, for jobqueue and each of ``peers``;
    the W10 table."""
    names = [JOBQUEUE, *(peer.name for peer in peers)]
    figures: dict[tuple[str, int, int], dict[str, float]] = {}
    for size in sizes:
        for workers in WORKERS:
            for peer in [None, *peers]:  # interleaved, so a noisy moment hits both
                name = peer.name if peer else JOBQUEUE
                if peer is None:
                    enqueue_s = _jobqueue_backlog(size, batch)
                    measured = _jobqueue_drain(size, workers, window)
                else:
                    enqueue_s = _peer_backlog(peer, size, batch)
                    measured = _peer_drain(peer, size, workers, window)
                figures[name, size, workers] = measured
                progress(
                    f"W10 [{name}, {size:,} jobs, {workers} worker(s)]: enqueued in "
                    f"{enqueue_s:.1f} s, drained at {measured['jobs/s']:,.0f} jobs/s "
                    f"({measured['after']:,.0f} jobs counted), claim p50 "
                    f"{measured['p50']:.1f} ms, p99 {measured['p99']:.1f} ms"
                )
    return _table(figures, names, sizes, batch, window)


def _jobqueue_backlog(size: int, batch: int) -> float:
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


def _jobqueue_drain(size: int, supervisors: int, window: float) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "testproject")]),
        "DJANGO_SETTINGS_MODULE": "bench.backlog_settings",
    }
    command = [sys.executable, "-m", "django", "runjobs", "--burst"]
    with tempfile.TemporaryDirectory(prefix="jobqueue-w10-") as folder:
        claim_log = Path(folder) / "claims"
        stopped = drains.run([command] * supervisors, env, claim_log, supervisors, window)
        logged = drains.claims(claim_log)
    rate = drains.jobqueue_rate(window, since=drains.all_started(logged, supervisors))
    what = f"jobqueue, {size:,} jobs, {supervisors} supervisor(s)"
    return {**drains.checked(rate, size, stopped, what), **drains.percentiles(logged)}


def _peer_backlog(peer: Peer, size: int, batch: int) -> float:
    """The peer's schema dropped and installed again, holding ``size`` due jobs; seconds the
    enqueue took (timed in the driver)."""
    peer.call("setup")
    options = ["--jobs", str(size), "--bulk", "--batch", str(batch)]
    return float(peer.call("enqueue", *options)["seconds"])


def _peer_drain(peer: Peer, size: int, processes: int, window: float) -> dict[str, float]:
    command = peer.command("workers", "--processes", str(processes), "--burst")
    with tempfile.TemporaryDirectory(prefix="jobqueue-w10-") as folder:
        claim_log = Path(folder) / "claims"
        stopped = drains.run([command], peer.worker_env(), claim_log, processes, window)
        logged = drains.claims(claim_log)
    rate = drains.peer_rate(peer, logged, window)
    what = f"{peer.name}, {size:,} jobs, {processes} process(es)"
    return {**drains.checked(rate, size, stopped, what), **drains.percentiles(logged)}


def _table(
    figures: dict[tuple[str, int, int], dict[str, float]],
    names: list[str],
    sizes: list[int],
    batch: int,
    window: float,
) -> Table:
    smallest = sizes[0]
    several = len(names) > 1  # jobqueue alone: the table it has always had
    rows = []
    for name in names:
        for size in sizes:
            for workers in WORKERS:
                measured = figures[name, size, workers]
                alone = figures[name, size, 1]["jobs/s"]
                rows.append(
                    [
                        *([name] if several else []),
                        f"{size:,}",
                        str(workers),
                        number(measured["jobs/s"], "jobs/s"),
                        _share(measured["jobs/s"], figures[name, smallest, workers]["jobs/s"]),
                        _share(measured["jobs/s"], alone),
                        f"{measured['after']:,.0f}",
                        number(measured["p50"], "ms"),
                        number(measured["p99"], "ms"),
                        f"{measured['claims']:,.0f}",
                    ]
                )
    workers_are = (
        "jobqueue's workers are `runjobs --burst` supervisors at default settings (one "
        "worker process of 4 slots each), pgqueuer's are worker processes (its drain mode, "
        "batch_size 10, W3's default); "
        if several
        else ""
    )
    return Table(
        key="W10",
        title=(
            "a big backlog: drained by one worker and by four, jobqueue and pgqueuer"
            if several
            else "a big backlog: drained by one runjobs supervisor at default settings, and by four"
        ),
        intro=(
            f"One run of each. The backlog is enqueued into a fresh table by bulk calls of "
            f"{batch:,}, not analysed; {workers_are}the drain rate counts the jobs finished "
            f"from the moment every worker had started one, for at most {window:g} s (then "
            "the workers are stopped: a backlog is not drained whole unless it drains within "
            "that), to the last of them; the claim's time is each claim statement as the "
            "worker waited for it."
        ),
        headings=[
            *(["system"] if several else []),
            "backlog",
            "workers" if several else "supervisors",
            "drain, jobs/s",
            f"share of {smallest:,}'s",
            "share of one worker's" if several else "share of one supervisor's",
            "jobs counted",
            "claim p50, ms",
            "claim p99, ms",
            "claims",
        ],
        rows=rows,
        left=3 if several else 2,
    )


def _share(rate: float, of: float) -> str:
    """``rate`` as a share of ``of``; n/a if ``of`` counted no job (a drain stopped before
    anything was counted must not end the run)."""
    return ratio(rate / of) if of else "n/a"
