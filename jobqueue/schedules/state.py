"""The database side of the schedules: one ``Schedule`` row per entry, advanced by
compare-and-set, so that each tick is enqueued once however many workers race for it.

Every function takes ``now`` (an aware datetime) from its caller, so tests control time.
Nothing here writes a job's status: ticks enqueue ordinary jobs through
:mod:`jobqueue.enqueue`, with the schedule's idempotency key, which is what keeps a
schedule to one unfinished run (a duplicate enqueue returns None).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models import F

from jobqueue import conf, states
from jobqueue.models import Job, Schedule
from jobqueue.schedules.spec import ScheduleSpec, load
from jobqueue.tasks import base as tasks
from jobqueue.tasks.enqueue import EnqueueOptions, enqueue_calls

if TYPE_CHECKING:
    from jobqueue.tasks.base import Task

logger = logging.getLogger("jobqueue.schedules")

Kind = Literal["enqueued", "skipped", "paused", "lost", "not_due"]


@dataclass(frozen=True)
class TickOutcome:
    """What one evaluation of a schedule did.

    - ``enqueued``: this caller won the tick and enqueued ``job_id`` for it;
    - ``skipped``: it won the tick, but the run ``unfinished_job_id`` was still pending or
      running, so nothing was enqueued (counted in ``Schedule.skipped``);
    - ``paused``: it won the tick of a paused schedule: the tick passed, nothing enqueued;
    - ``lost``: another worker advanced the schedule first (or its definition changed);
    - ``not_due``: the tick read is still ahead of ``now``.

    ``next_tick`` is the schedule's next tick as the row now has it (None if the row is gone),
    and, for ``lost``, ``definition`` is the row's: another than the spec's means workers with
    other settings (a rolling deploy) advance it now.
    """

    kind: Kind
    tick: dt.datetime | None
    next_tick: dt.datetime | None
    job_id: int | None = None
    unfinished_job_id: int | None = None
    definition: str | None = None


@dataclass(frozen=True)
class ScheduleStatus:
    """One schedule as an operator reads it (``jobs schedules``, the admin)."""

    name: str
    task: str
    expression: str
    timezone: str
    next_tick: dt.datetime | None
    last_tick: dt.datetime | None
    last_job_id: int | None
    last_job_status: str | None  # None if there is no last job, or retention pruned it
    skipped: int
    last_skipped_at: dt.datetime | None
    paused: bool


def _model() -> type[Schedule]:

    return Schedule


def sync(
    specs: Iterable[ScheduleSpec], now: dt.datetime, *, using: str = DEFAULT_DB_ALIAS
) -> dict[str, Schedule]:
    """Make sure each spec has its row, and that the row's next tick is computed from the
    spec's definition; return the rows by name.

    A new row's first tick is the first after ``now``: a schedule never runs for ticks
    before it existed. A row whose definition changed in settings gets its next tick
    recomputed from ``now`` (the old definition's overdue tick is not run).
    """
    model = _model()
    rows: dict[str, Schedule] = {}
    for spec in specs:
        row, created = model.objects.using(using).get_or_create(
            name=spec.name,
            defaults={
                "definition": spec.definition,
                "next_tick": spec.next_after(now),
                "created_at": now,
                "updated_at": now,
            },
        )
        if not created and row.definition != spec.definition:
            following = spec.next_after(now)
            # Compared with the definition read: of two workers with the new settings, one
            # recomputes; the other's update matches nothing and it reads the result.
            model.objects.using(using).filter(name=spec.name, definition=row.definition).update(
                definition=spec.definition, next_tick=following, updated_at=now
            )
            row = model.objects.using(using).get(name=spec.name)
            logger.info(
                "schedule %s: definition changed to %r; next tick %s",
                spec.name,
                spec.definition,
                row.next_tick.isoformat(),
            )
        rows[spec.name] = row
    return rows


def tick(
    spec: ScheduleSpec,
    read_next_tick: dt.datetime,
    now: dt.datetime,
    *,
    using: str = DEFAULT_DB_ALIAS,
) -> TickOutcome:
    """Evaluate ``spec`` whose row had ``read_next_tick`` when this caller last read it.

    The caller that moves ``next_tick`` from the value it read wins the tick, and enqueues
    its job in the same transaction: a crash between the two leaves neither. After downtime
    (``read_next_tick`` several ticks ago) the one job is for the latest missed tick.
    """
    if read_next_tick > now:
        return TickOutcome("not_due", None, read_next_tick)
    model = _model()
    latest = spec.latest_at_or_before(now)
    due = latest if latest is not None and latest >= read_next_tick else read_next_tick
    following = spec.next_after(now)
    with transaction.atomic(using=using):
        # The compare-and-set. On PostgreSQL a concurrent UPDATE of the row waits for this
        # transaction, then re-checks the WHERE against the committed row (READ COMMITTED)
        # and matches nothing; on SQLite writers take turns. Either way one caller wins.
        won = (
            model.objects.using(using)
            .filter(name=spec.name, next_tick=read_next_tick, definition=spec.definition)
            .update(next_tick=following, updated_at=now)
        )
        if not won:
            current = model.objects.using(using).filter(name=spec.name).first()
            if current is None:
                return TickOutcome("lost", None, None)
            return TickOutcome("lost", None, current.next_tick, definition=current.definition)
        outcome = _won(spec, model, due, following, now, using)
    # Logged once committed: a rollback would have undone what the line says.
    if outcome.kind == "enqueued":
        logger.info(
            "schedule %s: enqueued job %s for the tick of %s",
            spec.name,
            outcome.job_id,
            due.isoformat(),
        )
    elif outcome.kind == "skipped":
        logger.warning(
            "schedule %s: skipped the tick of %s: its previous run, job %s, is unfinished",
            spec.name,
            due.isoformat(),
            outcome.unfinished_job_id,
        )
    else:
        logger.info("schedule %s: tick %s passed while paused", spec.name, due.isoformat())
    return outcome


def _won(
    spec: ScheduleSpec,
    model: type[Schedule],
    due: dt.datetime,
    following: dt.datetime,
    now: dt.datetime,
    using: str,
) -> TickOutcome:
    """The tick is this caller's (inside its transaction): enqueue, or skip, or let it pass."""
    rows = model.objects.using(using).filter(name=spec.name)
    if rows.filter(paused=True).exists():
        return TickOutcome("paused", due, following)
    job = _enqueue(spec, due, using)
    if job is None:
        # The key is held: the previous run is pending or running.
        rows.update(skipped=F("skipped") + 1, last_skipped_at=now)
        return TickOutcome(
            "skipped", due, following, unfinished_job_id=_unfinished_job_id(spec, using)
        )
    # last_tick is the tick of last_job_id: a skipped or paused tick leaves both.
    rows.update(last_tick=due, last_job_id=job.pk)
    return TickOutcome("enqueued", due, following, job_id=job.pk)


def run_now(spec: ScheduleSpec, now: dt.datetime, *, using: str = DEFAULT_DB_ALIAS) -> Job | None:
    """Enqueue one run of ``spec`` now, outside its ticks (an operator's "run now").

    None if the schedule's previous run is still pending or running: the one-unfinished
    rule holds here too. A paused schedule runs as well: the operator asked. The ticks are
    left as they were; ``last_job_id`` names the new job.
    """
    with transaction.atomic(using=using):
        sync([spec], now, using=using)
        job = _enqueue(spec, now, using)
        if job is not None:
            _model().objects.using(using).filter(name=spec.name).update(
                last_job_id=job.pk, updated_at=now
            )
    if job is not None:
        logger.info("schedule %s: enqueued job %s (run now)", spec.name, job.pk)
    return job


def set_paused(name: str, paused: bool, *, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Pause or resume the schedule ``name`` on every host; False if it has no row and is
    not in ``JOBQUEUE["SCHEDULES"]``."""
    from django.utils import timezone

    model = _model()
    now = timezone.now()
    if not model.objects.using(using).filter(name=name).exists():
        configured = [s for s in load(conf.get()) if s.name == name]
        if not configured:
            return False
        sync(configured, now, using=using)
    model.objects.using(using).filter(name=name).update(paused=paused, updated_at=now)
    logger.info("schedule %s: %s", name, "paused" if paused else "resumed")
    return True


def status(
    specs: Iterable[ScheduleSpec],
    now: dt.datetime | None = None,
    *,
    using: str = DEFAULT_DB_ALIAS,
) -> list[ScheduleStatus]:
    """The state of each spec, read-only. A schedule no worker has seen yet (no row) shows
    the next tick its first worker will set."""
    from django.utils import timezone

    specs = list(specs)
    now = now or timezone.now()
    rows = {
        r.name: r for r in _model().objects.using(using).filter(name__in=[s.name for s in specs])
    }
    job_ids = [r.last_job_id for r in rows.values() if r.last_job_id is not None]
    statuses = dict(Job.objects.using(using).filter(pk__in=job_ids).values_list("pk", "status"))
    result = []
    for spec in specs:
        row = rows.get(spec.name)
        current = row is not None and row.definition == spec.definition
        result.append(
            ScheduleStatus(
                name=spec.name,
                task=spec.task_name,
                expression=spec.expression,
                timezone=spec.timezone,
                next_tick=row.next_tick if row is not None and current else spec.next_after(now),
                last_tick=row.last_tick if row else None,
                last_job_id=row.last_job_id if row else None,
                last_job_status=statuses.get(row.last_job_id) if row and row.last_job_id else None,
                skipped=row.skipped if row else 0,
                last_skipped_at=row.last_skipped_at if row else None,
                paused=row.paused if row else False,
            )
        )
    return result


def _task(spec: ScheduleSpec) -> Task[Any, Any]:

    found = tasks.get(spec.task_name)
    if found is None:
        tasks.discover()
        found = tasks.get(spec.task_name)
    if found is None:
        raise ImproperlyConfigured(
            f'JOBQUEUE["SCHEDULES"]["{spec.name}"]["task"]: no installed app registers a '
            f"task named {spec.task_name!r}."
        )
    return found


def _enqueue(spec: ScheduleSpec, run_at: dt.datetime, using: str) -> Job | None:
    """One job of the schedule's task, in the caller's transaction; None if an unfinished
    job holds the schedule's idempotency key."""

    task = _task(spec)
    options = EnqueueOptions.build(
        task_name=task.name,
        defaults=task.enqueue_defaults(),
        run_at=run_at,
        idempotency_key=spec.idempotency_key,
        database=using,
        **spec.options,
    )
    return enqueue_calls(task, options, [(spec.args, dict(spec.kwargs))])[0]


def _unfinished_job_id(spec: ScheduleSpec, using: str) -> int | None:

    return (
        Job.objects.using(using)
        .filter(idempotency_key=spec.idempotency_key, status__in=states.UNFINISHED)
        .values_list("pk", flat=True)
        .first()
    )
