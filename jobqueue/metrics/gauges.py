"""The database-derived gauges, read at scrape time: how many jobs each queue holds per
state, how late its oldest due job is, and how many workers each pool has live.

Three statements per scrape, whatever the table's size: a count grouped by queue and status
over the statuses a healthy table holds few of (the ``(queue, status)`` index; succeeded and
discarded rows, the bulk of a table, are never read), the oldest due job per queue (its
earliest ``run_at``), and the live worker rows per pool.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import TYPE_CHECKING

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count, Min, Q
from django.utils import timezone

from jobqueue import conf, overview, states
from jobqueue.models import Job

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

# The states of jobqueue_queue_jobs: due and scheduled are pending jobs whose run_at has come
# or not yet.
QUEUE_STATES = ("due", "scheduled", "running", "failed", "abandoned")


class DatabaseCollector:
    """A prometheus_client collector of the gauges, for one registry built per request."""

    def __init__(
        self, using: str = DEFAULT_DB_ALIAS, settings: conf.Settings | None = None
    ) -> None:
        self.using = using
        self.settings = settings or conf.get()

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        now = timezone.now()
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
        counts = self.counts(now)
        late = self.oldest_due(now)
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

    def counts(self, now: dt.datetime) -> dict[str, dict[str, int]]:
        """Queue -> state -> jobs, from one statement over the ``(queue, status)`` index."""
        rows = (
            Job.objects.using(self.using)
            .filter(status__in=overview.COUNTED)
            .order_by()
            .values("queue", "status")
            .annotate(
                n=Count("id"),
                due=Count("id", filter=Q(status=states.PENDING, run_at__lte=now)),
            )
        )
        counts: dict[str, dict[str, int]] = {}
        for row in rows:
            by_state = counts.setdefault(row["queue"], {})
            if row["status"] == states.PENDING:
                by_state["due"] = row["due"]
                by_state["scheduled"] = row["n"] - row["due"]
            else:
                by_state[row["status"]] = row["n"]
        return counts

    def oldest_due(self, now: dt.datetime) -> dict[str, float]:
        """Queue -> seconds since its oldest due job fell due."""
        rows = (
            Job.objects.using(self.using)
            .filter(status=states.PENDING, run_at__lte=now)
            .order_by()
            .values("queue")
            .annotate(oldest=Min("run_at"))
        )
        return {row["queue"]: max(0.0, (now - row["oldest"]).total_seconds()) for row in rows}

    def live_workers(self) -> dict[str, int]:
        rows = (
            overview.live_workers(self.using, self.settings)
            .order_by()
            .values("pool")
            .annotate(n=Count("id"))
        )
        return {row["pool"]: row["n"] for row in rows}
