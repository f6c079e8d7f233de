"""The job table and the registry of live workers.

Every status change goes through :mod:`jobqueue.store`; these models describe the rows and
the indexes whose predicates match the statements in :mod:`jobqueue.sql`.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Q
from django.utils import timezone

from jobqueue import states
from jobqueue.states import Status

# Django's warnings that MySQL and MariaDB ignore an index's condition (models.W037) and
# skip a conditional unique constraint (models.W036): true of Django's DDL, not of
# jobqueue's, whose migration 0006_mysql builds each of them there on a generated column.
_BUILT_BY_0005_MYSQL = {"models.W036", "models.W037"}


def _checked(errors: list[CheckMessage], connection: BaseDatabaseWrapper) -> list[CheckMessage]:
    if connection.vendor != "mysql":
        return errors
    return [error for error in errors if error.id not in _BUILT_BY_0005_MYSQL]


class PartialIndex(models.Index):
    """``models.Index`` with a ``condition`` that jobqueue's migrations build on MySQL and
    MariaDB too, so Django's warning that it would be ignored there is left out. It is a
    plain ``models.Index`` to migrations (same path, equal to one with the same arguments):
    the warning is the only difference."""

    def check(self, model: type[models.Model], connection: BaseDatabaseWrapper) -> Any:
        return _checked(super().check(model, connection), connection)

    def deconstruct(self) -> Any:
        _, args, kwargs = super().deconstruct()
        return "django.db.models.Index", args, kwargs

    def __eq__(self, other: object) -> bool:
        if isinstance(other, models.Index):
            return bool(self.deconstruct() == other.deconstruct())
        return NotImplemented


class PartialUniqueConstraint(models.UniqueConstraint):
    """``models.UniqueConstraint`` with a ``condition``, as :class:`PartialIndex` is for an
    index: built on MySQL and MariaDB by migration 0006_mysql, so without Django's warning
    that it is skipped there."""

    def check(self, model: type[models.Model], connection: BaseDatabaseWrapper) -> Any:
        return _checked(super().check(model, connection), connection)

    def deconstruct(self) -> Any:
        _, args, kwargs = super().deconstruct()
        return "django.db.models.UniqueConstraint", args, kwargs


class Job(models.Model):
    task_name = models.CharField(max_length=255)
    queue = models.CharField(max_length=100, default="default")
    priority = models.SmallIntegerField(default=0)
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    run_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    crashes = models.PositiveIntegerField(default=0)
    # Stored on the row so that any worker can apply the policy to a dead worker's job in one
    # statement, even a worker that does not have the task registered.
    on_crash = models.CharField(max_length=5, default="retry")
    # NULL, not "", means "no key" (and "no token", "no worker" below): the partial unique
    # index must ignore keyless jobs, and NULLs never collide.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    lease_until = models.DateTimeField(null=True, blank=True)
    token = models.CharField(max_length=32, null=True, blank=True)  # noqa: DJ001
    worker = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    last_error = models.TextField(blank=True, default="")
    errors = models.JSONField(default=list)
    result = models.JSONField(null=True, blank=True)
    steps = models.JSONField(default=dict)
    enqueued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    # The W3C trace context (traceparent, tracestate) of the enqueue's span, for the worker's
    # span to continue (jobqueue.tracing); NULL when the job was enqueued outside a trace.
    trace_context = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The claim reads only due pending rows in this order; finished rows are not in
            # the index at all, so a million of them cost the claim nothing.
            # (On MySQL and MariaDB, migration 0006_mysql builds both of these on generated
            # columns that are NULL outside the condition, and the unique key below too.)
            PartialIndex(
                fields=["-priority", "run_at", "id"],
                name="jobqueue_job_claim",
                condition=Q(status=states.PENDING),
            ),
            # Crash recovery scans running rows by lease expiry.
            PartialIndex(
                fields=["lease_until"],
                name="jobqueue_job_running_lease",
                condition=Q(status=states.RUNNING),
            ),
            # Retention prunes by status and age; the admin filters by status.
            models.Index(fields=["status", "finished_at"], name="jobqueue_job_status_finished"),
            models.Index(fields=["queue", "status"], name="jobqueue_job_queue_status"),
        ]
        constraints = [
            # At most one unfinished job per key, enforced by the database so two concurrent
            # enqueues cannot both slip past a read-then-write check.
            PartialUniqueConstraint(
                fields=["idempotency_key"],
                condition=Q(status__in=states.UNFINISHED),
                name="jobqueue_job_unfinished_key",
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=-100, priority__lte=100),
                name="jobqueue_job_priority_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_name} #{self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status not in states.UNFINISHED


class Worker(models.Model):
    """A live worker process. Its heartbeat refreshes ``last_heartbeat``; a row that has not
    been refreshed for a whole ``LEASE`` belongs to a dead process and is reaped."""

    id = models.CharField(max_length=255, primary_key=True)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    pool = models.CharField(max_length=100)
    queues = models.JSONField(default=dict)
    # The task names this process registered (it claims only those), so that a pending job
    # of a task no live worker knows can be named instead of waiting silently. The database
    # default keeps the registration of a worker of an older version (whose statement does
    # not name this column) working during a rolling deploy.
    tasks = models.JSONField(default=list, db_default=[])
    concurrency = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    last_heartbeat = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pool", "started_at"]

    def __str__(self) -> str:
        return self.id


class QueueSummary(Job):
    """The admin's queue overview (jobs per queue and status): a proxy, no table of its own.

    It exists so that the overview has an entry on the admin index; who may see it follows
    the ``Job`` permissions, so it declares none of its own.
    """

    class Meta:
        proxy = True
        verbose_name = "queue"
        verbose_name_plural = "queues"
        default_permissions = ()


class Schedule(models.Model):
    """The shared state of one ``JOBQUEUE["SCHEDULES"]`` entry, whose definition lives in
    settings. Every worker evaluates the schedules on its own timer; the one whose
    compare-and-set advances ``next_tick`` from the value it read enqueues that tick, so a
    tick runs once however many workers and hosts race for it.

    A row is created (with ``next_tick`` the first tick after that moment) the first time a
    worker sees the entry, so a new schedule never runs for ticks before it existed.
    """

    name = models.CharField(max_length=200, primary_key=True)
    # The definition the next tick was computed from ("cron 0 3 * * * Europe/Berlin",
    # "every 30"): a changed definition in settings recomputes ``next_tick`` from now.
    definition = models.CharField(max_length=300)
    next_tick = models.DateTimeField()
    last_tick = models.DateTimeField(null=True, blank=True)
    # The job enqueued for ``last_tick`` (or by "run now"); not a foreign key: retention
    # prunes jobs, and the schedule's state outlives them.
    last_job_id = models.BigIntegerField(null=True, blank=True)
    # Ticks that found the previous run unfinished, and so enqueued nothing.
    skipped = models.PositiveIntegerField(default=0)
    last_skipped_at = models.DateTimeField(null=True, blank=True)
    # Paused by an operator: ticks pass (and advance) without enqueuing, on every host.
    paused = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
