"""A worker's contribution to the dashboard's history: an in-process tally of its starts and
outcomes, and the once-a-minute chore that writes it.

:class:`Tally` counts from the ``job_started`` and ``job_finished`` signals, which carry
everything it needs: no statement per job. Its receivers run on the slot threads and the
writer's, so every count is taken under one lock. :class:`Recorder` is one of the loop's
chores (:mod:`jobqueue.runtime.maintenance`), run on the loop's thread: once a minute it
writes the tally in ONE multi-row insert (nothing when nothing happened), samples the
queues' depth if no worker has sampled this minute yet, and prunes a batch of rows past
:data:`jobqueue.stats.RETENTION` once an hour. The worker writes what is left at shutdown.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from jobqueue import signals, states
from jobqueue.models import Job, MinuteStat, QueueSample
from jobqueue.runtime.outage import Health
from jobqueue.store import stats

logger = logging.getLogger("jobqueue.worker")

FLUSH_INTERVAL = 60.0
PRUNE_EVERY = 60  # flushes between prunes (an hour)
COMPACT_EVERY = 5  # flushes between compactions
KEEP_UNWRITTEN = dt.timedelta(hours=1)

Key = tuple[dt.datetime, str, str, str]  # minute, queue, task_name, outcome


def minute_of(moment: dt.datetime) -> dt.datetime:
    return moment.replace(second=0, microsecond=0)


class Tally:
    """Counts of this worker's starts and outcomes per (minute, queue, task, outcome), with
    the sum and histogram of their waits (starts) or durations (outcomes)."""

    def __init__(self, worker: str, *, clock: Callable[[], dt.datetime] = timezone.now) -> None:
        self.worker = worker
        self.clock = clock
        self._lock = threading.Lock()
        self._counts: dict[Key, list[float]] = {}  # [count, seconds, h00, h01, ...]

    def connect(self) -> None:
        # dispatch_uid per worker: a second worker in the same process (tests) has its own.
        signals.job_started.connect(self._started, weak=False, dispatch_uid=self._uid("s"))
        signals.job_finished.connect(self._finished, weak=False, dispatch_uid=self._uid("f"))

    def disconnect(self) -> None:
        signals.job_started.disconnect(dispatch_uid=self._uid("s"))
        signals.job_finished.disconnect(dispatch_uid=self._uid("f"))

    def _uid(self, kind: str) -> str:
        return f"jobqueue.tally.{kind}.{self.worker}"

    def _started(self, sender: Any, **kwargs: Any) -> None:
        if kwargs.get("worker") == self.worker:
            self.add(kwargs["queue"], kwargs["task_name"], stats.STARTED, kwargs.get("wait"))

    def _finished(self, sender: Any, **kwargs: Any) -> None:
        if kwargs.get("worker") == self.worker:
            self.add(
                kwargs["queue"], kwargs["task_name"], kwargs["outcome"], kwargs.get("duration")
            )

    def add(self, queue: str, task_name: str, outcome: str, seconds: float | None) -> None:
        """Count one event now; ``seconds`` (a wait or a duration) goes into the histogram."""
        key = (minute_of(self.clock()), queue, task_name, outcome)
        with self._lock:
            entry = self._counts.get(key)
            if entry is None:
                entry = self._counts[key] = [0.0] * (2 + len(stats.COLUMNS))
            entry[0] += 1
            if seconds is not None:
                seconds = max(0.0, seconds)
                entry[1] += seconds
                entry[2 + stats.bucket_of(seconds)] += 1

    def take(self) -> list[MinuteStat]:
        """The tally as unsaved rows, and an empty tally."""
        with self._lock:
            counts, self._counts = self._counts, {}
        return [
            MinuteStat(
                minute=minute,
                queue=queue,
                task_name=task_name,
                outcome=outcome,
                count=int(entry[0]),
                seconds=entry[1],
                **{column: int(n) for column, n in zip(stats.COLUMNS, entry[2:], strict=True)},
            )
            for (minute, queue, task_name, outcome), entry in sorted(counts.items())
        ]

    def put_back(self, rows: list[MinuteStat]) -> None:
        """Add rows that could not be written to the tally again, for the next flush; those
        older than KEEP_UNWRITTEN are dropped, so that a long outage (or a table not yet
        migrated) does not grow the tally without end."""
        oldest = minute_of(self.clock()) - KEEP_UNWRITTEN
        with self._lock:
            for row in rows:
                if row.minute < oldest:
                    continue
                key = (row.minute, row.queue, row.task_name, row.outcome)
                entry = self._counts.setdefault(key, [0.0] * (2 + len(stats.COLUMNS)))
                entry[0] += row.count
                entry[1] += row.seconds
                for i, column in enumerate(stats.COLUMNS):
                    entry[2 + i] += getattr(row, column)

    def flush(self, using: str) -> int:
        """Write the tally in one multi-row insert; the rows written. On an error the rows go
        back into the tally and the error is raised."""
        rows = self.take()
        if not rows:
            return 0
        try:
            MinuteStat.objects.using(using).bulk_create(rows, batch_size=len(rows))
        except Exception:
            self.put_back(rows)
            raise
        return len(rows)


def sample_depth(using: str, now: dt.datetime) -> bool:
    """Write this minute's depth of every queue with unfinished jobs, unless a worker did
    already; True if this call wrote it.

    Two statements when another worker was first (the look at the unique key's index); a
    count over the unfinished rows otherwise, by the (queue, status) index, then one insert
    whose conflicts (a worker that raced us) are ignored.
    """
    minute = minute_of(now)
    if QueueSample.objects.using(using).filter(minute=minute).exists():
        return False
    counts = (
        Job.objects.using(using)
        .filter(status__in=(states.PENDING, states.RUNNING))
        .values("queue")
        .annotate(
            due=Count("id", filter=Q(status=states.PENDING, run_at__lte=now)),
            scheduled=Count("id", filter=Q(status=states.PENDING, run_at__gt=now)),
            running=Count("id", filter=Q(status=states.RUNNING)),
        )
        .order_by()
    )
    rows = [
        QueueSample(
            minute=minute,
            queue=row["queue"],
            due=row["due"],
            scheduled=row["scheduled"],
            running=row["running"],
        )
        for row in counts
    ]
    if not rows:
        # An empty system: one row says "sampled, nothing there", so the chart shows zeros
        # rather than a gap, and the other workers skip this minute.
        rows = [QueueSample(minute=minute, queue="")]
    QueueSample.objects.using(using).bulk_create(rows, ignore_conflicts=True)
    return True


class Recorder:
    """The chore that writes the tally, samples depth and prunes the history (see module)."""

    def __init__(
        self,
        *,
        tally: Tally,
        using: str,
        health: Health,
        clock: Callable[[], dt.datetime] = timezone.now,
    ) -> None:
        self.tally = tally
        self.using = using
        self._health = health
        self.clock = clock
        self._runs = 0
        self._scheduled = False

    def run(self, now: float) -> float:
        if not self._scheduled:
            # Every chore is due at the worker's start; this one has nothing to write yet, and
            # its statements would only delay the first claims' round trips: a minute on.
            self._scheduled = True
            return now + FLUSH_INTERVAL
        self._runs += 1
        for what, step in (
            ("writing the dashboard's counts", lambda: self.tally.flush(self.using)),
            ("sampling queue depth", lambda: sample_depth(self.using, self.clock())),
            ("compacting the dashboard's history", self._compact),
            ("pruning the dashboard's history", self._prune),
        ):
            with self._health.trying(
                what, self.using, "worker %s: %s failed", self.tally.worker, what
            ) as attempt:
                step()
            if attempt.failed:
                break
        return now + FLUSH_INTERVAL

    def _compact(self) -> None:
        if self._runs % COMPACT_EVERY == 1:
            stats.compact(self.using, self.clock())

    def _prune(self) -> None:
        if self._runs % PRUNE_EVERY == 1:
            stats.prune(self.using, self.clock())

    def final_flush(self) -> None:
        """At shutdown: write what is left; an error is logged, not raised."""
        try:
            self.tally.flush(self.using)
        except Exception:
            logger.exception(
                "worker %s: could not write its last dashboard counts", self.tally.worker
            )
