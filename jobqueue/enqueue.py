"""The enqueue side: validate options and arguments, insert rows, wake workers at commit.

Everything a caller can get wrong fails here, in the caller's process, with an error that
names the option or the argument, never later inside a worker.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.utils import timezone

from jobqueue import conf, signals, states
from jobqueue.sql import Queries

if TYPE_CHECKING:
    from jobqueue.models import Job
    from jobqueue.tasks import Task

NOTIFY_CHANNEL = "jobqueue"
MAX_QUEUE_LENGTH = 100
MAX_KEY_LENGTH = 255
PRIORITY_RANGE = (-100, 100)

Call = tuple[Sequence[Any], dict[str, Any]]
Interceptor = Callable[
    ["Task[Any, Any]", "EnqueueOptions", Sequence[Call], Sequence[str | None]], "list[Job | None]"
]

# Installed by jobqueue.testing.capture(), innermost last; empty outside tests.
interceptors: list[Interceptor] = []


@dataclass(frozen=True)
class EnqueueOptions:
    """Where and when a job runs; every field already validated."""

    task_name: str
    queue: str = "default"
    priority: int = 0
    max_attempts: int | None = None
    on_crash: str | None = None
    delay: float | None = None
    run_at: dt.datetime | None = None
    idempotency_key: str | None = None
    database: str = DEFAULT_DB_ALIAS

    @classmethod
    def build(
        cls, *, task_name: str, defaults: EnqueueOptions | None, **given: Any
    ) -> EnqueueOptions:
        """Validate ``given`` (``None`` values are left out) over ``defaults``."""
        given = {k: v for k, v in given.items() if v is not None}
        if "delay" in given and "run_at" in given:
            raise TypeError(f"{task_name}: give delay or run_at, not both.")
        base = defaults or cls(task_name=task_name)
        if "delay" in given:
            base = replace(base, run_at=None)
        if "run_at" in given:
            base = replace(base, delay=None)
        options = replace(base, **given)
        options._validate()
        return options

    def _validate(self) -> None:
        name = self.task_name
        if not isinstance(self.queue, str) or not self.queue or len(self.queue) > MAX_QUEUE_LENGTH:
            raise TypeError(
                f"{name}: queue must be a non-empty string of at most {MAX_QUEUE_LENGTH} "
                f"characters, not {self.queue!r}."
            )
        low, high = PRIORITY_RANGE
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise TypeError(f"{name}: priority must be a whole number, not {self.priority!r}.")
        if not low <= self.priority <= high:
            raise ValueError(f"{name}: priority must be from {low} to {high}, not {self.priority}.")
        if self.max_attempts is not None and (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise ValueError(
                f"{name}: max_attempts must be a whole number of 1 or more, "
                f"not {self.max_attempts!r}."
            )
        if self.on_crash is not None:
            try:
                conf.validate_on_crash(f"{name}: on_crash", self.on_crash)
            except ImproperlyConfigured as exc:
                raise ValueError(str(exc)) from None
        if self.delay is not None and (
            isinstance(self.delay, bool)
            or not isinstance(self.delay, (int, float))
            or not math.isfinite(self.delay)
            or self.delay < 0
        ):
            raise ValueError(f"{name}: delay must be a number of seconds >= 0, not {self.delay!r}.")
        if self.run_at is not None and (
            not isinstance(self.run_at, dt.datetime) or timezone.is_naive(self.run_at)
        ):
            raise ValueError(
                f"{name}: run_at must be a timezone-aware datetime, not {self.run_at!r}."
            )
        key = self.idempotency_key
        if key is not None and (not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH):
            raise TypeError(
                f"{name}: idempotency_key must be a non-empty string of at most "
                f"{MAX_KEY_LENGTH} characters, not {key!r}."
            )
        if self.database not in connections:
            raise ValueError(f"{name}: database {self.database!r} is not in settings.DATABASES.")

    def due_at(self, now: dt.datetime) -> dt.datetime:
        if self.run_at is not None:
            return self.run_at
        return now + dt.timedelta(seconds=self.delay or 0)


def bind_arguments(task: Task[Any, Any], args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Check the call against the handler's signature, then check every value is JSON."""
    try:
        bound = task.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{task.name}: {exc}") from None
    for param, value in bound.arguments.items():
        kind = task.signature.parameters[param].kind
        if kind is kind.VAR_POSITIONAL:
            for offset, item in enumerate(value):
                _check_json(task.name, f"*{param}[{offset}]", item)
        elif kind is kind.VAR_KEYWORD:
            for key, item in value.items():
                _check_json(task.name, key, item)
        else:
            _check_json(task.name, param, value)


def _check_json(task_name: str, argument: str, value: Any) -> None:
    problem = json_problem(value, path="")
    if problem:
        where, what = problem
        raise TypeError(
            f"{task_name}: argument {argument!r}{where} is not JSON-serialisable ({what}); "
            "job arguments must be JSON: pass ids and plain values, not objects."
        )


def json_problem(value: Any, path: str) -> tuple[str, str] | None:
    """Return ``(path, reason)`` for the first value that would not survive a JSON trip."""
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, f"{value!r} is not a finite number")
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            problem = json_problem(item, f"{path}[{index}]")
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return (path, f"dict key {key!r} is a {type(key).__name__}, not a str")
            problem = json_problem(item, f"{path}[{key!r}]")
            if problem:
                return problem
        return None
    return (path, f"a {type(value).__module__}.{type(value).__qualname__}")


def enqueue_calls(
    task: Task[Any, Any],
    options: EnqueueOptions,
    calls: Sequence[Call],
    keys: Sequence[str | None] | None = None,
) -> list[Job | None]:
    """Insert one job per call in one statement, in the caller's transaction.

    Returns, per call, the new ``Job``, or ``None`` where an unfinished job already held its
    idempotency key (then nothing is written for it).
    """
    if keys is None:
        keys = [options.idempotency_key] * len(calls)
    for args, kwargs in calls:
        bind_arguments(task, args, kwargs)
    if not calls:
        return []
    if interceptors:
        # jobqueue.testing.capture(): the calls are valid; it records them, and decides
        # whether they are written (by calling insert_calls) or only kept in memory.
        return interceptors[-1](task, options, calls, keys)
    return insert_calls(task, options, calls, keys)


def insert_calls(
    task: Task[Any, Any], options: EnqueueOptions, calls: Sequence[Call], keys: Sequence[str | None]
) -> list[Job | None]:
    """The one INSERT of jobs: validated calls, one statement, NOTIFY inside it."""
    from jobqueue.models import Job

    queries = Queries(options.database)
    now = timezone.now()
    run_at = options.due_at(now)
    max_attempts = options.max_attempts or conf.get().max_attempts
    on_crash = options.on_crash or conf.get().on_crash

    def timestamp(value: dt.datetime) -> Any:
        return value.isoformat() if queries.is_postgresql else queries.time(value)

    rows = [
        {
            "task_name": task.name,
            "queue": options.queue,
            "priority": options.priority,
            "args": list(args),
            "kwargs": kwargs,
            "run_at": timestamp(run_at),
            "max_attempts": max_attempts,
            "on_crash": on_crash,
            "idempotency_key": key,
            "enqueued_at": timestamp(now),
        }
        for (args, kwargs), key in zip(calls, keys, strict=True)
    ]
    params = {"rows": json.dumps(rows), "channel": NOTIFY_CHANNEL, "queue": options.queue}
    inserted = sorted(row[:2] for row in queries.fetchall("enqueue", params))

    # Rows come back in insertion order (ids ascend); a row skipped for its key leaves a gap,
    # recognised because the next returned row carries a different key.
    jobs: list[Job | None] = []
    position = 0
    for row in rows:
        if position < len(inserted) and inserted[position][1] == row["idempotency_key"]:
            jobs.append(_job(Job, inserted[position][0], row, run_at, now, options.database))
            position += 1
        else:
            jobs.append(None)
    if position:
        _wake_local_workers_at_commit(queries, options.queue)
    return jobs


def _job(
    model: type[Job],
    pk: int,
    row: dict[str, Any],
    run_at: dt.datetime,
    now: dt.datetime,
    database: str,
) -> Job:
    job = model(
        id=pk,
        task_name=row["task_name"],
        queue=row["queue"],
        priority=row["priority"],
        args=row["args"],
        kwargs=row["kwargs"],
        status=states.PENDING,
        run_at=run_at,
        max_attempts=row["max_attempts"],
        on_crash=row["on_crash"],
        idempotency_key=row["idempotency_key"],
        enqueued_at=now,
        updated_at=now,
    )
    job._state.adding = False
    job._state.db = database
    return job


def _wake_local_workers_at_commit(queries: Queries, queue: str) -> None:
    # Other processes hear of the jobs through NOTIFY, sent by the insert itself; a worker in
    # this process hears through this signal, once the jobs are visible. A rollback discards
    # the callback along with the rows.
    def wake() -> None:
        signals.jobs_committed.send(sender=None, queue=queue, database=queries.using)

    transaction.on_commit(wake, using=queries.using)
