"""The enqueue side: validate options and arguments, insert rows, wake workers at commit.

Everything a caller can get wrong fails here, in the caller's process, with an error that
names the option or the argument, never later inside a worker.
"""

from __future__ import annotations

import datetime as dt
import gc
import inspect
import json
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
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
# Job.max_attempts is a PostgreSQL integer column.
MAX_ATTEMPTS_LIMIT = conf.MAX_INTEGER_COLUMN
# The integers a job's JSON may hold, on every database alike: PostgreSQL's jsonb would take
# more, SQLite's JSON functions turn larger ones into floats, so the rule is SQLite's.
JSON_INT_RANGE = (-(2**63), 2**63 - 1)
# How deep lists and dicts may nest in arguments, results and step values. The walk that
# checks them is recursive; the limit keeps it (and json.dumps) far from Python's own.
MAX_NESTING = 100

Call = tuple[Sequence[Any], dict[str, Any]]
Interceptor = Callable[
    ["Task[Any, Any]", "EnqueueOptions", Sequence[Call], Sequence[str | None]], "list[Job | None]"
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
        _check_text(f"{name}: queue", self.queue)
        low, high = PRIORITY_RANGE
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise TypeError(f"{name}: priority must be a whole number, not {self.priority!r}.")
        if not low <= self.priority <= high:
            raise ValueError(f"{name}: priority must be from {low} to {high}, not {self.priority}.")
        if self.max_attempts is not None and (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or not 1 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise ValueError(
                f"{name}: max_attempts must be a whole number from 1 to {MAX_ATTEMPTS_LIMIT:,}, "
                f"not {_short_repr(self.max_attempts)}."
            )
        if self.on_crash is not None:
            try:
                conf.validate_on_crash(f"{name}: on_crash", self.on_crash)
            except ImproperlyConfigured as exc:
                raise ValueError(str(exc)) from None
        # Compared, not converted: a huge int or 1e20 would overflow timedelta(), and NaN
        # fails both comparisons.
        if self.delay is not None and (
            isinstance(self.delay, bool)
            or not isinstance(self.delay, (int, float))
            or not 0 <= self.delay <= conf.MAX_DELAY
        ):
            raise ValueError(
                f"{name}: delay must be a number of seconds from 0 to {conf.MAX_DELAY:,} "
                f"(conf.MAX_DELAY, ten years), not {_short_repr(self.delay)}."
            )
        if self.run_at is not None:
            self._validate_run_at()
        key = self.idempotency_key
        if key is not None and (not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH):
            raise TypeError(
                f"{name}: idempotency_key must be a non-empty string of at most "
                f"{MAX_KEY_LENGTH} characters, not {key!r}."
            )
        if key is not None:
            _check_text(f"{name}: idempotency_key", key)
        if self.database not in connections:
            raise ValueError(f"{name}: database {self.database!r} is not in settings.DATABASES.")

    def _validate_run_at(self, label: str = "run_at") -> None:
        run_at = self.run_at
        if not isinstance(run_at, dt.datetime) or timezone.is_naive(run_at):
            raise ValueError(
                f"{self.task_name}: {label} must be a timezone-aware datetime, not {run_at!r}."
            )
        # A run_at in the past is due now. One further ahead than MAX_DELAY is refused, as a
        # delay that long is: it is almost certainly a mistake (a year typed wrong, seconds
        # taken for milliseconds), and a time near year 9999 breaks date arithmetic later.
        try:
            ahead = (run_at.astimezone(dt.UTC) - timezone.now()).total_seconds()
        except OverflowError:  # year 1 in a zone east of UTC: no UTC time to store
            raise ValueError(
                f"{self.task_name}: {label} {run_at!r} has no UTC equivalent a database can store."
            ) from None
        if ahead > conf.MAX_DELAY:
            raise ValueError(
                f"{self.task_name}: {label} {run_at.isoformat()} is more than "
                f"{conf.MAX_DELAY:,} seconds (conf.MAX_DELAY, ten years) ahead."
            )

    def due_at(self, now: dt.datetime) -> dt.datetime:
        if self.run_at is not None:
            return self.run_at
        return now + dt.timedelta(seconds=self.delay or 0)


def bind_arguments(task: Task[Any, Any], args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Check the call against the handler's signature, then check every value is JSON."""
    parameters = _Parameters.of(task)
    arguments = parameters.bind(args, kwargs) if parameters is not None else None
    if arguments is None:
        arguments = _bind(task, args, kwargs)
    for argument, value in arguments:
        if type(value) not in _SCALARS or not _scalar_ok(value):
            _check_json(task.name, argument, value)
        if "\x00" in argument or not argument.isascii():
            # A ``**kwargs`` name is any string the caller chose, stored as a JSON key.
            _check_text(f"{task.name}: the name of keyword argument {argument!r}", argument)


def _bind(
    task: Task[Any, Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> list[tuple[str, Any]]:
    """``(argument, value)`` in signature order, ``*args`` and ``**kwargs`` spread out."""
    try:
        bound = task.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{task.name}: {exc}") from None
    arguments = []
    for param, value in bound.arguments.items():
        kind = task.signature.parameters[param].kind
        if kind is kind.VAR_POSITIONAL:
            arguments += [(f"*{param}[{offset}]", item) for offset, item in enumerate(value)]
        elif kind is kind.VAR_KEYWORD:
            arguments += value.items()
        else:
            arguments.append((param, value))
    return arguments


# Values that are JSON as they are once _scalar_ok agrees (no NUL or lone surrogate in a
# str, an int within JSON_INT_RANGE); any other type gets the full json_problem walk.
_SCALARS = frozenset({str, int, bool, type(None)})


class _Parameters:
    """A signature without ``*args`` or ``**kwargs``, as tuples and sets: binding a call to
    it is then a few lookups, where ``Signature.bind`` took most of an enqueue's Python time."""

    def __init__(self, signature: inspect.Signature) -> None:
        params = signature.parameters.values()
        self.names = tuple(p.name for p in params)
        self.positional = tuple(p.name for p in params if p.kind is not p.KEYWORD_ONLY)
        self.keywords = frozenset(p.name for p in params if p.kind is not p.POSITIONAL_ONLY)
        self.required = frozenset(p.name for p in params if p.default is p.empty)
        # How many positional arguments alone make a complete call.
        self.arities = frozenset(
            count
            for count in range(len(self.positional) + 1)
            if self.required.issubset(self.positional[:count])
        )

    @classmethod
    def of(cls, task: Task[Any, Any]) -> _Parameters | None:
        """The task's parameters, or None if it takes ``*args`` or ``**kwargs``."""
        signature = task.signature
        cached = _parameters.get(task)
        if cached is None or cached[0] is not signature:
            plain = not any(
                p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()
            )
            cached = _parameters[task] = (signature, cls(signature) if plain else None)
        return cached[1]

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]] | None:
        """What ``_bind`` returns, or None where ``Signature.bind`` must decide (or explain)."""
        if len(args) > len(self.positional):
            return None
        given = self.positional[: len(args)]
        arguments = list(zip(given, args, strict=True))
        if not kwargs:
            return arguments if self.required.issubset(given) else None
        if not all(name in self.keywords and name not in given for name in kwargs):
            return None
        if not self.required.issubset((*given, *kwargs)):
            return None
        # Keyword arguments follow the positional ones, in signature order as bind() has them.
        return arguments + [(name, kwargs[name]) for name in self.names if name in kwargs]


# Per task, keyed by its signature as well: the django.tasks adapter replaces it.
_parameters: WeakKeyDictionary[Any, tuple[inspect.Signature, _Parameters | None]] = (
    WeakKeyDictionary()
)


def _check_json(task_name: str, argument: str, value: Any) -> None:
    problem = _json_problem(value, "", 0)
    if problem:
        where, what, wrong_type = problem
        if wrong_type:
            raise TypeError(
                f"{task_name}: argument {argument!r}{where} is not JSON-serialisable ({what}); "
                "job arguments must be JSON: pass ids and plain values, not objects."
            )
        raise ValueError(f"{task_name}: argument {argument!r}{where} cannot be stored: {what}.")


def _check_text(where: str, text: str) -> None:
    """Raise ``ValueError`` naming ``where`` if a database would refuse ``text``."""
    problem = text_problem(text)
    if problem:
        raise ValueError(f"{where} cannot be stored: it {problem}.")


def text_problem(text: str) -> str | None:
    """Why PostgreSQL would refuse ``text`` (a NUL byte, a lone surrogate), or None.

    SQLite stores both, so the rule is PostgreSQL's, for every database alike. ASCII text,
    nearly every string, is settled by two scans in C.
    """
    if "\x00" in text:
        return "contains a NUL byte (\\x00), which PostgreSQL cannot store in text or JSON"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"contains the lone surrogate {text[exc.start]!r} at offset {exc.start}, "
            "which is not valid UTF-8"
        )
    return None


def int_problem(number: int) -> str | None:
    """Why ``number`` is outside the integers a job's JSON may hold, or None."""
    low, high = JSON_INT_RANGE
    if low <= number <= high:
        return None
    # Not the number itself: str() of a 5,000-digit integer raises ValueError.
    shown = _short_repr(number)
    return f"{shown} is outside the signed 64-bit range -2**63 .. 2**63-1"


def _short_repr(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {value.bit_length():,} bits"
    return repr(value)


def json_problem(value: Any, path: str) -> tuple[str, str] | None:
    """Return ``(path, reason)`` for the first value that would not survive a JSON trip.

    The rules are the same for arguments, results and step values, on every database: JSON
    types only, finite floats, integers within :data:`JSON_INT_RANGE`, text without NUL
    bytes or lone surrogates (dict keys included), nesting at most :data:`MAX_NESTING` deep.
    ``reason`` is a phrase that reads on its own ("... contains a NUL byte ...").
    """
    problem = _json_problem(value, path, 0)
    return None if problem is None else (problem[0], problem[1])


def _json_problem(value: Any, path: str, depth: int) -> tuple[str, str, bool] | None:
    """``(path, reason, wrong_type)`` for the first bad value under ``value``."""
    if value is None or value is True or value is False:
        return None
    if isinstance(value, str):
        text = text_problem(value)
        return None if text is None else (path, f"a string that {text}", False)
    if isinstance(value, int):
        number = int_problem(value)
        return None if number is None else (path, number, False)
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return (path, f"{value!r} is not a finite number", True)
    if isinstance(value, (list, tuple, dict)) and depth >= MAX_NESTING:
        # A hundred levels of path say less than their first few.
        shown = path if len(path) <= 40 else f"{path[:30]}..."
        return (shown, f"lists and dicts nest more than {MAX_NESTING} levels deep", False)
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if type(item) in _SIMPLE and _scalar_ok(item):
                continue
            problem = _json_problem(item, f"{path}[{index}]", depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return (path, f"dict key {key!r} is a {type(key).__name__}, not a str", True)
            bad_key = text_problem(key)
            if bad_key:
                return (path, f"dict key {key!r} {bad_key}", False)
            if type(item) in _SIMPLE and _scalar_ok(item):
                continue
            inner = _json_problem(item, f"{path}[{key!r}]", depth + 1)
            if inner:
                return inner
        return None
    return (path, f"a {type(value).__module__}.{type(value).__qualname__}", True)


def _plain(values: Sequence[Any]) -> bool:
    """True if these JSON scalars are fine as they are: ints in range, ASCII text without NUL.

    The fast path of a bulk enqueue, one loop with no call per value; anything else (valid
    non-ASCII text included) goes through :func:`bind_arguments`, which says what is wrong.
    """
    low, high = JSON_INT_RANGE
    for value in values:
        kind = type(value)
        if kind is int:
            if not low <= value <= high:
                return False
        elif kind is str and ("\x00" in value or not value.isascii()):
            return False
    return True


# Types whose values need no walk, only _scalar_ok.
_SIMPLE = frozenset({str, int, float, bool, type(None)})


def _scalar_ok(value: Any) -> bool:
    """True if a value of a ``_SIMPLE`` type is fine as it is; the fast path of the walk."""
    kind = type(value)
    if kind is str:
        return "\x00" not in value and (value.isascii() or text_problem(value) is None)
    if kind is int:
        return JSON_INT_RANGE[0] <= value <= JSON_INT_RANGE[1]
    if kind is float:
        return math.isfinite(value)
    return True


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
    parameters = _Parameters.of(task)
    arities = parameters.arities if parameters is not None else ()
    for args, kwargs in calls:
        # The common call, positional JSON scalars, needs no more than this: every check
        # here runs before any SQL, so a refused value leaves the caller's transaction as it was.
        if (
            kwargs
            or len(args) not in arities
            or not _SCALARS.issuperset(map(type, args))
            or not _plain(args)
        ):
            bind_arguments(task, args, kwargs)
    if not calls:
        return []
    installed = interceptors.get()
    if installed:
        # jobqueue.testing.capture(): the calls are valid; it records them, and decides
        # whether they are written (by calling insert_calls) or only kept in memory.
        return installed[-1](task, options, calls, keys)
    return insert_calls(task, options, calls, keys)


def insert_calls(
    task: Task[Any, Any], options: EnqueueOptions, calls: Sequence[Call], keys: Sequence[str | None]
) -> list[Job | None]:
    """The one INSERT of jobs: validated calls, one statement, NOTIFY inside it."""
    from jobqueue.models import Job

    queries = Queries(options.database)
    now = timezone.now()
    run_at = options.due_at(now)

    def timestamp(value: dt.datetime) -> Any:
        # PostgreSQL: ISO text that the statement casts, quoted faster than a datetime.
        return value.isoformat() if queries.is_postgresql else queries.time(value)

    args = [list(positional) for positional, _ in calls]
    kwargs = [named for _, named in calls]
    common = {
        "task_name": task.name,
        "queue": options.queue,
        "priority": options.priority,
        "max_attempts": options.max_attempts or conf.get().max_attempts,
        "on_crash": options.on_crash or conf.get().on_crash,
    }
    params = {
        **common,
        "run_at": timestamp(run_at),
        "now": timestamp(now),
        "channel": NOTIFY_CHANNEL,
    }
    if len(calls) == 1:
        params.update(
            args=json.dumps(args[0]), kwargs=json.dumps(kwargs[0]), idempotency_key=keys[0]
        )
        inserted = queries.fetchall("enqueue_one", params)
    else:
        params.update(queries.jobs(args, kwargs, keys))
        inserted = queries.fetchall(queries.enqueue_statement(keys), params)
        inserted.sort()  # by id: ids are unique, so the other columns never decide

    # Rows come back in insertion order (ids ascend); a row skipped for its key leaves a gap,
    # recognised because the next returned row carries a different key.
    common.update(status=states.PENDING, run_at=run_at, enqueued_at=now, updated_at=now)
    make = _job_maker(Job, common, options.database)
    jobs: list[Job | None] = []
    position = 0
    for index, key in enumerate(keys):
        if position < len(inserted) and inserted[position][1] == key:
            jobs.append(make(inserted[position][0], args[index], kwargs[index], key))
            position += 1
        else:
            jobs.append(None)
    if position:
        _wake_local_workers_at_commit(queries, options.queue)
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

    # Nobody listens to instances being built: fill in what Model.__init__ would, a tenth
    # of its cost per job. Callable defaults (errors=list, steps=dict) are called for each
    # job, as __init__ calls them, so that no two jobs share a list.
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


def _wake_local_workers_at_commit(queries: Queries, queue: str) -> None:
    # Other processes hear of the jobs through NOTIFY, sent by the insert itself; a worker in
    # this process hears through this signal, once the jobs are visible. A rollback discards
    # the callback along with the rows.
    def wake() -> None:
        signals.jobs_committed.send(sender=None, queue=queue, database=queries.using)

    transaction.on_commit(wake, using=queries.using)
