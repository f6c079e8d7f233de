"""What an operator sees of the queues, the workers and the schedules: the figures behind
``manage.py jobs queues|workers|schedules`` and the admin's overview pages."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from jobqueue import conf, states
from jobqueue.models import Job, Worker
from jobqueue.runtime.queues import QueueSelection
from jobqueue.store import pauses
from jobqueue.store.jobs import Store

# Counted per queue; succeeded and discarded rows (the bulk of a table) are left out.
COUNTED = (states.PENDING, states.RUNNING, states.FAILED, states.ABANDONED)

# Why a pending job will not be claimed as things are (see ``why_unclaimed``).
NO_WORKER = "no worker"
UNREGISTERED = "unregistered"


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
    # Paused by an operator (manage.py jobs pause, the admin): no worker claims its jobs.
    paused: bool = False
    # Pending jobs of this queue, per task, whose task no live worker has registered.
    unregistered: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def queue_rows(settings: conf.Settings | None = None) -> list[QueueRow]:
    """One row per queue that has jobs, is named in the settings or is paused, in three
    queries: the counts, the paused queues, and the pending jobs of tasks no live worker
    has registered."""
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
            pool=pool_name(settings, row["queue"]),
            due=row["due"],
            scheduled=row["scheduled"],
            running=row["running"],
            failed=row["failed"],
            abandoned=row["abandoned"],
            oldest_due_seconds=None if oldest is None else (now - oldest).total_seconds(),
        )
    paused = pauses.paused()
    for queue in (settings.named_queues | set(paused)) - set(rows):
        rows[queue] = QueueRow(queue=queue, pool=pool_name(settings, queue))
    for queue in paused:
        rows[queue].paused = True
    for queue, task_name, count in Store(settings=settings).unregistered_pending():
        # A job enqueued since the counts were read may name a queue they did not see.
        flagged = rows.setdefault(queue, QueueRow(queue=queue, pool=pool_name(settings, queue)))
        flagged.unregistered[task_name] = count
    return [rows[q] for q in sorted(rows)]


def failed_by_task(using: str = DEFAULT_DB_ALIAS) -> list[tuple[str, int]]:
    """``(task_name, count)`` of the failed jobs, most first: what "Retry all failed" of a
    task would retry (the Queues page's per-task table)."""
    rows = (
        Job.objects.using(using)
        .filter(status=states.FAILED)
        .order_by()
        .values_list("task_name")
        .annotate(n=Count("id"))
    )
    return sorted(((task, n) for task, n in rows), key=lambda row: (-row[1], row[0]))


def pool_name(settings: conf.Settings, queue: str) -> str | None:
    pool = settings.pool_for(queue)
    return pool.name if pool is not None else None


def live_workers(
    using: str = DEFAULT_DB_ALIAS, settings: conf.Settings | None = None
) -> QuerySet[Worker]:
    """Worker rows renewed within ``LEASE``: the processes that may claim now."""
    lease = dt.timedelta(seconds=(settings or conf.get()).lease)
    return Worker.objects.using(using).filter(last_heartbeat__gt=timezone.now() - lease)


def why_unclaimed(
    task_name: str, *, using: str = DEFAULT_DB_ALIAS, settings: conf.Settings | None = None
) -> str | None:
    """Why a pending job of ``task_name`` will not be claimed as things are: NO_WORKER (no
    worker is live), UNREGISTERED (none of the live ones registered the task), or None."""
    registered = list(live_workers(using, settings).values_list("tasks", flat=True))
    if not registered:
        return NO_WORKER
    if not any(isinstance(names, list) and task_name in names for names in registered):
        return UNREGISTERED
    return None


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
        selection = QueueSelection.from_row(w.queues)
        served = selection.describe() if selection else ""
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


# Said of a schedule that no worker has evaluated since it was added or changed: its row
# holds no state yet (or the old definition's), and the next tick shown is computed from now.
NOT_SEEN = "not yet seen by a worker"
# Said of a row whose name is no longer in JOBQUEUE["SCHEDULES"]: nothing ticks it.
NOT_IN_SETTINGS = "not in settings"


@dataclass
class ScheduleRow:
    """One schedule as ``jobs schedules`` and the admin's Schedules page show it.

    The times are aware datetimes in the schedule's time zone (UTC for a row that is no
    longer in settings). ``as_dict`` gives them as ISO 8601 strings.
    """

    name: str
    task: str | None  # None: not in settings, so no task
    expression: str  # the cron text or "every 30 s"; the stored definition if not in settings
    timezone: str | None
    next_tick: dt.datetime | None  # None: not in settings, nothing ticks it
    last_tick: dt.datetime | None
    last_job_id: int | None
    last_job_status: str | None  # None: no run yet, or retention pruned it
    skipped: int
    last_skipped_at: dt.datetime | None
    paused: bool
    seen: bool  # a worker has evaluated it as it is defined now
    in_settings: bool

    @property
    def notes(self) -> list[str]:
        return [
            note
            for note, flagged in (
                ("paused", self.paused),
                (NOT_SEEN, self.in_settings and not self.seen),
                (NOT_IN_SETTINGS, not self.in_settings),
            )
            if flagged
        ]

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        for key, value in values.items():
            if isinstance(value, dt.datetime):
                values[key] = value.isoformat()
        return values


def schedule_rows(
    settings: conf.Settings | None = None,
    now: dt.datetime | None = None,
    *,
    using: str = DEFAULT_DB_ALIAS,
) -> list[ScheduleRow]:
    """Every schedule in settings, then every row left by one no longer there, by name.

    Read-only: a schedule no worker has seen yet gets no row here (its first worker creates
    it), so looking never changes when a schedule first fires.
    """
    from jobqueue.models import Schedule
    from jobqueue.schedules import spec, state

    specs = spec.load(settings or conf.get())
    zones = {s.name: s.timezone for s in specs}
    rows = {
        r.name: r for r in Schedule.objects.using(using).filter(name__in=list(zones)).order_by()
    }
    definitions = {s.name: s.definition for s in specs}
    result = []
    for status in state.status(specs, now, using=using):
        zone = zoneinfo.ZoneInfo(status.timezone)
        row = rows.get(status.name)
        result.append(
            ScheduleRow(
                name=status.name,
                task=status.task,
                expression=status.expression,
                timezone=status.timezone,
                next_tick=_in_zone(status.next_tick, zone),
                last_tick=_in_zone(status.last_tick, zone),
                last_job_id=status.last_job_id,
                last_job_status=status.last_job_status,
                skipped=status.skipped,
                last_skipped_at=_in_zone(status.last_skipped_at, zone),
                paused=status.paused,
                seen=row is not None and row.definition == definitions[status.name],
                in_settings=True,
            )
        )
    result += _rows_not_in_settings(set(zones), using)
    return sorted(result, key=lambda r: r.name)


def _rows_not_in_settings(names: set[str], using: str) -> list[ScheduleRow]:
    from jobqueue.models import Schedule

    left = list(Schedule.objects.using(using).exclude(name__in=names))
    job_ids = [r.last_job_id for r in left if r.last_job_id is not None]
    statuses = dict(Job.objects.using(using).filter(pk__in=job_ids).values_list("pk", "status"))
    return [
        ScheduleRow(
            name=r.name,
            task=None,
            expression=r.definition,
            timezone=None,
            next_tick=None,
            last_tick=_in_zone(r.last_tick, dt.UTC),
            last_job_id=r.last_job_id,
            last_job_status=statuses.get(r.last_job_id) if r.last_job_id else None,
            skipped=r.skipped,
            last_skipped_at=_in_zone(r.last_skipped_at, dt.UTC),
            paused=r.paused,
            seen=True,
            in_settings=False,
        )
        for r in left
    ]


def _in_zone(moment: dt.datetime | None, zone: dt.tzinfo) -> dt.datetime | None:
    return None if moment is None else moment.astimezone(zone)
