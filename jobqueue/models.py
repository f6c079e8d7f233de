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
from jobqueue.sql import dialect_class
from jobqueue.states import Status

# Django's warnings that MySQL and MariaDB ignore an index's condition (models.W037) and
# skip a conditional unique constraint (models.W036): true of Django's DDL, not of
# jobqueue's, whose migration 0009_mysql builds each of them there on a generated column.
_BUILT_BY_0009_MYSQL = {"models.W036", "models.W037"}


def _checked(errors: list[CheckMessage], connection: BaseDatabaseWrapper) -> list[CheckMessage]:
    dialect = dialect_class(connection)
    if dialect is None or not dialect.conditions_built_by_migration:
        return errors
    return [error for error in errors if error.id not in _BUILT_BY_0009_MYSQL]


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
    index: built on MySQL and MariaDB by migration 0009_mysql, so without Django's warning
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
    # Flow control (jobqueue.tasks.limits): the limits of the task or of this enqueue, and
    # their keys' values, computed at enqueue as "<group>:<value>", so that the claim
    # compares columns and never parses JSON. NULL: no such limit.
    concurrency_key = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    rate_key = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001
    rate_limit = models.PositiveIntegerField(null=True, blank=True)
    rate_per = models.FloatField(null=True, blank=True)
    rate_burst = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The claim reads only due pending rows in this order; finished rows are not in
            # the index at all, so a million of them cost the claim nothing.
            # (On MySQL and MariaDB, migration 0009_mysql builds both of these on generated
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
            # A concurrency limit counts the running jobs of one key: a range of this.
            PartialIndex(
                fields=["concurrency_key"],
                name="jobqueue_job_running_key",
                condition=Q(status=states.RUNNING, concurrency_key__isnull=False),
            ),
            # An idle worker's next look waits for a rate key's next start: that key's
            # pending jobs, found from the key.
            PartialIndex(
                fields=["rate_key"],
                name="jobqueue_job_pending_rate_key",
                condition=Q(status=states.PENDING, rate_key__isnull=False),
            ),
            # Retention prunes by status and age; the admin filters by status.
            models.Index(fields=["status", "finished_at"], name="jobqueue_job_status_finished"),
            # Per queue and status (the overview, the admin's filters); with run_at, the
            # metrics' due and scheduled counts and a queue's oldest due job are a range of
            # it, read without the table.
            models.Index(fields=["queue", "status", "run_at"], name="jobqueue_job_queue_due"),
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


class LimitKey(models.Model):
    """One limit key's shared state, made by the first claim that meets the key.

    ``tat`` is a rate limit's theoretical arrival time (GCRA): the next start is allowed
    once ``tat`` minus the burst's allowance has passed. ``version`` grows with every claim
    that takes a job of the key; a claim locks the row and compares its ``version`` with the
    one its snapshot read, so that two claims never count the same running jobs. Neither is
    a count of anything: how many of a key's jobs run is read from the job rows, so a crash
    or a double release cannot leave a wrong number here.
    """

    key = models.CharField(max_length=500, primary_key=True)
    tat = models.DateTimeField(null=True, blank=True)
    # Seconds before tat that a start is allowed (a rate limit's burst times its interval),
    # as of the latest claim of the key: blocked keys are then one set the claim reads once.
    allowance = models.FloatField(default=0.0)
    version = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key

    @classmethod
    def check(cls, **kwargs: Any) -> list[CheckMessage]:
        # Django's mysql.W003 is a caution about old servers' 767-byte index keys; the
        # MySQL 8.0+ and MariaDB 10.6+ that jobqueue.E005 requires index 3,072 bytes, and
        # the 500 characters of a key (2,000 bytes of utf8mb4) fit.
        return [error for error in super().check(**kwargs) if error.id != "mysql.W003"]


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
    # The process's resident memory in bytes, as of its last heartbeat. NULL for a row an
    # older version wrote (its statement does not name this column) during a rolling deploy.
    memory = models.BigIntegerField(null=True, blank=True)

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


class Dashboard(Job):
    """The admin's dashboard (charts of the history, the per-task table, the workers): a proxy
    for its entry on the admin index, with the ``Job`` permissions like ``QueueSummary``."""

    class Meta:
        proxy = True
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard"
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


class QueuePause(models.Model):
    """A paused queue: while its row exists, no worker claims the queue's jobs (the claim
    statement itself leaves them out, so it holds on every worker and host at once, and
    across restarts). Enqueuing to it goes on; deleting the row resumes it. Written only
    through :mod:`jobqueue.pauses`."""

    queue = models.CharField(max_length=100, primary_key=True)
    paused_at = models.DateTimeField(default=timezone.now)
    # The admin user's name, or "manage.py jobs pause", or whatever a script says.
    paused_by = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["queue"]

    def __str__(self) -> str:
        return self.queue


class MinuteStat(models.Model):
    """What one worker saw in one minute, for one queue, task and outcome: the admin's
    dashboard reads its history from these rows, not from the job table (retention deletes
    succeeded jobs, and counting a million rows per page view is too slow).

    Each worker tallies the ``job_started``/``job_finished`` signals in-process and writes its
    tally once a minute in one multi-row insert (:mod:`jobqueue.runtime.tally`); several rows
    for the same key (workers, flushes) are summed by the reader. ``outcome`` is one of
    ``signals.OUTCOMES``, or ``"started"`` for the starts, whose histogram is of their wait
    (seconds from due to start); the outcomes' histogram is of the handlers' durations. The
    histogram's buckets are :data:`jobqueue.store.stats.BOUNDS`, one column each, so that the
    database sums them.
    """

    minute = models.DateTimeField()  # the start of the time the row covers
    # The seconds the row covers: 60 as a worker writes it; older rows are compacted into
    # 600 and then 3600, summed over the workers (stats.TIERS).
    span = models.PositiveIntegerField(default=60)
    queue = models.CharField(max_length=100)
    task_name = models.CharField(max_length=255)
    outcome = models.CharField(max_length=10)
    count = models.PositiveIntegerField()
    # The sum of the seconds histogrammed (durations, or waits for "started").
    seconds = models.FloatField(default=0.0)
    h00 = models.PositiveIntegerField(default=0)
    h01 = models.PositiveIntegerField(default=0)
    h02 = models.PositiveIntegerField(default=0)
    h03 = models.PositiveIntegerField(default=0)
    h04 = models.PositiveIntegerField(default=0)
    h05 = models.PositiveIntegerField(default=0)
    h06 = models.PositiveIntegerField(default=0)
    h07 = models.PositiveIntegerField(default=0)
    h08 = models.PositiveIntegerField(default=0)
    h09 = models.PositiveIntegerField(default=0)
    h10 = models.PositiveIntegerField(default=0)
    h11 = models.PositiveIntegerField(default=0)
    h12 = models.PositiveIntegerField(default=0)
    h13 = models.PositiveIntegerField(default=0)
    h14 = models.PositiveIntegerField(default=0)
    h15 = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-minute"]
        # The dashboard reads a range of its spans; the compaction one span's oldest rows.
        indexes = [models.Index(fields=["span", "minute"], name="jobqueue_minutestat_span")]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.queue} {self.task_name} {self.outcome}"


class QueueSample(models.Model):
    """One queue's depth in one minute, written by the first worker to sample that minute
    (the unique key turns the others' inserts into nothing)."""

    minute = models.DateTimeField()
    queue = models.CharField(max_length=100)
    due = models.PositiveIntegerField(default=0)
    scheduled = models.PositiveIntegerField(default=0)
    running = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-minute"]
        constraints = [
            models.UniqueConstraint(fields=["minute", "queue"], name="jobqueue_queuesample_key")
        ]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.queue}"
