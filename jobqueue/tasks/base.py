"""``@task``, the registry of task names, and discovery of ``<app>.tasks`` modules."""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import inspect
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    Literal,
    ParamSpec,
    TypedDict,
    TypeVar,
    Unpack,
    overload,
)

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from jobqueue import conf
from jobqueue.tasks.arguments import text_problem
from jobqueue.tasks.enqueue import EnqueueOptions, collector_paused, enqueue_calls
from jobqueue.tasks.limits import Concurrency, RateLimit, check_limits
from jobqueue.tasks.options import INHERITED_OPTIONS, validate_options

if TYPE_CHECKING:
    from jobqueue.models import Job

P = ParamSpec("P")
R = TypeVar("R")

_registry: dict[str, Task[Any, Any]] = {}
MAX_NAME_LENGTH = 255  # Job.task_name


class TaskKeywords(TypedDict, total=False):
    """The options of ``@task(...)`` but ``takes_context``: what its overloads share."""

    name: str | None
    queue: str
    priority: int
    max_attempts: int | None
    timeout: float | None
    on_crash: str | None
    backoff: conf.Backoff | None
    concurrency: Concurrency | None
    rate_limit: RateLimit | None


@dataclass(frozen=True)
class TaskOptions:
    queue: str = "default"
    priority: int = 0
    max_attempts: int | None = None  # None: JOBQUEUE["MAX_ATTEMPTS"]
    timeout: float | None = None  # None: JOBQUEUE["TIMEOUT"]; 0: no limit
    on_crash: str | None = None  # None: JOBQUEUE["ON_CRASH"]
    backoff: conf.Backoff | None = None  # None: JOBQUEUE["BACKOFF"]
    concurrency: Concurrency | None = None
    rate_limit: RateLimit | None = None
    takes_context: bool = False


class Task(Generic[P, R]):
    """A registered handler. Call it to run it here; ``enqueue`` it to run it on a worker."""

    def __init__(self, func: Callable[..., R], name: str, options: TaskOptions) -> None:
        self.func = func
        self.name = name
        self.options = options
        self.is_async = inspect.iscoroutinefunction(func)
        self.signature = _call_signature(func, takes_context=options.takes_context)
        functools.update_wrapper(self, func)
        self._enqueue_defaults: tuple[TaskOptions, conf.Settings, EnqueueOptions] | None = None

    def __repr__(self) -> str:
        return f"<Task {self.name}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def context(self, ctx: Any) -> Any:
        """What a ``takes_context`` handler receives, given the worker's ``JobContext``.

        Called in the worker's slot thread before the handler starts; the ``django.tasks``
        adapter (:mod:`jobqueue.adapter`) overrides it to hand over Django's ``TaskContext``.
        """
        return ctx

    # Effective per-task settings: the task's own option, else the project's default.
    @property
    def max_attempts(self) -> int:
        return self.options.max_attempts or conf.get().max_attempts

    @property
    def timeout(self) -> float:
        timeout = self.options.timeout
        return conf.get().timeout if timeout is None else timeout

    @property
    def on_crash(self) -> str:
        return self.options.on_crash or conf.get().on_crash

    @property
    def backoff(self) -> conf.Backoff:
        return self.options.backoff or conf.get().backoff

    def backoff_delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        backoff = self.backoff
        if callable(backoff):
            delay = float(backoff(attempt))
            if not math.isfinite(delay) or delay < 0:
                raise ValueError(
                    f"the backoff of {self.name} returned {delay} for attempt {attempt}; "
                    "it must return a finite number of seconds, 0 or more"
                )
            return delay
        first, factor, cap = backoff
        try:
            return min(cap, first * factor ** (attempt - 1))
        except OverflowError:  # factor ** attempt past a float, long after reaching the cap
            return cap if first else 0.0

    def using(
        self,
        *,
        delay: float | None = None,
        run_at: dt.datetime | None = None,
        idempotency_key: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        concurrency: Concurrency | None = None,
        rate_limit: RateLimit | None = None,
    ) -> BoundTask[P, R]:
        """Return this task with per-enqueue options; validated here, not in the worker.

        ``concurrency`` and ``rate_limit`` replace the task's own for these jobs."""
        given = {
            "delay": delay,
            "run_at": run_at,
            "idempotency_key": idempotency_key,
            "queue": queue,
            "priority": priority,
            "max_attempts": max_attempts,
            "concurrency": concurrency,
            "rate_limit": rate_limit,
        }
        if concurrency is not None or rate_limit is not None:
            check_limits(f"{self.name}.using()", self.name, self.signature, concurrency, rate_limit)
        return BoundTask(self, {k: v for k, v in given.items() if v is not None})

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job | None:
        """Insert a job in the caller's transaction; visible to workers at its commit."""
        return enqueue_calls(self, self.enqueue_defaults(), [(args, kwargs)])[0]

    def enqueue_many(self, calls: Iterable[CallItem]) -> list[Job | None]:
        """Insert one job per item in one statement: see :meth:`BoundTask.enqueue_many`."""
        return BoundTask(self, {}).enqueue_many(calls)

    def enqueue_defaults(self) -> EnqueueOptions:
        # Validated once per task options and settings, not on every enqueue.
        settings = conf.get()
        cached = self._enqueue_defaults
        if cached is None or cached[0] is not self.options or cached[1] is not settings:
            defaults = EnqueueOptions.build(
                task_name=self.name,
                defaults=None,
                queue=self.options.queue,
                priority=self.options.priority,
                max_attempts=self.max_attempts,
                on_crash=self.on_crash,
                concurrency=self.options.concurrency,
                rate_limit=self.options.rate_limit,
            )
            cached = self._enqueue_defaults = (self.options, settings, defaults)
        return cached[2]


class BoundTask(Generic[P, R]):
    """A task with per-enqueue options, as returned by :meth:`Task.using`."""

    def __init__(self, task: Task[P, R], given: dict[str, Any]) -> None:
        self.task = task
        self.given = given
        self.options = EnqueueOptions.build(
            task_name=task.name, defaults=task.enqueue_defaults(), **given
        )

    def using(self, **options: Any) -> BoundTask[P, R]:
        """Add or override options; a new ``delay`` replaces an earlier ``run_at``."""
        given = dict(self.given)
        if "delay" in options or "run_at" in options:
            given.pop("delay", None)
            given.pop("run_at", None)
        return self.task.using(**{**given, **options})

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job | None:
        """Insert one job; ``None`` if an unfinished job already holds its idempotency key."""
        return enqueue_calls(self.task, self.options, [(args, kwargs)])[0]

    def enqueue_many(self, calls: Iterable[CallItem]) -> list[Job | None]:
        """Insert one job per item, all in one statement.

        Each item is a tuple of positional arguments, a dict of keyword arguments, or a
        :class:`Call` (which may carry its own ``idempotency_key``). The result has one
        entry per item: the ``Job``, or ``None`` where an unfinished job held its key.
        """
        with collector_paused():
            items = [_as_call(item) for item in calls]
            keys = [key or self.options.idempotency_key for _, _, key in items]
            return enqueue_calls(
                self.task, self.options, [(args, kwargs) for args, kwargs, _ in items], keys
            )


@dataclass(frozen=True)
class Call:
    """One job's arguments for :meth:`BoundTask.enqueue_many`: ``Call(args, kwargs, key)``."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None


# One item of enqueue_many(). Its arguments are checked at run time, not by a type checker:
# a ParamSpec cannot describe "a tuple of P's positional arguments".
CallItem = tuple[Any, ...] | dict[str, Any] | Call


def _as_call(item: Any) -> tuple[tuple[Any, ...], dict[str, Any], str | None]:
    if isinstance(item, Call):
        EnqueueOptions.build(
            task_name="enqueue_many()", defaults=None, idempotency_key=item.idempotency_key
        )
        return tuple(item.args), dict(item.kwargs), item.idempotency_key
    if isinstance(item, dict):
        return (), item, None
    if isinstance(item, tuple):
        return item, {}, None
    raise TypeError(
        "enqueue_many() takes tuples of positional arguments, dicts of keyword arguments "
        f"or jobqueue.tasks.Call objects, not {type(item).__name__}: {item!r}"
    )


def _call_signature(func: Callable[..., Any], *, takes_context: bool) -> inspect.Signature:
    signature = inspect.signature(func)
    if not takes_context:
        return signature
    params = list(signature.parameters.values())
    if not params or params[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise TypeError(
            f"{func.__qualname__} is declared takes_context=True, so its first parameter "
            "must be the context (ctx)."
        )
    return signature.replace(parameters=params[1:])


# The overloads let a type checker see each task's parameters through Task[P, R], so
# send_welcome.enqueue(42) for an ``email: str`` is reported. A takes_context=True handler's
# first parameter is the context, which the worker passes: it is not part of P.
@overload
def task(
    func: Callable[P, R], *, takes_context: Literal[False] = False, **options: Unpack[TaskKeywords]
) -> Task[P, R]: ...
@overload
def task(
    func: Callable[Concatenate[Any, P], R],
    *,
    takes_context: Literal[True],
    **options: Unpack[TaskKeywords],
) -> Task[P, R]: ...
@overload
def task(
    func: None = None, *, takes_context: Literal[False] = False, **options: Unpack[TaskKeywords]
) -> Callable[[Callable[P, R]], Task[P, R]]: ...
@overload
def task(
    func: None = None, *, takes_context: Literal[True], **options: Unpack[TaskKeywords]
) -> Callable[[Callable[Concatenate[Any, P], R]], Task[P, R]]: ...
@overload
def task(  # takes_context a bool known only at run time: nothing to check against
    func: Callable[..., Any] | None = None, *, takes_context: bool, **options: Unpack[TaskKeywords]
) -> Any: ...
def task(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    queue: str = "default",
    priority: int = 0,
    max_attempts: int | None = None,
    timeout: float | None = None,
    on_crash: str | None = None,
    backoff: conf.Backoff | None = None,
    concurrency: Concurrency | None = None,
    rate_limit: RateLimit | None = None,
    takes_context: bool = False,
) -> Any:
    """Register a function as a task: ``@task`` or ``@task(queue="emails", ...)``."""

    def decorate(f: Callable[..., Any]) -> Task[Any, Any]:
        task_name = f"{f.__module__}.{f.__qualname__}" if name is None else name
        check_name(task_name, given=name is not None)
        options = _validated_options(
            task_name,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            timeout=timeout,
            on_crash=on_crash,
            backoff=backoff,
            concurrency=concurrency,
            rate_limit=rate_limit,
            takes_context=takes_context,
        )
        registered: Task[Any, Any] = Task(f, task_name, options)
        try:
            check_limits(
                f"@task {task_name}", task_name, registered.signature, concurrency, rate_limit
            )
        except TypeError as exc:
            raise ImproperlyConfigured(str(exc)) from None
        return register(registered)

    return decorate(func) if func is not None else decorate


def _validated_options(task_name: str, **options: Any) -> TaskOptions:
    # queue and priority are checked as .using() checks them; the rest as every task's are.
    # The limits are checked in decorate, against the function's signature.
    EnqueueOptions.build(
        task_name=f"@task {task_name}",
        defaults=None,
        queue=options["queue"],
        priority=options["priority"],
    )
    given = {name: options[name] for name in INHERITED_OPTIONS if options[name] is not None}
    checked = validate_options(given, where=f"@task option {{}} of {task_name}".format)
    if "backoff" in checked:
        options["backoff"] = checked["backoff"]
    return TaskOptions(**options)


def check_name(name: Any, *, given: bool = True) -> None:
    """Raise ``TypeError``/``ValueError`` naming ``name`` unless it fits ``Job.task_name``.

    Checked at decoration: a name the database refuses would fail every enqueue, and a
    non-string one breaks discovery for every worker.
    """
    what = "@task(name=...)" if given else "the task's name (its function's dotted path)"
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}: {name!r}.")
    if not name:
        raise ValueError(f"{what} must be a non-empty string.")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"{what} must be at most {MAX_NAME_LENGTH} characters (the Job.task_name column), "
            f"not {len(name)}: {name[:60]!r}...; give a shorter name=."
        )
    problem = text_problem(name)
    if problem:
        raise ValueError(f"{what} {name!r} {problem}.")


def register(t: Task[Any, Any]) -> Task[Any, Any]:
    check_name(t.name)
    existing = _registry.get(t.name)
    same_function = existing is not None and (
        existing.func.__module__,
        existing.func.__qualname__,
    ) == (t.func.__module__, t.func.__qualname__)
    if existing is not None and not same_function:
        raise ImproperlyConfigured(
            f"Two tasks are named {t.name!r}: {existing.func.__module__}."
            f"{existing.func.__qualname__} and {t.func.__module__}.{t.func.__qualname__}. "
            "Give one of them another name=."
        )
    _registry[t.name] = t
    return t


def get(name: str) -> Task[Any, Any] | None:
    return _registry.get(name)


def registered_names() -> list[str]:
    return sorted(_registry)


def discover() -> list[str]:
    """Import every installed app's ``tasks`` module and ``JOBQUEUE["TASK_MODULES"]``."""
    autodiscover_modules("tasks")
    for module in conf.get().task_modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImproperlyConfigured(
                f'JOBQUEUE["TASK_MODULES"] names {module!r}, which cannot be imported: {exc}'
            ) from exc
    return registered_names()
