"""W14: what flow control costs. ``python bench/run.py --only W14``.

**The drain.** ``--flow-jobs`` (10,000) no-op jobs over ``--flow-keys`` (100) keys, the keys
round-robin in enqueue order (job n has key n % keys), enqueued in one bulk call and
analysed, then drained by one ``runjobs --burst`` supervisor at default settings (one
worker process, the default pool's 4 slots and 64 claimed ahead), three ways, interleaved
in each of ``--repeat`` runs: without limits (``bench.keyed``), with ``Concurrency(key=
"key", limit=2)`` (``bench.keyed_concurrency``) and with ``RateLimit(key="key", limit=1000,
per=1.0)`` (``bench.keyed_rate``): 1,000 starts a second per key, 100,000 over the keys,
far above what one worker drains, so that the limit is checked on every claim but never
binds in aggregate: what is measured is the limits' cost, not their effect. Each run starts
from empty tables, the limit keys' rows included (a key's first claim makes its row).

The drain rate is from the rows, as W9's (``bench/drains.py``): the jobs finished from the
moment the worker started its first job to the last finish, so that start-up and exit are
not in it. The claim's time is measured in the worker, as W8 and W10 measure it
(``bench/backlog_settings.py``: an execute wrapper times each ``claim`` statement around
the driver's call, round trip included, as the worker waits for it): its p50 and p99 over
every claim of the drain. That is the claim as the worker pays for it, with the successes
it records, under the drain's real mix of keys and held slots; ``EXPLAIN ANALYZE`` of one
statement (W6's way) would time the server's part alone, on a state the bench made up.

**The head-of-line case.** ``--flow-head`` (10,000) jobs of key A of
``bench.one_per_key`` (``Concurrency(key="key", limit=1)``), enqueued first in one bulk call,
served by one ``runjobs`` supervisor at default settings (not in burst mode); once the
worker has finished a few of them, 10 jobs of key B are enqueued in one call. The figure is
the time from the moment the bench called that enqueue to B's last ``finished_at`` (the
issue's goal: within 2 s), with the A jobs that finished meanwhile and those still waiting
when B's last finished, and the claims the worker ran meanwhile (from its claim log). Then
the supervisor is stopped with SIGTERM. ``--repeat`` runs, after the drains.

jobqueue only: the peers have no per-key limit above one at a time, and no per-key rate
limit, in their free versions (procrastinate's ``lock`` and graphile-worker's named queues
run one key's jobs one at a time), so no peer row would compare like with like.
PostgreSQL only.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import drains
from bench.report import Table, progress, ratio, spread
from bench.systems.base import REPO
from bench.workload import BenchError

B_JOBS = 10  # the head-of-line case's jobs of key B
HEAD_GOAL = 2.0  # s from B's enqueue to B's last finish (issue 29)
DRAIN_GOAL = 0.8  # the drain with limits, at least this share of the drain without
CLAIM_GOAL = 1.3  # the claim's p50 with limits, at most this many times the one without
# Before B is enqueued: the worker is draining A, not starting up.
A_FINISHED_FIRST = 20
TIMEOUT = 120.0  # s for a wait on the rows (the worker's start, B's jobs)
STOP_TIMEOUT = 60  # s for a stopped supervisor to exit before it is killed
POLL = 0.02  # s between looks at the rows


@dataclass(frozen=True)
class Variant:
    """One of the drain's three ways: a task of ``bench.benchapp.tasks`` and its limit."""

    label: str
    task: str  # the attribute of bench.benchapp.tasks


WITHOUT = Variant("none", "keyed")
VARIANTS = (
    WITHOUT,
    Variant('`Concurrency(key="key", limit=2)`', "keyed_concurrency"),
    Variant('`RateLimit(key="key", limit=1000, per=1.0)`', "keyed_rate"),
)
Figures = dict[str, float]


def flow(jobs: int, keys: int, head: int, repeat: int) -> list[Table]:
    """The drains, ``repeat`` times, the three ways interleaved, then the head-of-line
    case ``repeat`` times; W14's two tables."""
    runs: dict[str, list[Figures]] = {v.label: [] for v in VARIANTS}
    for run in range(1, repeat + 1):
        for variant in VARIANTS:  # interleaved, so a noisy moment hits every way
            measured = _drain(variant, jobs, keys)
            runs[variant.label].append(measured)
            progress(
                f"W14 [{variant.task}] run {run}: {measured['jobs/s']:,.0f} jobs/s, claim p50 "
                f"{measured['p50']:.2f} ms, p99 {measured['p99']:.1f} ms, "
                f"{measured['claims']:,.0f} claims"
            )
    cases: list[Figures] = []
    for run in range(1, repeat + 1):
        case = _head_of_line(head)
        cases.append(case)
        progress(
            f"W14 head-of-line run {run}: B's {B_JOBS} jobs finished {case['seconds']:.2f} s "
            f"after their enqueue; {case['a_meanwhile']:,.0f} A jobs finished meanwhile, "
            f"{case['a_waiting']:,.0f} still waiting"
        )
    return [_drain_table(runs, jobs, keys, repeat), _head_table(cases, head, repeat)]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "testproject")]),
        "DJANGO_SETTINGS_MODULE": "bench.backlog_settings",  # the claim timer
    }


def _load(calls: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
    """Empty tables, then each task's calls enqueued in one bulk call, and analysed."""
    from django.db import connection

    from bench.benchapp import tasks

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_job, jobqueue_worker, jobqueue_limitkey")
    for name, args in calls:
        getattr(tasks, name).enqueue_many(args)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
    connection.close()  # nothing of the bench's stays open beside the drain


def _drain(variant: Variant, jobs: int, keys: int) -> Figures:
    _load([(variant.task, [(n, n % keys) for n in range(jobs)])])
    command = [sys.executable, "-m", "django", "runjobs", "--burst"]
    with tempfile.TemporaryDirectory(prefix="jobqueue-w14-") as folder:
        claim_log = Path(folder) / "claims"
        drains.run([command], _env(), claim_log, 1, None)
        logged = drains.claims(claim_log)
    rate = drains.jobqueue_rate(since=drains.all_started(logged))
    drains.checked(rate, jobs, False, f"jobqueue, {variant.task}")
    return {**rate, **drains.percentiles(logged)}


def _head_of_line(head: int) -> Figures:
    """A's ``head`` jobs enqueued, then served by one supervisor; B's jobs enqueued once the
    worker has finished some of A's; the seconds to B's last finish, and A's meanwhile."""
    _load([("one_per_key", [(n, "A") for n in range(head)])])
    command = [sys.executable, "-m", "django", "runjobs"]
    with tempfile.TemporaryDirectory(prefix="jobqueue-w14-") as folder:
        claim_log = Path(folder) / "claims"
        output = (Path(folder) / "supervisor.log").open("w")
        proc = subprocess.Popen(
            command,
            env={**_env(), "BENCH_CLAIM_LOG": str(claim_log)},
            cwd=REPO,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait(proc, lambda: _finished("A") >= min(A_FINISHED_FIRST, head), "A's first jobs")
            sent = time.time()
            _enqueue_b()
            _wait(proc, lambda: _finished("B") == B_JOBS, f"B's {B_JOBS} jobs")
            figures = _case(sent)
        finally:
            _stop(proc)
            output.close()
        if proc.returncode not in (0, -signal.SIGTERM):
            text = (Path(folder) / "supervisor.log").read_text()
            raise BenchError(f"the supervisor exited with {proc.returncode}:\n{text[-3000:]}")
        during = [c for c in drains.claims(claim_log) if sent <= c.at <= figures["b_last"]]
    ms = [c.seconds * 1000 for c in during]
    return {
        **figures,
        "claims": float(len(during)),
        "p50": statistics.median(ms) if ms else 0.0,
    }


def _enqueue_b() -> None:
    from django.db import connection

    from bench.benchapp.tasks import one_per_key

    one_per_key.enqueue_many([(n, "B") for n in range(B_JOBS)])  # autocommit: one commit
    connection.close()


def _finished(key: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM jobqueue_job WHERE concurrency_key = %s AND status = 'succeeded'",
            [f"bench.one_per_key:{key}"],
        )
        [(count,)] = cursor.fetchall()
    return int(count)


def _wait(proc: subprocess.Popen[bytes], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not done():
        if proc.poll() is not None:
            raise BenchError(f"the supervisor exited with {proc.returncode} before {what}")
        if time.monotonic() > deadline:
            raise BenchError(f"{what} did not finish within {TIMEOUT:g} s")
        time.sleep(POLL)


def _case(sent: float) -> Figures:
    """From the rows: B's last finish after ``sent`` (epoch seconds; the server is local, so
    its clock is this host's), the A jobs that finished meanwhile and those still waiting."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH b AS (SELECT max(finished_at) AS last FROM jobqueue_job
                       WHERE concurrency_key = 'bench.one_per_key:B')
            SELECT extract(epoch FROM b.last),
                   count(*) FILTER (WHERE j.finished_at > to_timestamp(%(sent)s::float8)
                                      AND j.finished_at <= b.last),
                   count(*) FILTER (WHERE j.finished_at IS NULL OR j.finished_at > b.last)
            FROM jobqueue_job AS j, b
            WHERE j.concurrency_key = 'bench.one_per_key:A'
            GROUP BY b.last
            """,
            {"sent": sent},
        )
        [(last, meanwhile, waiting)] = cursor.fetchall()
    connection.close()
    return {
        "seconds": float(last) - sent,
        "b_last": float(last),
        "a_meanwhile": float(meanwhile),
        "a_waiting": float(waiting),
    }


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _median(runs: list[Figures], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _drain_table(runs: dict[str, list[Figures]], jobs: int, keys: int, repeat: int) -> Table:
    rate0, p50_0 = _median(runs[WITHOUT.label], "jobs/s"), _median(runs[WITHOUT.label], "p50")
    rows, goals = [], []
    for variant in VARIANTS:
        measured = runs[variant.label]
        drain_share = _median(measured, "jobs/s") / rate0
        claim_times = _median(measured, "p50") / p50_0
        rows.append(
            [
                variant.label,
                spread([r["jobs/s"] for r in measured], "jobs/s"),
                ratio(drain_share),
                spread([r["p50"] for r in measured], "ms"),
                ratio(claim_times),
                spread([r["p99"] for r in measured], "ms"),
                f"{_median(measured, 'claims'):,.0f}",
            ]
        )
        if variant is not WITHOUT:
            goals.append(
                f"{variant.label}: drain {ratio(drain_share)} of without "
                f"({'met' if drain_share >= DRAIN_GOAL else 'MISSED'}), claim p50 "
                f"{ratio(claim_times)} times ({'met' if claim_times <= CLAIM_GOAL else 'MISSED'})"
            )
    return Table(
        key="W14",
        title=f"flow control: {jobs:,} jobs over {keys:,} keys, without limits and with each",
        intro=(
            f"{jobs:,} no-op jobs, keys round-robin in enqueue order, one bulk enqueue, drained "
            "by one `runjobs --burst` supervisor at default settings (one worker process, 4 "
            f"slots, 64 claimed ahead); {repeat} run(s) of each way, interleaved, median "
            "(min-max). The drain rate counts the jobs finished from the worker's first start "
            "to the last finish; the claim's time is each claim statement as the worker waited "
            "for it (an execute wrapper in the worker, round trip and the successes it records "
            "included), p50 and p99 over every claim of the drain. The RateLimit allows 1,000 "
            f"starts a second per key, {1_000 * keys:,} over the keys: it is checked on every "
            "claim but does not bind in aggregate, so the row measures its overhead."
        ),
        headings=[
            "limits",
            "drain, jobs/s",
            "drain / without",
            "claim p50, ms",
            "claim p50 / without",
            "claim p99, ms",
            "claims",
        ],
        rows=rows,
        after=[
            f"Goals (issue 29): the drain with limits at least {DRAIN_GOAL:g} of the drain "
            f"without, the claim's p50 at most {CLAIM_GOAL:g} times. " + "; ".join(goals) + ".",
            "",
            "jobqueue alone: the peers have no per-key limit above one at a time, and no per-key "
            "rate limit, in their free versions, so no peer has a row.",
        ],
    )


def _head_table(cases: list[Figures], head: int, repeat: int) -> Table:
    seconds = [c["seconds"] for c in cases]
    return Table(
        key="W14",
        title="flow control: the head-of-line case",
        intro=(
            f'{head:,} no-op jobs of key A (`Concurrency(key="key", limit=1)`) enqueued first, '
            "served by one `runjobs` supervisor at default settings (not in burst mode); once "
            f"it had finished {A_FINISHED_FIRST} of them, {B_JOBS} jobs of key B of the same "
            "task enqueued in one call. From the moment the bench called that enqueue to B's "
            f"last `finished_at`; {repeat} run(s), median (min-max)."
        ),
        headings=[
            f"B's {B_JOBS} jobs: enqueue to last finish, s",
            "A jobs finished meanwhile",
            "A jobs still waiting",
            "claims meanwhile",
            "claim p50 meanwhile, ms",
        ],
        rows=[
            [
                spread(seconds, "s"),
                spread([c["a_meanwhile"] for c in cases], "jobs/s"),
                spread([c["a_waiting"] for c in cases], "jobs/s"),
                spread([c["claims"] for c in cases], "jobs/s"),
                spread([c["p50"] for c in cases], "ms"),
            ]
        ],
        left=0,
        after=[
            f"Goal (issue 29): within {HEAD_GOAL:g} s: "
            + (
                "met in every run."
                if max(seconds) <= HEAD_GOAL
                else f"MISSED in {sum(s > HEAD_GOAL for s in seconds)} of {len(seconds)} run(s)."
            )
        ],
    )
