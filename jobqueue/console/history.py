"""The dashboard's history: the bounded reads the admin's dashboard draws from
(:class:`jobqueue.models.MinuteStat` and :class:`jobqueue.models.QueueSample`, the job table
only for its last failures and running jobs). No database writes: the workers write,
compact and prune the rows (:mod:`jobqueue.runtime.tally`, through
:mod:`jobqueue.store.stats`, which owns the buckets and tiers both sides read).

Every read here is bounded: the stat rows of a range by the ``minute`` index, summed by the
database into at most ~170 buckets; the failed jobs by the (status, finished_at) index, a
fixed number of rows; the running jobs by the running-lease partial index, likewise.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, cast

from django.db import connections
from django.db.models import Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone

from jobqueue import signals, states
from jobqueue.models import Job, MinuteStat, QueueSample, Worker
from jobqueue.sql import Queries
from jobqueue.store.stats import BOUNDS, COLUMNS, STARTED, TIERS

FAILURES_READ = 200  # the most recent failed jobs read for the per-task table
RUNNING_READ = 500  # the running jobs read for the per-worker table
WORKERS_READ = 100


def percentile(counts: Sequence[int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a histogram, as its bucket's upper bound (the last
    bucket, unbounded, reports its lower bound); None for an empty histogram."""
    total = sum(counts)
    if not total:
        return None
    rank = q * total
    running = 0
    for index, count in enumerate(counts):
        running += count
        if running >= rank and count:
            return BOUNDS[index] if index < len(BOUNDS) else BOUNDS[-1]
    return BOUNDS[-1]


@dataclass(frozen=True)
class Range:
    key: str
    label: str
    span: dt.timedelta
    step: int  # seconds per chart bucket

    @property
    def points(self) -> int:
        return int(self.span.total_seconds()) // self.step


RANGES: dict[str, Range] = {
    r.key: r
    for r in (
        Range("1h", "1 h", dt.timedelta(hours=1), 60),  # 60 points
        Range("24h", "24 h", dt.timedelta(hours=24), 600),  # 144 points
        Range("7d", "7 d", dt.timedelta(days=7), 3600),  # 168 points
    )
}
DEFAULT_RANGE = "1h"


@dataclass
class TaskRow:
    task_name: str
    runs: int = 0
    failed: int = 0
    histogram: list[int] = field(default_factory=lambda: [0] * len(COLUMNS))
    last_failure_at: dt.datetime | None = None
    last_failure: str = ""

    @property
    def failure_rate(self) -> float:
        return self.failed / self.runs if self.runs else 0.0

    @property
    def p50(self) -> float | None:
        return percentile(self.histogram, 0.5)

    @property
    def p95(self) -> float | None:
        return percentile(self.histogram, 0.95)


@dataclass
class History:
    range: Range
    starts: list[dt.datetime]  # each bucket's start
    finished: dict[str, list[int]]  # outcome -> count per bucket
    wait_p50: list[float | None]
    wait_p95: list[float | None]
    due: list[float | None]  # average over the bucket's sampled minutes; None unsampled
    running: list[float | None]
    tasks: list[TaskRow]


def read(range_key: str, using: str, now: dt.datetime | None = None) -> History:
    """The dashboard's figures for one of :data:`RANGES` ending at ``now``."""
    span = RANGES[range_key]
    now = now or timezone.now()
    step = span.step
    end = int(now.timestamp()) // step * step + step  # the bucket holding now is the last
    first = end - span.points * step
    since = dt.datetime.fromtimestamp(first, tz=dt.UTC)
    starts = [since + dt.timedelta(seconds=step * i) for i in range(span.points)]
    bucket = RawSQL(Queries(using).statements["stat_bucket"], (step, step))

    def index(epoch: Any) -> int:
        return (int(epoch) - first) // step

    # One scan of the range's stat rows (the minute index), summed by the database into
    # (bucket, task, outcome): a few thousand rows even for a week of many workers.
    sums = {column: Sum(column) for column in COLUMNS}
    spans = [60, *(to for _, to, _ in TIERS if to <= step)]
    stats = (
        MinuteStat.objects.using(using)
        .filter(span__in=spans, minute__gte=since)
        .annotate(bucket=bucket)
        .values("bucket", "task_name", "outcome")
        .annotate(n=Sum("count"), **sums)
        .order_by()
    )
    finished = {outcome: [0] * span.points for outcome in signals.OUTCOMES}
    waits = [[0] * len(COLUMNS) for _ in starts]
    tasks: dict[str, TaskRow] = {}
    for row in plain_rows(stats, using):
        i = index(row["bucket"])
        if not 0 <= i < span.points:
            continue
        histogram = [row[column] or 0 for column in COLUMNS]
        if row["outcome"] == STARTED:
            waits[i] = [a + b for a, b in zip(waits[i], histogram, strict=True)]
            continue
        if row["outcome"] in finished:
            finished[row["outcome"]][i] += row["n"]
        task = tasks.setdefault(row["task_name"], TaskRow(row["task_name"]))
        task.runs += row["n"]
        if row["outcome"] == "failed":
            task.failed += row["n"]
        task.histogram = [a + b for a, b in zip(task.histogram, histogram, strict=True)]

    # Depth: the sample of each bucket's first minute (one row per queue, by the unique
    # key's index: at most points x queues rows), summed over queues.
    depth: dict[int, tuple[float, float]] = {}
    samples: Iterable[dict[str, Any]] = cast(
        Any,
        QueueSample.objects.using(using)
        .filter(minute__in=starts)
        .annotate(bucket=bucket)
        .values("bucket")
        .annotate(due_sum=Sum("due"), running_sum=Sum("running"))
        .order_by(),
    )
    for row in samples:
        depth[index(row["bucket"])] = (row["due_sum"], row["running_sum"])

    for task_name, at, error in last_failures(using, since):
        task = tasks.setdefault(task_name, TaskRow(task_name))
        if task.last_failure_at is None:
            task.last_failure_at, task.last_failure = at, error
    return History(
        range=span,
        starts=starts,
        finished=finished,
        wait_p50=[percentile(w, 0.5) for w in waits],
        wait_p95=[percentile(w, 0.95) for w in waits],
        due=[depth[i][0] if i in depth else None for i in range(span.points)],
        running=[depth[i][1] if i in depth else None for i in range(span.points)],
        tasks=sorted(tasks.values(), key=lambda t: t.task_name),
    )


def plain_rows(queryset: Any, using: str) -> Iterable[dict[str, Any]]:
    """``queryset.values(...)``'s rows without Django's per-value converters: its statement
    run on a cursor. Sums of integers need none, and for the few thousand rows of a week's
    buckets the converters cost more than the query; but MySQL sums integers as DECIMAL,
    which the driver reads as ``Decimal``: those become ints (every DECIMAL here is a sum
    of integers; the float columns' sums stay floats)."""
    sql, params = queryset.query.sql_with_params()
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
    return [
        {n: int(v) if isinstance(v, Decimal) else v for n, v in zip(names, row, strict=True)}
        for row in rows
    ]


def last_failures(using: str, since: dt.datetime) -> list[tuple[str, dt.datetime | None, str]]:
    """(task, finished_at, last error) of the latest failed jobs since ``since``, newest first:
    at most FAILURES_READ rows by the (status, finished_at) index. A task whose failures are
    all older than the latest FAILURES_READ is left without one."""
    rows = (
        Job.objects.using(using)
        .filter(status=states.FAILED, finished_at__gte=since)
        .order_by("-finished_at")
        .values_list("task_name", "finished_at", "last_error")[:FAILURES_READ]
    )
    return [(task, at, last_line(error)) for task, at, error in rows]


def last_line(error: str | None, limit: int = 200) -> str:
    """The last line of a traceback (the exception and its message), cut to ``limit``."""
    lines = (error or "").strip().splitlines()
    return lines[-1][:limit] if lines else ""


@dataclass
class RunningJob:
    id: int
    task_name: str
    queue: str
    seconds: float | None  # since it started


@dataclass
class WorkerRow:
    id: str
    hostname: str
    pool: str
    concurrency: int
    memory: int | None
    last_heartbeat: dt.datetime
    jobs: list[RunningJob]


def workers(using: str, now: dt.datetime | None = None) -> list[WorkerRow]:
    """The live workers' rows with the jobs each runs now: at most WORKERS_READ workers, and
    RUNNING_READ running jobs read by the running-lease partial index."""
    now = now or timezone.now()
    running: dict[str | None, list[RunningJob]] = defaultdict(list)
    for job in (
        Job.objects.using(using)
        .filter(status=states.RUNNING, lease_until__isnull=False)
        .order_by("lease_until")
        .values("id", "task_name", "queue", "worker", "started_at")[:RUNNING_READ]
    ):
        started = job["started_at"]
        running[job["worker"]].append(
            RunningJob(
                job["id"],
                job["task_name"],
                job["queue"],
                (now - started).total_seconds() if started else None,
            )
        )
    return [
        WorkerRow(
            id=w.id,
            hostname=w.hostname,
            pool=w.pool,
            concurrency=w.concurrency,
            memory=w.memory,
            last_heartbeat=w.last_heartbeat,
            jobs=sorted(running.get(w.id, []), key=lambda j: j.id),
        )
        for w in Worker.objects.using(using).order_by("pool", "started_at")[:WORKERS_READ]
    ]
