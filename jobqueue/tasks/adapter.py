"""The bridge between a ``django.tasks`` Task and jobqueue's registry, worker and rows.

A Django task is registered in :mod:`jobqueue.tasks` under its ``module_path`` as a
:class:`DjangoTaskAdapter`, so a worker discovers, claims, leases, times out and recovers it
exactly like a ``@jobqueue.task``: the worker does not know the difference. This module also
turns a ``Job`` row into Django's ``TaskResult`` and sends Django's ``task_started`` and
``task_finished`` signals from the worker. It needs Django 6 (``django.tasks``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from django.dispatch import receiver
from django.tasks import Task as DjangoTask
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.exceptions import InvalidTask
from django.tasks.signals import task_finished, task_started

from jobqueue import signals, states
from jobqueue.store import explain
from jobqueue.store.errors import WORKER_LOST, WorkerLost
from jobqueue.tasks import base as tasks
from jobqueue.tasks.base import TaskOptions

if TYPE_CHECKING:
    from jobqueue.models import Job
    from jobqueue.tasks.context import JobContext

logger = logging.getLogger("jobqueue")

STATUSES: Mapping[str, TaskResultStatus] = {
    states.PENDING: TaskResultStatus.READY,
    states.RUNNING: TaskResultStatus.RUNNING,
    states.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    states.FAILED: TaskResultStatus.FAILED,
    states.ABANDONED: TaskResultStatus.FAILED,
    states.DISCARDED: TaskResultStatus.FAILED,
}
# Per-task options a JobQueueTask (or the backend's OPTIONS) may set, as TaskOptions fields.
PER_TASK_OPTIONS = ("max_attempts", "timeout", "on_crash", "backoff")
# Per-task options only a JobQueueTask sets: the backend's OPTIONS have no default for them.
LIMIT_OPTIONS = ("concurrency", "rate_limit")
CRASH = WORKER_LOST


class DjangoTaskAdapter(tasks.Task[Any, Any]):
    """A ``django.tasks`` Task as jobqueue's worker sees it.

    It is registered with ``takes_context=True`` so that :meth:`context` runs, in the slot
    thread, before every attempt: it reads the row, sends ``task_started`` and hands Django's
    ``TaskContext`` to the function if it asked for one.
    """

    def __init__(self, django_task: DjangoTask, defaults: Mapping[str, Any]) -> None:
        self.django_task = django_task
        self.defaults = dict(defaults)
        given = {
            option: getattr(django_task, option, None)
            if getattr(django_task, option, None) is not None
            else defaults.get(option)
            for option in PER_TASK_OPTIONS
        }
        limits = {option: getattr(django_task, option, None) for option in LIMIT_OPTIONS}
        options = TaskOptions(
            queue=django_task.queue_name,
            priority=django_task.priority,
            takes_context=True,
            **given,
            **limits,
        )
        super().__init__(_entry(django_task), django_task.module_path, options)
        # Arguments (and limit keys) are bound to the Django function, without its context.
        self.signature = call_signature(django_task.func, takes_context=django_task.takes_context)

    def __repr__(self) -> str:
        return f"<DjangoTaskAdapter {self.name}>"

    def context(self, ctx: JobContext) -> TaskContext:
        row = ctx.job
        result = result_from_job(row, task_for_job(self.django_task, row))
        task_started.send(sender=type(self.django_task.get_backend()), task_result=result)
        return TaskContext(task_result=result)


def call_signature(func: Callable[..., Any], *, takes_context: bool) -> inspect.Signature:
    """The parameters a caller passes to a ``django.tasks`` function: its own, without the
    ``context`` a ``takes_context`` task receives first."""
    signature = inspect.signature(func)
    if takes_context:
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return signature


def _entry(django_task: DjangoTask) -> Callable[..., Any]:
    """The function the worker calls: drops Django's context unless the task takes it."""
    func, takes_context = django_task.func, django_task.takes_context
    entry: Callable[..., Any]
    if inspect.iscoroutinefunction(func):

        async def entry(context: TaskContext, *args: Any, **kwargs: Any) -> Any:
            if takes_context:
                return await func(context, *args, **kwargs)
            return await func(*args, **kwargs)

    else:

        def entry(context: TaskContext, *args: Any, **kwargs: Any) -> Any:
            if takes_context:
                return func(context, *args, **kwargs)
            return func(*args, **kwargs)

    # The registry recognises a re-registration of the same function by these names.
    entry.__module__ = func.__module__
    entry.__qualname__ = func.__qualname__
    return entry


def register(django_task: DjangoTask, defaults: Mapping[str, Any]) -> DjangoTaskAdapter:
    """Register (once per function and options) the adapter of ``django_task``."""
    existing = tasks.get(django_task.module_path)
    if (
        isinstance(existing, DjangoTaskAdapter)
        and existing.defaults == defaults
        and _same_definition(existing, django_task)
    ):
        return existing
    adapter = DjangoTaskAdapter(django_task, defaults)
    tasks.register(adapter)
    return adapter


def _same_definition(adapter: DjangoTaskAdapter, django_task: DjangoTask) -> bool:
    # .using() makes a new Task with another queue, priority or run_after: same definition.
    registered = adapter.django_task
    return registered.func is django_task.func and all(
        getattr(registered, option, None) == getattr(django_task, option, None)
        for option in (*PER_TASK_OPTIONS, *LIMIT_OPTIONS, "takes_context", "backend")
    )


def task_for_job(django_task: DjangoTask, job: Job) -> DjangoTask:
    """The task as it was enqueued: the row's queue, priority and ``run_after``."""
    run_after = run_after_of(job)
    if (django_task.queue_name, django_task.priority, django_task.run_after) == (
        job.queue,
        job.priority,
        run_after,
    ):
        return django_task
    try:
        return dataclasses.replace(
            django_task, queue_name=job.queue, priority=job.priority, run_after=run_after
        )
    except InvalidTask:  # the queue has since left the backend's QUEUES
        return django_task


def run_after_of(job: Job) -> dt.datetime | None:
    """``Task.run_after`` of a job: its ``run_at``, unless it was due at once.

    A job enqueued without ``run_after`` is due at its enqueue time, to the microsecond (one
    clock reading sets both), and Django's own backends give such a task ``None``. One
    enqueued with ``run_after`` keeps it as ``run_at`` until the row is rescheduled: a retry's
    backoff, a ``Snooze``, a crash recovery or an operator's Retry move ``run_at`` to when
    the job is due again, and that is what ``run_after`` says from then on.
    """
    return None if job.run_at == job.enqueued_at else job.run_at


def result_from_job(job: Job, django_task: DjangoTask) -> TaskResult:
    """Django's view of a row: status, errors, the workers of each attempt, the return value."""
    errors = [
        TaskError(
            exception_class_path=exception_class_path(entry.get("type") or "Exception"),
            traceback=entry.get("traceback") or explain.message(entry),
        )
        for entry in job.errors
    ]
    # One worker id per attempt: TaskContext.attempt is len(worker_ids). A crash is not an
    # attempt (it is retried without spending one), so its entry names no attempt here.
    worker_ids = [entry.get("worker") or "" for entry in job.errors if entry.get("type") != CRASH]
    # A running job with no start is held in a worker's line, claimed ahead of its slots:
    # for Django it is still waiting, and its attempt has not begun.
    held = job.status == states.RUNNING and job.started_at is None
    if job.status in (states.RUNNING, states.SUCCEEDED) and not held:
        worker_ids.append(job.worker or "")
    result: TaskResult = TaskResult(
        task=django_task,
        id=str(job.pk),
        status=TaskResultStatus.READY if held else STATUSES[job.status],
        enqueued_at=job.enqueued_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.started_at,
        args=list(job.args),
        kwargs=dict(job.kwargs),
        backend=django_task.backend,
        errors=errors,
        worker_ids=worker_ids,
    )
    if job.status == states.SUCCEEDED:
        object.__setattr__(result, "_return_value", job.result)
    return result


def exception_class_path(error_type: str) -> str:
    """``Job.errors`` name builtins by bare name; Django wants an importable path."""
    if error_type == CRASH:
        return f"{WorkerLost.__module__}.{WorkerLost.__qualname__}"
    return error_type if "." in error_type else f"builtins.{error_type}"


@receiver(signals.job_finished, dispatch_uid="jobqueue.adapter.task_finished")
def _send_task_finished(
    sender: Any, *, job_id: int, task_name: str, status: str, **kw: Any
) -> None:
    # Sent after the outcome is written, for final outcomes only: a retry is not the end.
    if status not in (states.SUCCEEDED, states.FAILED):
        return
    adapter = tasks.get(task_name)
    if not isinstance(adapter, DjangoTaskAdapter):
        return
    # Imported here: this module may load before the app registry is ready.
    from jobqueue.models import Job

    try:
        row = Job.objects.get(pk=job_id)
        result = result_from_job(row, task_for_job(adapter.django_task, row))
        task_finished.send(sender=type(adapter.django_task.get_backend()), task_result=result)
    except Exception:
        # The outcome is written; a receiver's failure must not turn it into another one.
        logger.exception(
            "job %s (%s): sending django.tasks task_finished failed", job_id, task_name
        )
