"""The test kit: public API for testing code that enqueues jobs, and the jobs themselves.

- :func:`capture` records every job enqueued inside a ``with`` block by the thread that
  opened it (or in its context), through either API (``@jobqueue.task`` or
  ``django.tasks``), with or without writing the rows;
  :meth:`Captured.assert_enqueued` and :meth:`Captured.assert_not_enqueued` check it.
- :func:`run_jobs` runs the due jobs in the test process, one at a time, until none is
  left: retries and ``Snooze`` are honoured, and time is advanced instead of slept.
- ``pytest_plugins = ["jobqueue.pytest_plugin"]`` exposes both as fixtures.

See ``docs/testing.md``.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobqueue import conf, states
from jobqueue.runtime import attempt as attempts
from jobqueue.sql import Queries
from jobqueue.store.jobs import Store
from jobqueue.tasks import base as tasks
from jobqueue.tasks import enqueue
from jobqueue.tasks.arguments import Call, Signed
from jobqueue.tasks.enqueue import EnqueueOptions
from jobqueue.tasks.limits import Limits

if TYPE_CHECKING:
    from jobqueue.models import Job

__all__ = ["Captured", "Clock", "Enqueued", "Outcome", "Run", "capture", "run_jobs"]

TEST_WORKER = f"jobqueue.testing:{os.getpid()}"


# -- capturing ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Enqueued:
    """One job enqueued inside a :func:`capture` block."""

    task_name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    queue: str
    priority: int
    run_at: dt.datetime
    idempotency_key: str | None
    # The row (write=True), an unsaved Job (write=False), or None when an unfinished job
    # already held the idempotency key and nothing was written.
    job: Job | None

    def __str__(self) -> str:
        arguments = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.task_name}({', '.join(arguments)}) on queue {self.queue!r}"


class Captured(Sequence[Enqueued]):
    """What was enqueued inside a :func:`capture` block, in order."""

    def __init__(self, *, write: bool) -> None:
        self.write = write
        self._items: list[Enqueued] = []

    @overload
    def __getitem__(self, index: int) -> Enqueued: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Enqueued]: ...
    def __getitem__(self, index: int | slice) -> Enqueued | Sequence[Enqueued]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"<Captured {[str(item) for item in self._items]}>"

    def filter(self, task: Any, *args: Any, **kwargs: Any) -> list[Enqueued]:
        """The captured jobs of ``task``; with arguments, only the calls with those arguments.

        ``task`` is a ``@jobqueue.task``, a ``django.tasks`` Task or a task name. Arguments
        are compared as the handler would receive them, so ``f("ada")`` matches an enqueue
        of ``f(email="ada")``. Without arguments, every call of ``task`` matches.
        """
        name = task_name(task)
        matching = [item for item in self._items if item.task_name == name]
        if not args and not kwargs:
            return matching
        wanted = _arguments(name, args, kwargs)
        return [item for item in matching if _arguments(name, item.args, item.kwargs) == wanted]

    def assert_enqueued(
        self, task: Any, *args: Any, count: int | None = None, **kwargs: Any
    ) -> list[Enqueued]:
        """Fail unless ``task`` was enqueued (``count`` times, if given) with these arguments.

        Returns the matching captured jobs.
        """
        found = self.filter(task, *args, **kwargs)
        if (count is None and found) or (count is not None and len(found) == count):
            return found
        expected = "at least once" if count is None else f"{count} time(s)"
        raise AssertionError(
            f"expected {_describe(task, args, kwargs)} to be enqueued {expected}, "
            f"found {len(found)}. {self._listing()}"
        )

    def assert_not_enqueued(self, task: Any, *args: Any, **kwargs: Any) -> None:
        """Fail if ``task`` was enqueued (with these arguments, if given)."""
        found = self.filter(task, *args, **kwargs)
        if found:
            raise AssertionError(
                f"expected {_describe(task, args, kwargs)} not to be enqueued, found "
                f"{len(found)}. {self._listing()}"
            )

    def _listing(self) -> str:
        if not self._items:
            return "Nothing was enqueued."
        return "Enqueued: " + "; ".join(str(item) for item in self._items) + "."

    # Called by enqueue_calls with validated calls.
    def _intercept(
        self,
        task: Signed,
        options: EnqueueOptions,
        calls: Sequence[Call],
        keys: Sequence[str | None],
        flow_keys: enqueue.FlowKeys,
    ) -> list[Job | None]:
        now = timezone.now()
        if self.write:
            jobs = enqueue.insert_calls(task, options, calls, keys, flow_keys)
        else:
            flows = flow_keys if flow_keys is not None else [(None, None)] * len(calls)
            jobs = [
                _unsaved(task, options, args, kwargs, key, flow, now)
                for (args, kwargs), key, flow in zip(calls, keys, flows, strict=True)
            ]
        for (args, kwargs), key, job in zip(calls, keys, jobs, strict=True):
            self._items.append(
                Enqueued(
                    task_name=task.name,
                    args=tuple(args),
                    kwargs=dict(kwargs),
                    queue=options.queue,
                    priority=options.priority,
                    run_at=job.run_at if job is not None else options.due_at(now),
                    idempotency_key=key,
                    job=job,
                )
            )
        return jobs


@contextmanager
def capture(*, write: bool = False) -> Iterator[Captured]:
    """Record every job enqueued inside the block, by this thread or in its context.

    The capture lives in a ``ContextVar``: another thread's enqueues are never recorded,
    and a thread started inside the block is recorded only if it runs in a copy of this
    context (``contextvars.copy_context().run``). ``run_jobs`` needs nothing more: it
    calls handlers in the calling thread.

    ``write=False`` (the default) writes nothing: each enqueue returns an unsaved ``Job``
    and no worker, nor :func:`run_jobs`, will ever see it. ``write=True`` writes the rows as
    usual (in the caller's transaction), so :func:`run_jobs` can run them afterwards.
    Arguments and options are validated either way, exactly as outside the block.
    """
    captured = Captured(write=write)
    intercept = captured._intercept
    enqueue.interceptors.set((*enqueue.interceptors.get(), intercept))
    try:
        yield captured
    finally:
        # Removed by identity rather than by ContextVar.reset(token): the token is refused
        # when the block ends in another context than it began (an async fixture's teardown),
        # and captures closed out of order still leave the others installed.
        enqueue.interceptors.set(tuple(i for i in enqueue.interceptors.get() if i is not intercept))


def task_name(task: Any) -> str:
    """The registered name of a ``@jobqueue.task``, a ``django.tasks`` Task, or a name."""
    if isinstance(task, str):
        return task
    if isinstance(task, tasks.Task):
        return task.name
    if isinstance(task, tasks.BoundTask):
        return task.task.name
    module_path = getattr(task, "module_path", None)  # a django.tasks Task
    if isinstance(module_path, str):
        return module_path
    raise TypeError(f"expected a task or a task name, not {task!r}")


def _arguments(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    registered = tasks.get(name)
    if registered is None:
        return (tuple(args), kwargs)
    try:
        bound = registered.signature.bind(*args, **kwargs)
    except TypeError:
        return (tuple(args), kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _describe(task: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    arguments = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{task_name(task)}({', '.join(arguments)})" if arguments else task_name(task)


def _unsaved(
    task: Signed,
    options: EnqueueOptions,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    key: str | None,
    flow: tuple[str | None, str | None],
    now: dt.datetime,
) -> Job:
    # Imported here: this module may load before the app registry is ready.
    from jobqueue.models import Job

    return Job(
        task_name=task.name,
        queue=options.queue,
        priority=options.priority,
        args=list(args),
        kwargs=dict(kwargs),
        status=states.PENDING,
        run_at=options.due_at(now),
        max_attempts=options.max_attempts or conf.get().max_attempts,
        on_crash=options.on_crash or conf.get().on_crash,
        idempotency_key=key,
        concurrency_key=flow[0],
        rate_key=flow[1],
        **Limits(task.name, options.concurrency, options.rate_limit).columns(),
        enqueued_at=now,
        updated_at=now,
    )


# -- running ------------------------------------------------------------------------------


class Clock:
    """The runner's now: the real time plus every advance. Pass one to keep it across runs."""

    def __init__(self) -> None:
        self.advanced = 0.0

    def now(self) -> dt.datetime:
        return timezone.now() + dt.timedelta(seconds=self.advanced)

    def advance(self, seconds: float) -> None:
        self.advanced += max(0.0, seconds)


@dataclass(frozen=True)
class Outcome:
    """One attempt run by :func:`run_jobs`: the job's status once it ended."""

    job_id: int
    task_name: str
    attempt: int
    status: str


@dataclass
class Run:
    """What :func:`run_jobs` did, attempt by attempt."""

    outcomes: list[Outcome] = field(default_factory=list)
    clock: Clock = field(default_factory=Clock)

    def _final(self, status: str) -> list[int]:
        last = {outcome.job_id: outcome.status for outcome in self.outcomes}
        return [job_id for job_id, final in last.items() if final == status]

    @property
    def succeeded(self) -> list[int]:
        """Ids of the jobs that ended ``succeeded``."""
        return self._final(states.SUCCEEDED)

    @property
    def failed(self) -> list[int]:
        """Ids of the jobs that ended ``failed``."""
        return self._final(states.FAILED)


def run_jobs(
    *,
    queues: Sequence[str] | None = None,
    advance: bool = True,
    clock: Clock | None = None,
    max_attempts: int = 1000,
    using: str = DEFAULT_DB_ALIAS,
) -> Run:
    """Run jobs in this process, one attempt at a time, until none is left.

    Each attempt goes through the worker's own claim, handler call and fenced outcome
    writes, so retries, ``PermanentError``, ``Snooze`` and steps behave as on a worker.
    When nothing is due and ``advance`` is true, the clock jumps to the next job's
    ``run_at`` (a backoff, a snooze, a ``delay``) instead of sleeping; with
    ``advance=False`` only the jobs due by ``clock.now()`` run. ``queues`` limits the run
    to those queues. Stops after ``max_attempts`` attempts, so a job that snoozes forever
    cannot hang a test. Timeouts of synchronous handlers are not enforced here.
    """
    run = Run(clock=clock or Clock())
    names = tasks.discover()
    store = Store(using)
    selected = tuple(queues) if queues is not None else None
    while len(run.outcomes) < max_attempts:
        now = run.clock.now()
        _make_due(using, names, selected, now)
        claimed = store.claim(worker=TEST_WORKER, task_names=names, queues=selected, limit=1)
        if not claimed:
            next_run_at = _next_run_at(using, names, selected) if advance else None
            if next_run_at is None or next_run_at <= now:
                break  # empty, or a due job this runner cannot claim
            run.clock.advance((next_run_at - now).total_seconds())
            continue
        job = claimed[0]
        task = tasks.get(job.task_name)
        assert task is not None, "the claim is restricted to registered task names"
        attempts.run(attempts.Attempt(job=job, task=task), store, TEST_WORKER)
        status = _jobs(using).filter(pk=job.id).values_list("status", flat=True).first()
        run.outcomes.append(Outcome(job.id, job.task_name, job.attempt, status or "?"))
    return run


def _jobs(using: str) -> Any:
    # Imported here: this module may load before the app registry is ready.
    from jobqueue.models import Job

    return Job.objects.using(using)


def _selection(using: str, names: list[str], queues: tuple[str, ...] | None) -> Any:
    rows = _jobs(using).filter(status=states.PENDING, task_name__in=names)
    return rows if queues is None else rows.filter(queue__in=queues)


def _next_run_at(using: str, names: list[str], queues: tuple[str, ...] | None) -> Any:
    return (
        _selection(using, names, queues).order_by("run_at").values_list("run_at", flat=True).first()
    )


def _make_due(
    using: str, names: list[str], queues: tuple[str, ...] | None, now: dt.datetime
) -> None:
    """Make the jobs due by the runner's clock due by the database's clock too.

    The claim compares ``run_at`` with the database's ``now()``, which inside a test's
    transaction on PostgreSQL is the transaction's start, before anything the test enqueued.
    """
    database_now = Queries(using).database_now()
    _selection(using, names, queues).filter(run_at__lte=now, run_at__gt=database_now).update(
        run_at=database_now
    )
