"""The database-derived gauges, read at scrape time: how many jobs each queue holds per
state, how late its oldest due job is, and how many workers each pool has live.

Two statements per scrape, whatever the table's size (and an estimate for a count past
``CAP``): one over the ``(queue, status, run_at)`` index that finds the queues by skipping
through it and reads, per queue, each state's range up to ``CAP`` entries and the first due
entry (succeeded and discarded rows, the bulk of a table, are never read); and the live
worker rows per pool.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count
from django.utils import timezone

from jobqueue import conf, states
from jobqueue.console import overview
from jobqueue.sql import Queries

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

# The states of jobqueue_queue_jobs: due and scheduled are pending jobs whose run_at has come
# or not yet.
QUEUE_STATES = ("due", "scheduled", "running", "failed", "abandoned")
# Each count reads at most this many index entries; past it, an estimate (see counts()).
CAP = 1_000
EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)
LATEST = dt.datetime.max.replace(tzinfo=dt.UTC)
# Each state as a status and a range of run_at, (after, before], from the time now.
RANGES: dict[str, Callable[[dt.datetime], tuple[str, dt.datetime, dt.datetime]]] = {
    "due": lambda now: (states.PENDING, EARLIEST, now),
    "scheduled": lambda now: (states.PENDING, now, LATEST),
    "running": lambda now: (states.RUNNING, EARLIEST, LATEST),
    "failed": lambda now: (states.FAILED, EARLIEST, LATEST),
    "abandoned": lambda now: (states.ABANDONED, EARLIEST, LATEST),
}


class DatabaseCollector:
    """A prometheus_client collector of the gauges, for one registry built per request."""

    def __init__(
        self, using: str = DEFAULT_DB_ALIAS, settings: conf.Settings | None = None
    ) -> None:
        self.using = using
        self.settings = settings or conf.get()

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        jobs = GaugeMetricFamily(
            "jobqueue_queue_jobs",
            "Jobs per queue and state (due, scheduled, running, failed, abandoned).",
            labels=["queue", "state"],
        )
        oldest = GaugeMetricFamily(
            "jobqueue_queue_oldest_due_seconds",
            "Seconds the oldest due job of each queue has been due (0: none due).",
            labels=["queue"],
        )
        counts, late = self.counts()
        for queue in sorted(set(counts) | self.settings.named_queues):
            by_state = counts.get(queue, {})
            for state in QUEUE_STATES:
                jobs.add_metric([queue, state], by_state.get(state, 0))
            oldest.add_metric([queue], late.get(queue, 0.0))
        yield jobs
        yield oldest
        workers = GaugeMetricFamily(
            "jobqueue_workers",
            "Live worker processes (heartbeat within LEASE) per pool.",
            labels=["pool"],
        )
        live = self.live_workers()
        for pool in sorted(set(live) | set(self.settings.pools)):
            workers.add_metric([pool], live.get(pool, 0))
        yield workers

    def counts(self) -> tuple[dict[str, dict[str, int]], dict[str, float]]:
        """Queue -> state -> jobs, and queue -> seconds its oldest due job has been due.

        Each count is exact up to CAP; past it, PostgreSQL's planner estimates it (never
        less than CAP) and SQLite counts it.
        """
        queries = Queries(self.using)
        counts: dict[str, dict[str, int]] = {}
        late: dict[str, float] = {}
        for queue, *found, oldest in queries.queue_gauges(CAP):
            counts[queue] = dict(zip(QUEUE_STATES, found, strict=True))
            if oldest is not None:
                late[queue] = oldest
        now = timezone.now()
        for queue, by_state in counts.items():
            for state, n in by_state.items():
                if n >= CAP:
                    status, after, before = RANGES[state](now)
                    by_state[state] = max(
                        CAP, queries.queue_state_rows(queue, status, after, before)
                    )
        return counts, late

    def live_workers(self) -> dict[str, int]:
        rows = (
            overview.live_workers(self.using, self.settings)
            .order_by()
            .values("pool")
            .annotate(n=Count("id"))
        )
        return {row["pool"]: row["n"] for row in rows}
