"""What an operator sees of the queues and the workers: the figures behind
``manage.py jobs queues|workers`` and the admin's overview pages."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import Count, Min, Q
from django.utils import timezone

from jobqueue import conf, states
from jobqueue.models import Job, Worker
from jobqueue.runtime.queues import owner

# Counted per queue; succeeded and discarded rows (the bulk of a table) are left out.
COUNTED = (states.PENDING, states.RUNNING, states.FAILED, states.ABANDONED)


@dataclass
class QueueRow:
    queue: str
    pool: str | None  # None: no pool serves this queue, its jobs will never run
    due: int = 0
    scheduled: int = 0
    running: int = 0
    failed: int = 0
    abandoned: int = 0
    oldest_due_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def queue_rows(settings: conf.Settings | None = None) -> list[QueueRow]:
    """One row per queue that has jobs or is named in the settings, in one query."""
    settings = settings or conf.get()
    now = timezone.now()
    due = Q(status=states.PENDING, run_at__lte=now)
    counts = (
        Job.objects.filter(status__in=COUNTED)
        .order_by()
        .values("queue")
        .annotate(
            due=Count("id", filter=due),
            scheduled=Count("id", filter=Q(status=states.PENDING, run_at__gt=now)),
            running=Count("id", filter=Q(status=states.RUNNING)),
            failed=Count("id", filter=Q(status=states.FAILED)),
            abandoned=Count("id", filter=Q(status=states.ABANDONED)),
            oldest_due=Min("run_at", filter=due),
        )
    )
    rows = {}
    for row in counts:
        oldest: dt.datetime | None = row["oldest_due"]
        rows[row["queue"]] = QueueRow(
            queue=row["queue"],
            pool=owner(settings, row["queue"]),
            due=row["due"],
            scheduled=row["scheduled"],
            running=row["running"],
            failed=row["failed"],
            abandoned=row["abandoned"],
            oldest_due_seconds=None if oldest is None else (now - oldest).total_seconds(),
        )
    named = set(settings.routing) | {q for p in settings.pools.values() for q in p.queues or ()}
    for queue in named - set(rows):
        rows[queue] = QueueRow(queue=queue, pool=owner(settings, queue))
    return [rows[q] for q in sorted(rows)]


@dataclass
class WorkerRow:
    id: str
    pool: str
    hostname: str
    pid: int
    queues: str
    concurrency: int
    held: int
    started_at: str
    last_heartbeat: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def worker_rows() -> list[WorkerRow]:
    """Live workers, by pool, with the number of jobs each holds."""
    held = dict(
        Job.objects.filter(status=states.RUNNING)
        .order_by()
        .values_list("worker")
        .annotate(n=Count("id"))
    )
    rows = []
    for w in Worker.objects.order_by("pool", "started_at"):
        queues = w.queues.get("queues")
        served = "*" if queues is None else ",".join(queues)
        if w.queues.get("excluded"):
            served += " except " + ",".join(w.queues["excluded"])
        rows.append(
            WorkerRow(
                id=w.id,
                pool=w.pool,
                hostname=w.hostname,
                pid=w.pid,
                queues=served,
                concurrency=w.concurrency,
                held=held.get(w.id, 0),
                started_at=w.started_at.isoformat(),
                last_heartbeat=w.last_heartbeat.isoformat(),
            )
        )
    return rows
