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

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.report import Table, number, progress, ratio
from bench.systems.base import REPO, System
from bench.workload import BenchError

TICK = 0.05  # s between the enqueuer's batches
STARTUP = 3.0  # s from the enqueuer's spawn to its first batch: its imports are not paced
WINDOW = 300.0  # s: the summary's first and last windows, on runs of 10 of them or more
GOAL = 0.15  # the last window within 15% of the first
STOP_TIMEOUT = 60.0  # s a worker has to exit on SIGTERM
SYSTEMS = ("jobqueue", "pgqueuer")
NO_CLAIM = -1.0  # a line of waits only, not a timed claim


@dataclass
class Interval:
    """What one sample interval measured; ``end`` is wall-clock time."""

    end: float
    finished: int
    pending: int
    dead: int
    autovacuums: int
    sizes: dict[str, int]
    waits: list[float] = field(default_factory=list)  # s from enqueue to claim
    wait_quantiles: tuple[float, float] | None = None  # from the rows (jobqueue)
    claims: list[float] = field(default_factory=list)  # s each
    prune_seconds: float = 0.0  # the bench's prune (and VACUUM) after the sample
    scan: tuple[int, float] | None = None  # the claim's index scan: buffers, ms (jobqueue)


@dataclass
class Run:
    system: str
    probe_rate: float
    rate: float
    interval: float
    enqueuer: dict[str, Any]
    start_sizes: dict[str, int]
    relations: list[str]
    intervals: list[Interval]
    pruned: int
    settings: str
    fixed: bool = False  # the rate was --churn-rate's, not a share of the drain rate


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Churner(ABC):
    """One system's part of W8: its statements, its worker and its enqueuer."""

    table: str  # the jobs table
    history: tuple[str, ...] = ()  # more tables whose sizes are sampled
    vacuumed: tuple[str, ...] = ()

    def __init__(self, system: System, folder: Path) -> None:
        self.system = system
        self.folder = folder

    @abstractmethod
    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` on the system's database, in autocommit; its rows."""

    def relations(self) -> list[str]:
        """The jobs table, then its indexes by name, then the history tables."""
        indexes = self.rows(
            "SELECT indexrelid::regclass::text FROM pg_index "
            "WHERE indrelid = %s::regclass ORDER BY 1",
            [self.table],
        )
        return [self.table, *(name for (name,) in indexes), *self.history]

    def sizes(self, relations: list[str]) -> dict[str, int]:
        found = self.rows(
            "SELECT relname, pg_relation_size(oid) FROM pg_class WHERE relname = ANY(%s)",
            [relations],
        )
        return {name: int(size) for name, size in found}

    def table_stats(self) -> tuple[int, int]:
        """The jobs table's dead rows and autovacuum count, from the statistics collector."""
        found = self.rows(
            "SELECT n_dead_tup, autovacuum_count FROM pg_stat_user_tables WHERE relname = %s",
            [self.table],
        )
        return (int(found[0][0]), int(found[0][1])) if found else (0, 0)

    def vacuum(self) -> None:
        for table in self.vacuumed:
            self.rows(f"VACUUM {table}")

    def reloptions(self) -> str:
        found = self.rows("SELECT reloptions FROM pg_class WHERE relname = %s", [self.table])
        options = found[0][0] if found else None
        return ", ".join(options) if options else "none"

    def scan(self) -> tuple[int, float] | None:
        """What a look for work costs the server: buffers and ms of the claim's scan of its
        index, where the bench can run it without taking jobs (jobqueue's)."""
        return None

    @abstractmethod
    def reset(self) -> None: ...

    @abstractmethod
    def probe(self, jobs: int) -> float:
        """Drain ``jobs`` preloaded jobs with one burst worker at default settings; jobs/s."""

    @abstractmethod
    def worker(self, claim_log: Path, retention: float) -> subprocess.Popen[bytes]: ...

    @abstractmethod
    def enqueuer(self, rate: float, seconds: float, start_at: float) -> subprocess.Popen[str]:
        """The paced enqueuer, started; it prints one JSON line (``paced_batches``)."""

    @abstractmethod
    def enqueue_one(self) -> None: ...

    @abstractmethod
    def unfinished(self) -> int: ...

    @abstractmethod
    def pending(self) -> int: ...

    @abstractmethod
    def finished(self, start: float, end: float) -> tuple[int, tuple[float, float] | None]:
        """Jobs finished from ``start`` to ``end`` (wall clock), and the p50 and p99 of their
        wait from enqueue to claim if the rows give it."""

    @abstractmethod
    def prune(self, retention: float) -> int:
        """Delete finished rows older than ``retention`` s; the successes deleted."""

    @abstractmethod
    def succeeded_left(self) -> int: ...

    @abstractmethod
    def failed(self) -> int: ...

    def claims(self, claim_log: Path) -> list[tuple[float, float, list[float]]]:
        """Each timed claim: wall clock at its end, seconds, the waits of the jobs it got.
        The claim log is W9's and W10's (:func:`bench.drains.claims` reads it)."""
        from bench import drains

        return [(c.at + c.seconds, c.seconds, []) for c in drains.claims(claim_log)]

    @abstractmethod
    def settings(self) -> str:
        """The worker's settings, for the report."""

    def _burst(self, command: list[str], env: dict[str, str]) -> None:
        log = self.folder / "probe.log"
        with log.open("w") as out:
            code = subprocess.run(
                command, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, check=False
            ).returncode
        if code:
            raise BenchError(f"the probe's worker exited with {code}:\n{log.read_text()[-3000:]}")


class JobqueueChurner(Churner):
    table = "jobqueue_job"
    vacuumed = ("jobqueue_job",)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall()) if cursor.description else []

    def reset(self) -> None:
        self.system.reset()

    def scan(self) -> tuple[int, float] | None:
        # The `due` part of jobqueue's claim statement (jobqueue/sql/postgresql.sql) for the
        # default pool's 4 slots and 64 ahead, without FOR UPDATE: it reads what a claim
        # reads, in the order of the partial index jobqueue_job_claim, and locks nothing.
        [(plan,)] = self.rows(
            """
            EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
            SELECT id FROM jobqueue_job
            WHERE status = 'pending' AND run_at <= now()
            ORDER BY priority DESC, run_at, id LIMIT 68
            """
        )
        found = plan if isinstance(plan, list) else json.loads(plan)
        top = found[0]["Plan"]
        buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
        return buffers, float(found[0]["Execution Time"])

    def probe(self, jobs: int) -> float:
        from bench.drains import jobqueue_rate

        self.reset()
        self.system.preload(jobs)
        self._burst(self.system.worker_command("default"), self.system.worker_env())
        measured = jobqueue_rate()
        done, rate = int(measured["succeeded"]), measured["jobs/s"]
        if done != jobs:
            raise BenchError(f"the probe's drain finished {done:,} of {jobs:,} jobs")
        self.reset()
        return rate

    def worker(self, claim_log: Path, retention: float) -> subprocess.Popen[bytes]:
        return _serve(
            self.system,
            self.folder,
            {
                "DJANGO_SETTINGS_MODULE": "bench.churn_settings",
                "BENCH_CLAIM_LOG": str(claim_log),
                "BENCH_CHURN_RETENTION": str(retention),
            },
        )

    def enqueuer(self, rate: float, seconds: float, start_at: float) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "bench.churn", *_enqueuer_options(rate, seconds, start_at)]
        return subprocess.Popen(
            command, env=self.system.worker_env(), cwd=REPO, stdout=subprocess.PIPE, text=True
        )

    def enqueue_one(self) -> None:
        self.system.enqueue_one_by_one(1)

    def unfinished(self) -> int:
        from jobqueue import states

        [(count,)] = self.rows(
            "SELECT count(*) FROM jobqueue_job WHERE status = ANY(%s)", [list(states.UNFINISHED)]
        )
        return int(count)

    def pending(self) -> int:
        [(count,)] = self.rows("SELECT count(*) FROM jobqueue_job WHERE status = 'pending'")
        return int(count)

    def finished(self, start: float, end: float) -> tuple[int, tuple[float, float] | None]:
        [(count, p50, p99)] = self.rows(
            """
            SELECT count(*),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY wait),
                   percentile_cont(0.99) WITHIN GROUP (ORDER BY wait)
            FROM (SELECT extract(epoch FROM started_at - enqueued_at) AS wait
                  FROM jobqueue_job WHERE status = 'succeeded'
                    AND finished_at >= to_timestamp(%s) AND finished_at < to_timestamp(%s)
            ) AS done
            """,
            [start, end],
        )
        return int(count), None if p50 is None else (float(p50), float(p99))

    def prune(self, retention: float) -> int:
        from jobqueue import conf, states
        from jobqueue.store import Store

        kept = dict.fromkeys(states.PRUNABLE, retention)
        deleted = Store(settings=dataclasses.replace(conf.get(), retention=kept)).prune()
        return deleted.get(states.SUCCEEDED, 0)

    def succeeded_left(self) -> int:
        [(count,)] = self.rows("SELECT count(*) FROM jobqueue_job WHERE status = 'succeeded'")
        return int(count)

    def failed(self) -> int:
        [(count,)] = self.rows(
            "SELECT count(*) FROM jobqueue_job WHERE status IN ('failed', 'abandoned', 'discarded')"
        )
        return int(count)

    def settings(self) -> str:
        return (
            "one `runjobs --pool default` supervisor (concurrency 4, prefetch 64), not burst; "
            "`enqueue_many` batches"
        )


class PgqueuerChurner(Churner):
    table = "pgqueuer"
    history = ("pgqueuer_log",)
    vacuumed = ("pgqueuer", "pgqueuer_log")

    def __init__(self, system: System, folder: Path) -> None:
        import psycopg

        from bench.systems.peers import peer_dsn

        super().__init__(system, folder)
        self.waits = folder / "waits"
        self.connection = psycopg.connect(peer_dsn(system.database()), autocommit=True)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self.connection.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []

    def reset(self) -> None:
        self.system.reset()

    def probe(self, jobs: int) -> float:
        self.reset()
        self.system.preload(jobs)
        self._burst(self.system.worker_command("default"), self.system.worker_env())
        [(done, span)] = self.rows(
            "SELECT count(*), extract(epoch FROM max(created) - min(created)) "
            "FROM pgqueuer_log WHERE status = 'successful'"
        )
        if done != jobs:
            raise BenchError(f"the probe's drain finished {done:,} of {jobs:,} jobs")
        self.reset()
        return float(done) / max(float(span or 0), 1e-3)

    def worker(self, claim_log: Path, retention: float) -> subprocess.Popen[bytes]:
        return _serve(
            self.system,
            self.folder,
            {"BENCH_CLAIM_LOG": str(claim_log), "BENCH_WAIT_LOG": str(self.waits)},
        )

    def enqueuer(self, rate: float, seconds: float, start_at: float) -> subprocess.Popen[str]:
        from bench.systems.peers import Peer

        assert isinstance(self.system, Peer)
        command = self.system.command(*_enqueuer_options(rate, seconds, start_at))
        return subprocess.Popen(
            command, env=self.system.worker_env(), cwd=REPO, stdout=subprocess.PIPE, text=True
        )

    def enqueue_one(self) -> None:
        self.system.enqueue_one_by_one(1)

    def unfinished(self) -> int:
        [(count,)] = self.rows("SELECT count(*) FROM pgqueuer")
        return int(count)

    def pending(self) -> int:
        [(count,)] = self.rows("SELECT count(*) FROM pgqueuer WHERE status = 'queued'")
        return int(count)

    def finished(self, start: float, end: float) -> tuple[int, tuple[float, float] | None]:
        [(count,)] = self.rows(
            "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful' "
            "AND created >= to_timestamp(%s) AND created < to_timestamp(%s)",
            [start, end],
        )
        return int(count), None

    def prune(self, retention: float) -> int:
        [(count,)] = self.rows(
            """
            WITH gone AS (
                DELETE FROM pgqueuer_log
                WHERE created < now() - make_interval(secs => %s) RETURNING status
            )
            SELECT count(*) FROM gone WHERE status = 'successful'
            """,
            [retention],
        )
        return int(count)

    def succeeded_left(self) -> int:
        [(count,)] = self.rows("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'")
        return int(count)

    def failed(self) -> int:
        [(count,)] = self.rows(
            "SELECT count(*) FROM pgqueuer_log WHERE status NOT IN "
            "('queued', 'picked', 'successful')"
        )
        return int(count)

    def claims(self, claim_log: Path) -> list[tuple[float, float, list[float]]]:
        # The claim log, as jobqueue's; and the wait log: ``<wall clock> <each job's
        # wait>...`` per dequeue with jobs.
        found = super().claims(claim_log)
        if self.waits.exists():
            for line in self.waits.read_text().splitlines():
                at, *waits = line.split()
                found.append((float(at), NO_CLAIM, [float(w) for w in waits]))
        return found

    def settings(self) -> str:
        return (
            "one `QueueManager.run(mode=continuous)` worker, batch_size 10 (W3's default); "
            "list `enqueue` batches"
        )


CHURNERS: dict[str, Callable[[System, Path], Churner]] = {
    "jobqueue": JobqueueChurner,
    "pgqueuer": PgqueuerChurner,
}


def _enqueuer_options(rate: float, seconds: float, start_at: float) -> list[str]:
    return [
        "churn-enqueue",
        f"--rate={rate:.3f}",
        f"--seconds={seconds:.3f}",
        f"--start-at={start_at:.3f}",
        f"--tick={TICK}",
    ]


def churn(
    systems: list[System],
    minutes: float,
    share: float,
    fixed_rate: float | None,
    interval: float,
    probe_jobs: int,
    vacuum: bool,
) -> list[Table]:
    """W8 for each of ``systems`` that it knows (jobqueue, pgqueuer), one after the other;
    a table per system and the summaries."""
    runs = []
    for system in systems:
        if system.name not in CHURNERS:
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-w8-{system.name}-") as folder:
            churner = CHURNERS[system.name](system, Path(folder))
            runs.append(_run(churner, minutes, share, fixed_rate, interval, probe_jobs, vacuum))
    return _tables(runs, vacuum)


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


def _run(
    churner: Churner,
    minutes: float,
    share: float,
    fixed_rate: float | None,
    interval: float,
    probe_jobs: int,
    vacuum: bool,
) -> Run:
    name = churner.system.name
    probe_rate = churner.probe(probe_jobs)
    rate = fixed_rate or share * probe_rate
    count = max(1, round(minutes * 60 / interval))
    seconds = count * interval
    progress(
        f"W8 [{name}]: drained {probe_jobs:,} jobs at {probe_rate:,.0f} jobs/s; churning at "
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
            if vacuum:
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
        intervals=intervals,
        pruned=pruned,
        settings=f"{settings}; the table's storage options: {reloptions}",
        fixed=bool(fixed_rate),
    )


def _stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


# -- the tables -------------------------------------------------------------------------


def _mib(size: int) -> str:
    return f"{size / 2**20:,.2f}"


def _short(relation: str, table: str) -> str:
    """``jobqueue_job_claim`` -> ``claim``: the index names without their table's (the
    history tables keep theirs)."""
    if relation == table or relation in PgqueuerChurner.history:
        return relation
    return relation.removeprefix(table + "_")


def _claim_quantiles(interval: Interval) -> tuple[float, float] | None:
    return (
        (quantile(interval.claims, 0.5), quantile(interval.claims, 0.99))
        if interval.claims
        else None
    )


def _wait_quantiles(interval: Interval) -> tuple[float, float] | None:
    if interval.wait_quantiles is not None:
        return interval.wait_quantiles
    if interval.waits:
        return quantile(interval.waits, 0.5), quantile(interval.waits, 0.99)
    return None


def _ms(value: float | None) -> str:
    return "n/a" if value is None else number(value * 1000, "ms")


def _label(run: Run, k: int) -> str:
    return f"{(k + 1) * run.interval / 60:g}"


def _minute_table(run: Run) -> Table:
    table = CHURNERS_TABLE[run.system]
    headings = [
        "minute",
        "jobs/s",
        "pending",
        "claim p50, ms",
        "claim p99, ms",
        "claims",
        "wait p50, ms",
        "wait p99, ms",
        "dead rows",
        "autovacuums",
        "prune, s",
        *(["claim scan, buffers", "claim scan, ms"] if run.intervals[0].scan else []),
        *[f"{_short(r, table)}, MiB" for r in run.relations],
    ]
    rows = []
    for k, interval in enumerate(run.intervals):
        claim = _claim_quantiles(interval)
        wait = _wait_quantiles(interval)
        rows.append(
            [
                _label(run, k),
                number(interval.finished / run.interval, "jobs/s"),
                f"{interval.pending:,}",
                _ms(claim and claim[0]),
                _ms(claim and claim[1]),
                f"{len(interval.claims):,}",
                _ms(wait and wait[0]),
                _ms(wait and wait[1]),
                f"{interval.dead:,}",
                str(interval.autovacuums),
                number(interval.prune_seconds, "s"),
                *([f"{interval.scan[0]:,}", f"{interval.scan[1]:.2f}"] if interval.scan else []),
                *[_mib(interval.sizes.get(r, 0)) for r in run.relations],
            ]
        )
    sent = run.enqueuer
    achieved = float(sent["enqueued"]) / max(float(sent["seconds"]), 1e-3)
    return Table(
        key="W8",
        title=f"sustained churn, {run.system}: one row per {run.interval:g} s",
        intro=(
            f"{run.settings}. Its drain rate, measured first: {run.probe_rate:,.0f} jobs/s; "
            f"the enqueuer's target {run.rate:,.0f} jobs/s"
            f"{' (fixed by --churn-rate)' if run.fixed else ''}, achieved "
            f"{achieved:,.0f} jobs/s ({int(sent['enqueued']):,} jobs, its latest batch "
            f"{float(sent['late']) * 1000:,.0f} ms behind the clock). Each row is the "
            f"interval ending at that minute: jobs finished per second, jobs pending at its "
            f"end, the claim's time, the wait from enqueue to claim, the table's dead rows "
            f"and autovacuum count, how long the bench's prune after the sample took, "
            + (
                "the buffers and ms of the claim's scan of its index (`EXPLAIN (ANALYZE, "
                "BUFFERS)` of the claim's `due` query, 68 rows, without FOR UPDATE), "
                if run.intervals[0].scan
                else ""
            )
            + "and the relations' `pg_relation_size` (at the start: "
            + ", ".join(
                f"{_short(r, table)} {_mib(run.start_sizes.get(r, 0))}" for r in run.relations
            )
            + f" MiB). {run.pruned:,} finished jobs were pruned while it ran."
        ),
        headings=headings,
        rows=rows,
    )


CHURNERS_TABLE = {"jobqueue": JobqueueChurner.table, "pgqueuer": PgqueuerChurner.table}


def _windows(run: Run) -> tuple[int, str]:
    """The intervals in each summary window, and what the window is called."""
    count = len(run.intervals)
    per_window = round(WINDOW / run.interval)
    if count >= 2 * per_window:
        return per_window, f"{WINDOW / 60:g} minutes"
    return max(1, count // 3), "third"


def _summary(runs: list[Run], vacuum: bool) -> list[Table]:
    rows, growth = [], []
    named = ""
    for run in runs:
        size, named = _windows(run)
        first, last = run.intervals[:size], run.intervals[-size:]
        pooled = []
        for part in (first, last):
            claims = [c for i in part for c in i.claims]
            waits = [q for i in part if (q := _wait_quantiles(i))]
            pooled.append(
                {
                    "drain, jobs/s": sum(i.finished for i in part) / (len(part) * run.interval),
                    "claim p50, ms": quantile(claims, 0.5) * 1000 if claims else None,
                    "claim p99, ms": quantile(claims, 0.99) * 1000 if claims else None,
                    "wait p50, ms (median of the intervals')": (
                        _median([w[0] for w in waits]) * 1000 if waits else None
                    ),
                    "wait p99, ms (median of the intervals')": (
                        _median([w[1] for w in waits]) * 1000 if waits else None
                    ),
                }
            )
        for figure, before in pooled[0].items():
            after = pooled[1][figure]
            unit = "jobs/s" if "jobs/s" in figure else "ms"
            share = after / before if before and after is not None else None
            rows.append(
                [
                    run.system,
                    figure,
                    "n/a" if before is None else number(before, unit),
                    "n/a" if after is None else number(after, unit),
                    "n/a" if share is None else ratio(share),
                    _verdict(share, higher_is_better=unit == "jobs/s"),
                ]
            )
        half = run.intervals[len(run.intervals) // 2 - 1] if len(run.intervals) > 1 else None
        half_sizes = half.sizes if half else run.start_sizes
        half_at = f"{len(run.intervals) // 2 * run.interval / 60:g}"
        end = run.intervals[-1].sizes
        for relation in run.relations:
            was, now = half_sizes.get(relation, 0), end.get(relation, 0)
            growth.append(
                [
                    run.system,
                    relation,
                    _mib(run.start_sizes.get(relation, 0)),
                    f"{_mib(was)} (min {half_at})",
                    _mib(now),
                    f"{(now - was) / was:+.0%}" if was else "n/a",
                ]
            )
    window = "each third of the run" if named == "third" else f"the {named}"
    cleaned = (
        "the bench ran VACUUM on the tables after each prune (--churn-vacuum)"
        if vacuum
        else "nothing but autovacuum vacuumed the tables"
    )
    return [
        Table(
            key="W8",
            title="sustained churn: the last window against the first",
            intro=(
                f"Windows of {window} (runs of 10 minutes or more: 5 minutes; shorter ones, "
                f"--quick's 3 minutes among them: thirds). The drain is the jobs finished in "
                f"the window per second; the claim's p50 and p99 pool every claim of the "
                f"window; the wait's are the median of its intervals' figures. Goal: the last "
                f"window within {GOAL:.0%} of the first (met; beyond it, better or worse)."
            ),
            headings=["system", "figure", "first", "last", "last / first", "goal"],
            rows=rows,
            left=2,
        ),
        Table(
            key="W8",
            title="sustained churn: each relation's size over the last half of the run",
            intro=(
                f"`pg_relation_size` in MiB at the start, at the middle (the sample at half the "
                f"run's intervals, rounded down: the first of --quick's three) and at the end; "
                f"{cleaned}, {_autovacuum()}. Goal: sizes that stop growing."
            ),
            headings=["system", "relation", "start", "middle", "end", "growth, middle to end"],
            rows=growth,
            left=2,
        ),
    ]


def _verdict(share: float | None, higher_is_better: bool) -> str:
    """ "met" within the goal; beyond it, "better" or "worse"."""
    if share is None:
        return "n/a"
    if abs(share - 1) <= GOAL:
        return "met"
    return "better" if (share > 1) == higher_is_better else "worse"


def _median(values: list[float]) -> float:
    return quantile(values, 0.5)


def _autovacuum() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum', "
            "'autovacuum_naptime', 'autovacuum_vacuum_scale_factor', "
            "'autovacuum_vacuum_threshold') ORDER BY name"
        )
        settings = dict(cursor.fetchall())
    if settings.get("autovacuum") != "on":
        return "and autovacuum is OFF on this server (`autovacuum = off`)"
    return "autovacuum on this server: " + ", ".join(
        f"{k} = {v}" for k, v in settings.items() if k != "autovacuum"
    )


def _tables(runs: list[Run], vacuum: bool) -> list[Table]:
    if not runs:
        return []
    return [*(_minute_table(run) for run in runs), *_summary(runs, vacuum)]


# -- jobqueue's paced enqueuer: ``python -m bench.churn churn-enqueue ...`` -----------------


def _enqueue_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["churn-enqueue"])
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--start-at", type=float, required=True)
    parser.add_argument("--tick", type=float, default=TICK)
    args = parser.parse_args(argv)
    import django

    django.setup()
    from bench.benchapp.tasks import noop
    from bench.peers._common import paced_batches

    numbers = iter(range(1, 1 << 62))

    def batch(k: int) -> None:
        noop.enqueue_many([(next(numbers),) for _ in range(k)])

    reply = paced_batches(args.rate, args.seconds, args.start_at, args.tick, batch)
    print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    _enqueue_main(sys.argv[1:])


def _serve(system: System, folder: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """ONE worker of ``system`` at default settings, serving, with ``env`` added to its
    environment and its output in ``folder/worker.log``."""
    out = (folder / "worker.log").open("w")
    return subprocess.Popen(
        system.worker_command("default", burst=False),
        env={**system.worker_env(), **env},
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
