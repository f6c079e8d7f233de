"""The enqueue side: validate options and arguments, insert rows, wake workers at commit.

Everything a caller can get wrong fails here, in the caller's process, with an error that
names the option or the argument, never later inside a worker. The arguments' rules are
:mod:`jobqueue.arguments`'s; the statement and its vendor shapes are :mod:`jobqueue.sql`'s.
"""

from __future__ import annotations

import datetime as dt
import gc
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS, NotSupportedError, connections, transaction
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from django.utils import timezone

from jobqueue import conf, signals, states
from jobqueue.sql import Dialect, Queries
from jobqueue.store.channel import NOTIFY_CHANNEL
from jobqueue.tasks import tracing
from jobqueue.tasks.arguments import Call, Signed, check_calls, check_text, short_repr
from jobqueue.tasks.limits import Concurrency, Limits, RateLimit
from jobqueue.tasks.options import validate_options

if TYPE_CHECKING:
    from jobqueue.models import Job

MAX_QUEUE_LENGTH = 100
MAX_KEY_LENGTH = 255
PRIORITY_RANGE = (-100, 100)
# A bulk enqueue of this many jobs or more asks whether the planner knows of them, and has
# the table analysed if not. Fewer, scanned and sorted, cost a claim a millisecond at most.
REFRESH_STATISTICS_AFTER = 1_000

# Each call's concurrency key and rate key (jobqueue.tasks.limits), or None for no limits.
FlowKeys = Sequence[tuple[str | None, str | None]] | None
Interceptor = Callable[
    [Signed, "EnqueueOptions", Sequence[Call], Sequence[str | None], FlowKeys],
    "list[Job | None]",
]

# Installed by jobqueue.testing.capture(), innermost last; empty outside tests. A context
# variable, not a global list, so that a capture sees the enqueues of its own thread (and of
# the code run in its context: asyncio tasks, sync_to_async) and never another thread's.
interceptors: ContextVar[tuple[Interceptor, ...]] = ContextVar("jobqueue.interceptors", default=())


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
    concurrency: Concurrency | None = None
    rate_limit: RateLimit | None = None
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
        check_text(f"{name}: queue", self.queue)
        low, high = PRIORITY_RANGE
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise TypeError(f"{name}: priority must be a whole number, not {self.priority!r}.")
        if not low <= self.priority <= high:
            raise ValueError(f"{name}: priority must be from {low} to {high}, not {self.priority}.")
        inherited = {"max_attempts": self.max_attempts, "on_crash": self.on_crash}
        validate_options(
            {option: value for option, value in inherited.items() if value is not None},
            where=f"{name}: {{}}".format,
        )
        # Compared, not converted: a huge int or 1e20 would overflow timedelta(), and NaN
        # fails both comparisons.
        if self.delay is not None and (
            isinstance(self.delay, bool)
            or not isinstance(self.delay, (int, float))
            or not 0 <= self.delay <= conf.MAX_DELAY
        ):
            raise ValueError(
                f"{name}: delay must be a number of seconds from 0 to {conf.MAX_DELAY:,} "
                f"(conf.MAX_DELAY, ten years), not {short_repr(self.delay)}."
            )
        if self.run_at is not None:
            check_run_at(name, self.run_at)
        key = self.idempotency_key
        if key is not None and (not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH):
            raise TypeError(
                f"{name}: idempotency_key must be a non-empty string of at most "
                f"{MAX_KEY_LENGTH} characters, not {key!r}."
            )
        if key is not None:
            check_text(f"{name}: idempotency_key", key)
        if self.database not in connections:
            raise ValueError(f"{name}: database {self.database!r} is not in settings.DATABASES.")

    def limits(self) -> Limits:
        return Limits(self.task_name, self.concurrency, self.rate_limit)

    def due_at(self, now: dt.datetime) -> dt.datetime:
        if self.run_at is not None:
            return self.run_at
        return now + dt.timedelta(seconds=self.delay or 0)


def check_run_at(task_name: str, run_at: Any, label: str = "run_at") -> None:
    """Raise ``ValueError`` naming ``label`` unless ``run_at`` is an aware time a job may have."""
    if not isinstance(run_at, dt.datetime) or timezone.is_naive(run_at):
        raise ValueError(f"{task_name}: {label} must be a timezone-aware datetime, not {run_at!r}.")
    # A run_at in the past is due now. One further ahead than MAX_DELAY is refused, as a
    # delay that long is: it is almost certainly a mistake (a year typed wrong, seconds
    # taken for milliseconds), and a time near year 9999 breaks date arithmetic later.
    try:
        ahead = (run_at.astimezone(dt.UTC) - timezone.now()).total_seconds()
    except OverflowError:  # year 1 in a zone east of UTC: no UTC time to store
        raise ValueError(
            f"{task_name}: {label} {run_at!r} has no UTC equivalent a database can store."
        ) from None
    if ahead > conf.MAX_DELAY:
        raise ValueError(
            f"{task_name}: {label} {run_at.isoformat()} is more than "
            f"{conf.MAX_DELAY:,} seconds (conf.MAX_DELAY, ten years) ahead."
        )


def enqueue_calls(
    task: Signed,
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
    # Before any SQL, so that a refused value leaves the caller's transaction as it was:
    # the arguments, then the limits' key values computed from them.
    check_calls(task, calls)
    if not calls:
        return []
    limits = Limits(task.name, options.concurrency, options.rate_limit)
    flow_keys = [limits.keys(task, *call) for call in calls] if limits else None
    installed = interceptors.get()
    if installed:
        # jobqueue.testing.capture(): the calls are valid; it records them, and decides
        # whether they are written (by calling insert_calls) or only kept in memory.
        return installed[-1](task, options, calls, keys, flow_keys)
    return insert_calls(task, options, calls, keys, flow_keys)


def insert_calls(
    task: Signed,
    options: EnqueueOptions,
    calls: Sequence[Call],
    keys: Sequence[str | None],
    flow_keys: FlowKeys,
) -> list[Job | None]:
    """The one INSERT of jobs: validated calls and their limit keys, one statement, NOTIFY
    inside it."""
    # Imported here: this module may load before the app registry is ready.
    from jobqueue.models import Job

    limits = Limits(task.name, options.concurrency, options.rate_limit)
    queries = Queries(options.database)
    if limits and not queries.flow_control:
        # Jobs with limits must never run without them: refused, before any SQL.
        raise NotSupportedError(
            f"{task.name}: Concurrency and RateLimit need PostgreSQL in this version of "
            f"jobqueue, and database {options.database!r} is not: its claim cannot enforce "
            "them. Enqueue these jobs without limits there (docs/flow-control.md)."
        )
    now = timezone.now()
    run_at = options.due_at(now)
    args = [list(positional) for positional, _ in calls]
    kwargs = [named for _, named in calls]
    common = {
        "task_name": task.name,
        "queue": options.queue,
        "priority": options.priority,
        "max_attempts": options.max_attempts or conf.get().max_attempts,
        "on_crash": options.on_crash or conf.get().on_crash,
        **limits.columns(),
    }
    # One span for the statement, whatever its size; every job of it stores that span's
    # context (or NULL outside a trace), one shared parameter, never a value per row.
    with tracing.enqueue_span(task.name, options.queue, len(calls)) as traced:
        inserted = queries.insert_jobs(
            {**common, "channel": NOTIFY_CHANNEL},
            run_at=run_at,
            now=now,
            rows=(args, kwargs, keys),
            flow_keys=flow_keys,
            trace_context=traced.stored,
        )
        traced.inserted(inserted, len(calls))

    # Rows come back in call order; a row skipped for its key leaves a gap, recognised
    # because the next returned row carries a different key.
    common.update(
        status=states.PENDING,
        run_at=run_at,
        enqueued_at=now,
        updated_at=now,
        trace_context=traced.carrier,
    )
    make = _job_maker(Job, common, options.database)
    jobs: list[Job | None] = []
    position = 0
    for index, key in enumerate(keys):
        if position < len(inserted) and inserted[position][1] == key:
            job = make(inserted[position][0], args[index], kwargs[index], key)
            if flow_keys is not None:
                job.concurrency_key, job.rate_key = flow_keys[index]
            jobs.append(job)
            position += 1
        else:
            jobs.append(None)
    if position:
        # Other processes hear of the jobs through NOTIFY, sent by the insert itself; a
        # worker in this process hears through this signal, once the jobs are visible.
        signals.send_jobs_committed_at_commit([options.queue], queries.using)
    if position >= REFRESH_STATISTICS_AFTER:
        _refresh_statistics_at_commit(queries, position)
    return jobs


def _job_maker(
    model: type[Job], common: dict[str, Any], database: str
) -> Callable[[int, list[Any], dict[str, Any], str | None], Job]:
    """Return ``make(pk, args, kwargs, key)``: the ``Job`` as read back from its new row."""
    if pre_init.has_listeners(model) or post_init.has_listeners(model):

        def make_and_signal(
            pk: int, args: list[Any], kwargs: dict[str, Any], key: str | None
        ) -> Job:
            job = model(id=pk, args=args, kwargs=kwargs, idempotency_key=key, **common)
            job._state.adding = False
            job._state.db = database
            return job

        return make_and_signal

    return _job_maker_without_init(model, common, database)


def _job_maker_without_init(
    model: type[Job], common: dict[str, Any], database: str
) -> Callable[[int, list[Any], dict[str, Any], str | None], Job]:
    """``make`` for when nobody listens to instances being built: the one speed trick.

    It fills in the ``__dict__`` that Model.__init__ would, at a tenth of its cost per job.
    What that buys, measured with ``bench/run.py --only W2`` on PostgreSQL (three runs of
    each interleaved, medians): ``enqueue_many()`` of 10,000 jobs at 127,000 jobs/s with
    it, 58,000 without; one-call enqueues (W1) are level either way. Callable defaults
    (errors=list, steps=dict) are called for each job, as __init__ calls them, so that no
    two jobs share a list.
    """
    blank, fresh = _blank(model, frozenset(common))
    template = {**blank, **common}
    new = model.__new__

    def make(pk: int, args: list[Any], kwargs: dict[str, Any], key: str | None) -> Job:
        state = ModelState()
        state.adding = False
        state.db = database
        values = template.copy()
        values["_state"] = state
        values["id"] = pk
        values["args"] = args
        values["kwargs"] = kwargs
        values["idempotency_key"] = key
        for attname, default in fresh:
            values[attname] = default()
        job = new(model)
        job.__dict__ = values
        return job

    return make


@cache
def _blank(
    model: type[Job], given: frozenset[str]
) -> tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...]]:
    """An instance's ``__dict__`` in Model.__init__'s order, the ``given`` fields and the
    per-job ones still None, and the callable defaults of the others, to call per instance.
    """
    blank: dict[str, Any] = {"_state": None}
    fresh = []
    for field in model._meta.concrete_fields:
        if field.generated:
            continue
        blank[field.attname] = None
        if field.attname in given or field.attname in _PER_JOB:
            continue
        if field.has_default() and callable(field.default):
            fresh.append((field.attname, field.default))
        else:
            blank[field.attname] = field.get_default()
    return blank, tuple(fresh)


_PER_JOB = frozenset({"id", "args", "kwargs", "idempotency_key"})


class _CollectorPause:
    """Pause Python's cyclic garbage collector while a bulk enqueue builds its objects.

    Tens of thousands of new objects (the calls, their JSON, one ``Job`` each) set off a
    full collection, which walks every object of the process: in a Django process that
    costs about as much as building the jobs. None of them forms a cycle, so nothing is
    lost by waiting; the collector runs again as usual afterwards. Concurrent pauses nest:
    the last to end restores the collector as the first found it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if not self._depth:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if not self._depth and self._was_enabled:
                    gc.enable()


collector_paused = _CollectorPause()


def _refresh_statistics_at_commit(queries: Dialect, added: int) -> None:
    # A campaign's bulk enqueue can make a table whose statistics know of a few pending jobs
    # hold a million: autovacuum analyses it a minute later at best, and until then every
    # claim is planned as a scan and sort of every pending row (bench W10). After the commit,
    # not inside the caller's transaction, where ANALYZE's lock would be held until it ends;
    # robust, because the jobs are committed whatever the ANALYZE meets.
    transaction.on_commit(
        lambda: queries.refresh_statistics(added), using=queries.using, robust=True
    )
