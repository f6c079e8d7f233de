"""The ``django.tasks`` backend: Django's task API on jobqueue's durable queue.

``TASKS = {"default": {"BACKEND": "jobqueue.backend.JobQueueBackend"}}`` makes functions
decorated with ``django.tasks.task`` run on jobqueue's workers, with the same leases, crash
recovery, retries, timeouts and pools as ``jobqueue.task``. Needs Django 6.0 or later.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import django

try:
    from django.tasks.backends.base import BaseTaskBackend
except ImportError as exc:  # Django 5.2
    raise ImportError(
        "jobqueue.backend is a django.tasks backend and needs Django 6.0 or later; this is "
        f"Django {django.get_version()}. On Django 5.2 use @jobqueue.task, and leave "
        "jobqueue.backend.JobQueueBackend out of settings.TASKS."
    ) from exc

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone

from jobqueue import conf
from jobqueue.sql import unsupported_vendor
from jobqueue.tasks import adapter
from jobqueue.tasks import base as tasks
from jobqueue.tasks.enqueue import EnqueueOptions, check_run_at, enqueue_calls
from jobqueue.tasks.limits import Concurrency, RateLimit, check_limits
from jobqueue.tasks.options import INHERITED_OPTIONS, validate_options

if TYPE_CHECKING:
    from jobqueue.models import Job

__all__ = ["JobQueueBackend", "JobQueueTask"]

# OPTIONS keys: defaults for every task of this backend, over JOBQUEUE's.
OPTION_KEYS = {
    "MAX_ATTEMPTS": "max_attempts",
    "TIMEOUT": "timeout",
    "ON_CRASH": "on_crash",
    "BACKOFF": "backoff",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobQueueTask(Task):
    """Django's Task plus jobqueue's per-task options, given to ``@task(...)`` on Django 6.1.

    ``None`` means the backend's ``OPTIONS``, else ``JOBQUEUE``'s setting; for
    ``concurrency`` and ``rate_limit``, no limit.
    """

    max_attempts: int | None = None
    timeout: float | None = None
    on_crash: str | None = None
    backoff: conf.Backoff | None = None
    concurrency: Concurrency | None = None
    rate_limit: RateLimit | None = None

    def __post_init__(self) -> None:
        given = {
            name: getattr(self, name)
            for name in INHERITED_OPTIONS
            if getattr(self, name) is not None
        }
        try:
            checked = validate_options(
                given, where=f"@task option {{}} of {self.module_path}".format
            )
            # The keys are checked against the function's own parameters, without the
            # context a takes_context task receives first.
            check_limits(
                f"@task {self.module_path}",
                self.module_path,
                adapter.call_signature(self.func, takes_context=self.takes_context),
                self.concurrency,
                self.rate_limit,
            )
        except (TypeError, ValueError) as exc:
            raise InvalidTask(str(exc)) from None
        if "backoff" in checked:
            object.__setattr__(self, "backoff", checked["backoff"])
        Task.__post_init__(self)


class JobQueueBackend(BaseTaskBackend):
    """Enqueue ``django.tasks`` Tasks as jobqueue jobs, in the caller's transaction."""

    task_class = JobQueueTask

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.defaults = _task_defaults(alias, self.options)

    # -- enqueue side ------------------------------------------------------------------

    def validate_task(self, task: Task) -> None:
        """Django's checks, then register the task so that workers can claim it."""
        if self.queues and task.queue_name not in self.queues:
            raise InvalidTask(
                f"Queue {task.queue_name!r} is not valid for backend {self.alias!r}: "
                f'TASKS["{self.alias}"]["QUEUES"] is {sorted(self.queues)!r}.'
            )
        super().validate_task(task)
        run_after = _aware(task.run_after)
        if run_after is not None:
            # The same bound as .using(run_at=...) of a jobqueue task, as Django's exception.
            try:
                check_run_at(task.module_path, run_after, "run_after")
            except ValueError as exc:
                raise InvalidTask(str(exc)) from None
        adapter.register(task, self.defaults)

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Write a job row in the caller's transaction, through ``jobqueue.task``'s insert."""
        self.validate_task(task)
        registered = adapter.register(task, self.defaults)
        options = EnqueueOptions.build(
            task_name=task.module_path,
            defaults=registered.enqueue_defaults(),
            queue=task.queue_name,
            priority=task.priority,
            run_at=_aware(task.run_after),
        )
        job = enqueue_calls(registered, options, [(tuple(args), dict(kwargs))])[0]
        assert job is not None, "a django.tasks enqueue has no idempotency key"
        result = _result(job, task)
        task_enqueued.send(sender=type(self), task_result=result)
        return result

    # -- results -----------------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult:
        """The result of the job ``result_id`` (its primary key), read from its row."""
        # Imported here: this module may load before the app registry is ready.
        from jobqueue.models import Job

        try:
            job = Job.objects.get(pk=int(result_id))
        except (Job.DoesNotExist, ValueError, TypeError):
            raise TaskResultDoesNotExist(f"no job with id {result_id!r}") from None
        return self._result_for(job)

    async def aget_result(self, result_id: str) -> TaskResult:
        """:meth:`get_result` for async code: one query, no thread hop."""
        # Imported here: this module may load before the app registry is ready.
        from jobqueue.models import Job

        try:
            job = await Job.objects.aget(pk=int(result_id))
        except (Job.DoesNotExist, ValueError, TypeError):
            raise TaskResultDoesNotExist(f"no job with id {result_id!r}") from None
        return self._result_for(job)

    def _result_for(self, job: Job) -> TaskResult:
        registered = tasks.get(job.task_name)
        if not isinstance(registered, adapter.DjangoTaskAdapter):
            registered = _import_task(job.task_name)
        if registered is None:
            raise TaskResultDoesNotExist(
                f"job {job.pk} is a {job.task_name!r} job, not a django.tasks task of this "
                "process (is the module that defines it imported?)"
            )
        return adapter.result_from_job(job, adapter.task_for_job(registered.django_task, job))

    # -- checks ------------------------------------------------------------------------

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        messages: list[checks.CheckMessage] = []
        where = f'TASKS["{self.alias}"]'
        if "jobqueue" not in settings.INSTALLED_APPS and not any(
            app.startswith("jobqueue.apps.") for app in settings.INSTALLED_APPS
        ):
            messages.append(
                checks.Error(
                    f'{where} uses jobqueue.backend.JobQueueBackend, but "jobqueue" is not in '
                    "INSTALLED_APPS: its table, workers and commands are missing.",
                    hint='Add "jobqueue" to INSTALLED_APPS and run migrate.',
                    id="jobqueue.E101",
                )
            )
        vendor = unsupported_vendor(connections[DEFAULT_DB_ALIAS])
        if vendor is not None:
            messages.append(
                checks.Error(
                    f"{where}: jobqueue needs PostgreSQL, MySQL, MariaDB or SQLite; the default "
                    f"database is {vendor}.",
                    id="jobqueue.E102",
                )
            )
        try:
            jobqueue_settings = conf.get()
        except ImproperlyConfigured:
            return messages  # jobqueue.E001 reports it
        for queue in sorted(self.queues):
            if jobqueue_settings.pool_for(queue) is None:
                messages.append(
                    checks.Error(
                        f'{where}["QUEUES"] has {queue!r}, but no pool in JOBQUEUE["POOLS"] '
                        'lists it, JOBQUEUE["ROUTING"] does not route it, and no pool has '
                        'queues "*": its tasks would never run.',
                        hint=f'Route it: JOBQUEUE["ROUTING"] = {{{queue!r}: "<pool>"}}.',
                        id="jobqueue.E103",
                    )
                )
        return messages


def _task_defaults(alias: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``OPTIONS`` at start-up; a bad key or value names itself."""
    where = f'TASKS["{alias}"]["OPTIONS"]'
    if not isinstance(options, Mapping):
        raise InvalidTaskBackend(f"{where} must be a dict, not {options!r}.")
    keys = {name: key for key, name in OPTION_KEYS.items()}

    def label(name: str) -> str:
        return f'{where}["{keys[name]}"]'

    defaults: dict[str, Any] = {}
    for key, value in options.items():
        name = OPTION_KEYS.get(key)
        if name is None:
            raise InvalidTaskBackend(
                f"{where} has an unknown key {key!r}; jobqueue takes {', '.join(OPTION_KEYS)}."
            )
        try:
            defaults |= validate_options({name: value}, where=label)
        except ValueError as exc:
            raise InvalidTaskBackend(str(exc)) from None
    return defaults


def _aware(run_after: dt.datetime | None) -> dt.datetime | None:
    # Django allows a naive run_after only with USE_TZ = False: it is local time then.
    if run_after is None or timezone.is_aware(run_after):
        return run_after
    return timezone.make_aware(run_after)


def _import_task(task_name: str) -> adapter.DjangoTaskAdapter | None:
    """Import the module of a django.tasks task this process has not imported yet."""
    from django.utils.module_loading import import_string

    try:
        candidate = import_string(task_name)
    except ImportError:
        return None
    if isinstance(candidate, Task):
        registered = tasks.get(task_name)
        if isinstance(registered, adapter.DjangoTaskAdapter):
            return registered
    return None


def _result(job: Job, task: Task) -> TaskResult:
    """The result of a job just enqueued, without reading it back."""
    return TaskResult(
        task=task,
        # A job captured by jobqueue.testing.capture() without writing has no id to fetch.
        id=str(job.pk) if job.pk is not None else f"unsaved-{id(job)}",
        status=TaskResultStatus.READY,
        enqueued_at=job.enqueued_at,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=list(job.args),
        kwargs=dict(job.kwargs),
        backend=task.backend,
        errors=[],
        worker_ids=[],
    )
