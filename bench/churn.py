"""W8: sustained churn. Do the claim's cost, the drain rate and the tables' sizes hold
steady over a long run of enqueue and drain? ``python bench/run.py --only W8``.

For jobqueue (on the bench database) and then pgqueuer (on its own), one after the other:

1. The drain rate, briefly: ``--churn-probe-jobs`` jobs preloaded and drained by one burst
   worker at default settings (jobqueue's rate from the rows, as W10's; pgqueuer's from
   its log rows, first success to last).
2. For ``--churn-minutes``: one worker at default settings, serving (jobqueue's ``runjobs``
   supervisor with the default pool; pgqueuer's ``QueueManager`` in continuous mode with
   W3's default batch size), fed by a paced enqueuer in a process of its own at
   ``--churn-share`` of that rate: a batch every 50 ms (``enqueue_many``; pgqueuer's list
   enqueue), each bringing the count up to what the clock says is due.
3. Retention: finished jobs are kept one sample interval (``--churn-interval``, 60 s) and
   pruned once an interval by the bench: for jobqueue what ``manage.py jobs prune`` runs
   (``Store.prune``), since the worker's own prune chore runs hourly and no setting makes
   that shorter; for pgqueuer, which deletes a job when it is done, a ``DELETE`` of its
   ``pgqueuer_log`` rows older than the retention, as a user's cron job would. With
   ``--churn-vacuum`` the bench also runs ``VACUUM`` on the tables after each prune, in
   place of autovacuum (on a server where it is off).
4. Each interval: the jobs finished (jobqueue's ``finished_at``; pgqueuer's ``successful``
   log rows), the claim's time (jobqueue: each ``claim`` statement as the worker waits for
   it, ``bench/churn_settings.py``; pgqueuer: each ``Queries.dequeue`` call, timed in its
   driver), the wait from enqueue to claim (jobqueue: ``started_at - enqueued_at`` of the
   jobs finished; pgqueuer: the time each dequeued job waited since its ``created``), the
   pending jobs, the table's dead rows and autovacuum count, and ``pg_relation_size`` of
   the jobs table and of each of its indexes (pgqueuer: of ``pgqueuer`` and its indexes,
   and of ``pgqueuer_log``, which holds its history).

A job whose finishing statement straddles a sample is counted in no interval (a few a
minute at most); the check at the end counts every job: the jobs pruned plus the jobs
left must be every job enqueued, and none may be left unfinished. PostgreSQL only.
"""

from __future__ import annotations

import json
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.churn_report import Interval, Run, tables
from bench.churners import CHURNERS, NO_CLAIM, Churner
from bench.report import Table, progress
from bench.systems.base import System
from bench.workload import BenchError

STARTUP = 3.0  # s from the enqueuer's spawn to its first batch: its imports are not paced
STOP_TIMEOUT = 60.0  # s a worker has to exit on SIGTERM


@dataclass(frozen=True)
class Plan:
    """W8's options: ``--churn-minutes``, ``--churn-share`` (or ``--churn-rate``),
    ``--churn-interval``, ``--churn-probe-jobs``, ``--churn-vacuum``."""

    minutes: float
    share: float  # the enqueue rate, as a share of the probe's drain rate
    fixed_rate: float | None  # or this rate, jobs/s
    interval: float  # s per sample; finished jobs are kept this long
    probe_jobs: int
    vacuum: bool


def churn(systems: list[System], plan: Plan) -> list[Table]:
    """W8 for each of ``systems`` that it knows (jobqueue, pgqueuer), one after the other;
    a table per system and the summaries."""
    runs = []
    for system in systems:
        if system.name not in CHURNERS:
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-w8-{system.name}-") as folder:
            churner = CHURNERS[system.name](system, Path(folder))
            runs.append(_run(churner, plan))
    return tables(runs, plan.vacuum)


def _sleep_until(
    at: float,
    worker: subprocess.Popen[bytes],
    folder: Path,
    enqueuer: subprocess.Popen[str] | None = None,
) -> None:
    """Sleep until the wall-clock time ``at``; raise if the worker or the enqueuer failed."""
    while (delay := at - time.time()) > 0:
        if worker.poll() is not None:
            log = (folder / "worker.log").read_text()[-3000:]
            raise BenchError(f"the worker exited with {worker.returncode}:\n{log}")
        if enqueuer is not None and enqueuer.poll():
            raise BenchError(f"the enqueuer exited with {enqueuer.returncode}")
        time.sleep(min(delay, 0.5))


def _wait(what: str, done: Callable[[], bool], timeout: float, worker: Any, folder: Path) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise BenchError(f"W8: timed out after {timeout:.0f} s waiting for {what}")
        _sleep_until(time.time() + 0.1, worker, folder)


def _run(churner: Churner, plan: Plan) -> Run:
    name, interval = churner.system.name, plan.interval
    probe_rate = churner.probe(plan.probe_jobs)
    rate = plan.fixed_rate or plan.share * probe_rate
    count = max(1, round(plan.minutes * 60 / interval))
    seconds = count * interval
    progress(
        f"W8 [{name}]: drained {plan.probe_jobs:,} jobs at {probe_rate:,.0f} jobs/s; churning at "
        f"{rate:,.0f} jobs/s for {seconds:g} s, sampled every {interval:g} s"
    )
    claim_log = churner.folder / "claims"
    relations = churner.relations()
    worker = churner.worker(claim_log, retention=interval)
    enqueuer: subprocess.Popen[str] | None = None
    intervals: list[Interval] = []
    pruned = 0
    try:
        churner.enqueue_one()  # the worker is serving once it has run this one
        _wait("the first job", lambda: churner.unfinished() == 0, 120, worker, churner.folder)
        start_at = time.time() + STARTUP
        enqueuer = churner.enqueuer(rate, seconds, start_at)
        _sleep_until(start_at, worker, churner.folder, enqueuer)
        start_sizes = churner.sizes(relations)
        for k in range(1, count + 1):
            end = start_at + k * interval
            _sleep_until(end, worker, churner.folder, enqueuer)
            finished, quantiles = churner.finished(end - interval, end)
            dead, autovacuums = churner.table_stats()
            scan = churner.scan()
            intervals.append(
                Interval(
                    end=end,
                    finished=finished,
                    pending=churner.pending(),
                    dead=dead,
                    autovacuums=autovacuums,
                    sizes=churner.sizes(relations),
                    wait_quantiles=quantiles,
                    scan=scan,
                )
            )
            began = time.perf_counter()
            pruned += churner.prune(interval)
            if plan.vacuum:
                churner.vacuum()
            last = intervals[-1]
            last.prune_seconds = time.perf_counter() - began
            progress(
                f"W8 [{name}] {k * interval / 60:g} min: {last.finished / interval:,.0f} "
                f"jobs/s, {last.pending:,} pending, {last.dead:,} dead rows"
            )
        out, _ = enqueuer.communicate(timeout=max(60.0, seconds))
        if enqueuer.returncode:
            raise BenchError(f"the enqueuer exited with {enqueuer.returncode}")
        reply: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        backlog = churner.unfinished()
        _wait(
            "the queue to empty",
            lambda: churner.unfinished() == 0,
            max(120.0, 2 * backlog / max(rate, 1.0)),
            worker,
            churner.folder,
        )
    finally:
        if enqueuer is not None and enqueuer.poll() is None:
            enqueuer.kill()
            enqueuer.wait()
        _stop(worker)
    expected = int(reply["enqueued"]) + 1
    done = pruned + churner.succeeded_left()
    failed = churner.failed()
    if done != expected or failed:
        raise BenchError(f"W8 [{name}]: {done:,} of {expected:,} jobs succeeded, {failed} failed")
    for at, claimed, waits in churner.claims(claim_log):
        k = int((at - start_at) // interval)
        if 0 <= k < count:
            if claimed != NO_CLAIM:
                intervals[k].claims.append(claimed)
            intervals[k].waits.extend(waits)
    settings = churner.settings()
    reloptions = churner.reloptions()
    churner.reset()
    return Run(
        system=name,
        probe_rate=probe_rate,
        rate=rate,
        interval=interval,
        enqueuer=reply,
        start_sizes=start_sizes,
        relations=relations,
        table=churner.table,
        history=churner.history,
        intervals=intervals,
        pruned=pruned,
        settings=f"{settings}; the table's storage options: {reloptions}",
        fixed=bool(plan.fixed_rate),
    )


def _stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
