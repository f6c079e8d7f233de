"""Run one attempt of a job and write its outcome through the store.

An attempt is cancelled (``Attempt.cancel()``, from any thread) when it should stop: its
job was discarded by an operator, its lease was lost, or it ran past its timeout. Its
``cancelled`` event, the handler's ``ctx.cancelled``, is set; an ``async def`` handler's
coroutine is also cancelled on its own event loop. A sync handler cannot be interrupted:
it stops when it checks ``ctx.cancelled``. Whatever it writes afterwards, the fence refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from types import FrameType
from typing import Any

from jobqueue import conf
from jobqueue.exceptions import Discard, JobRunAborted, PermanentError, Snooze
from jobqueue.runtime.cleanup import State, restore_connections, snapshot
from jobqueue.store.errors import (
    TRACEBACK_LIMIT,
    AttemptTimeout,
    HandlerLeftTransaction,
    MalformedArguments,
    error_entry,
    exception_text,
    storable_text,
)
from jobqueue.store.jobs import ClaimedJob, Store, clamp_delay
from jobqueue.tasks import tracing
from jobqueue.tasks.arguments import json_problem
from jobqueue.tasks.base import Task
from jobqueue.tasks.context import JobContext

logger = logging.getLogger("jobqueue.worker")


@dataclass
class Attempt:
    """One claimed job on its way through a slot."""

    job: ClaimedJob
    task: Task[Any, Any]
    claimed: float = field(default_factory=time.monotonic)
    # Set again when a slot starts it: a job claimed ahead may wait in line first.
    started: float = field(default_factory=time.monotonic)
    ended: bool = False  # its handler returned and its slot was freed
    cancelled: threading.Event = field(default_factory=threading.Event)
    thread_id: int | None = None
    # Set by the executor when the attempt outlived its timeout and left its slot.
    timed_out: bool = False
    # Told when this attempt puts its job back to be due in so many seconds (retry, snooze),
    # so that this process's worker wakes for it without waiting for a poll.
    on_scheduled: Callable[[float], None] = field(default=lambda delay: None)
    # While an async handler runs: its event loop and the task that runs it, so that
    # cancel() can reach the coroutine from another thread. Guarded by _lock.
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False, compare=False)
    _task: asyncio.Task[Any] | None = field(default=None, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def cancel(self) -> bool:
        """Tell the handler to stop, from any thread; False if it was told before.

        Sets ``cancelled`` (``ctx.cancelled``) and, for an ``async def`` handler, cancels
        its coroutine on its loop: the ``await`` it is in raises ``CancelledError``.
        """
        with self._lock:
            if self.cancelled.is_set():
                return False
            self.cancelled.set()
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            # A loop closed meanwhile raises RuntimeError: the handler has returned.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)
        return True

    def bind_loop(self, task: asyncio.Task[Any] | None) -> None:
        """Record (or, with None, forget) the task that runs this attempt's async handler,
        on the loop's own thread; a cancel that came before it started cancels it now."""
        with self._lock:
            if task is None:
                self._loop = self._task = None
                return
            self._loop, self._task = task.get_loop(), task
            already = self.cancelled.is_set() and not self.timed_out
        if already:
            task.cancel()

    @property
    def timeout(self) -> float:
        return self.task.timeout

    @property
    def deadline(self) -> float | None:
        if not self.timeout:
            return None
        # An async handler is cancelled by its own event loop at the limit; the watchdog
        # steps in a moment later only if the loop itself is blocked.
        grace = 1.0 if self.task.is_async else 0.0
        return self.started + self.timeout + grace


class AttemptCancelled(Exception):
    """The attempt's async handler was cancelled: its job was discarded, or its lease lost."""


def run(
    attempt: Attempt,
    store: Store,
    worker: str,
    record_success: Callable[[Attempt, Any], None] | None = None,
) -> bool:
    """Run the handler and write its outcome; an outcome the fence refuses is logged.

    A success goes to ``record_success(attempt, value)`` when given (the worker's writer,
    which records it in a later statement), else it is written here. Returns True if it
    went there. Whatever the handler does, the job does not stay running: an outcome that
    cannot be written as it is fails the job, saying so (the store sees to that), and only
    the database being away leaves it to the lease and recovery.
    """
    job = attempt.job
    attempt.thread_id = threading.get_ident()
    job.began = time.monotonic()
    try:
        try:
            # The attempt's span (OpenTelemetry, if installed) covers the handler only: the
            # outcome's write is the worker's, and a success is written later, in a batch.
            try:
                with tracing.execute_span(job, partial(span_outcome, job)):
                    value = _outcome(attempt, store)
            finally:
                job.ended = time.monotonic()
        except Snooze as snooze:
            store.snooze(job, snooze.seconds, worker=worker)
            attempt.on_scheduled(clamp_delay(snooze.seconds))
        except JobRunAborted:
            raise
        except PermanentError as exc:
            store.fail(job, error_entry(exc, job, worker), worker=worker)
        except Discard as exc:
            store.discard(job, error_entry(exc, job, worker), worker=worker)
        except HandlerLeftTransaction as exc:
            if exc.permanent:
                store.fail(job, error_entry(exc, job, worker), worker=worker)
            else:
                _record_failure(store, attempt, error_entry(exc, job, worker), worker)
        except BaseException as exc:
            # Anything a handler raises fails the attempt, KeyboardInterrupt and a stray
            # CancelledError included: in a slot thread they are not the process's signals.
            _record_failure(store, attempt, error_entry(exc, job, worker), worker)
        else:
            if record_success is None:
                store.succeed(job, value, worker=worker)  # fails it if it cannot be stored
                return False
            try:
                record_success(attempt, value)  # encodes it as JSON
            except (ValueError, TypeError, OverflowError, RecursionError) as exc:
                # The checks passed, and json.dumps still refused it: fail, never strand.
                store.fail_unstorable(job, "the result", exc, worker=worker)
                return False
            return True
    except JobRunAborted as exc:
        logger.warning("outcome discarded: %s", exc)
        store.aborted(job, worker)
    return False


def span_outcome(job: ClaimedJob, raised: BaseException | None) -> str:
    """How ``run`` ends an attempt whose handler returned (``None``) or raised ``raised``, in
    the words of the Sentry tags: the execute span's ``jobqueue.outcome``. A success is the
    handler's checked value; the writer records it a moment later."""
    if raised is None:
        return "succeeded"
    if isinstance(raised, Snooze):
        return "snoozed"
    if isinstance(raised, Discard):
        return "discarded"
    if isinstance(raised, JobRunAborted):
        return "aborted"  # the fence refused its outcome: logged and discarded
    permanent = isinstance(raised, PermanentError) or (
        isinstance(raised, HandlerLeftTransaction) and raised.permanent
    )
    return "failed" if permanent or not job.attempts_left else "retry"


def _outcome(attempt: Attempt, store: Store) -> Any:
    """Call the handler and return its value, checked; raise what ends the attempt."""
    args, kwargs = _arguments(attempt.job)
    before = snapshot()  # in a slot nothing is open; under run_jobs, maybe a test's atomic()
    try:
        value = _call(attempt, store, args, kwargs)
    except BaseException as exc:
        _restore_connections(exc, before)
        raise
    _restore_connections(None, before)
    problem = result_problem(value)
    if problem:
        raise TypeError(
            f"the handler returned a value that is not JSON every database can store ({problem})"
        )
    return value


def _restore_connections(raised: BaseException | None, before: dict[str, State]) -> None:
    # Before the outcome is written: it goes out on this thread's connection, which must not
    # be inside the handler's transaction, and a success must not be recorded for writes
    # that are rolled back here.
    left = restore_connections(before)
    if not left or isinstance(raised, JobRunAborted):
        return
    how = "returned" if raised is None else f"raised {type(raised).__name__}"
    raise HandlerLeftTransaction(
        f"the handler {how} with {' and '.join(left)}; its uncommitted work was rolled back "
        "and the connection reset, and this attempt fails for it",
        permanent=isinstance(raised, PermanentError),
    ) from raised


def _arguments(job: ClaimedJob) -> tuple[list[Any], dict[str, Any]]:
    args, kwargs = job.args, job.kwargs
    if isinstance(args, list) and isinstance(kwargs, dict):
        return list(args), kwargs
    wrong = [
        f"{name} is {_kind(value)}, not a {expected}"
        for name, value, expected in (("args", args, "list"), ("kwargs", kwargs, "dict"))
        if not isinstance(value, list if expected == "list" else dict)
    ]
    raise MalformedArguments(
        f"the stored arguments of job {job.id} are malformed ({'; '.join(wrong)}): was the row "
        "edited by hand? The handler was not called"
    )


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def result_problem(value: Any) -> str | None:
    """Why a handler's return value cannot be stored as its job's result, or None.

    The rules of enqueue (:func:`jobqueue.arguments.json_problem`), the same on every
    database. Encoding it comes later (once, where it is written), inside a try as well.
    """
    try:
        problem = json_problem(value, path="")
    except Exception as exc:  # a value whose walk itself raises (a broken dict subclass)
        return f"checking it raised {type(exc).__name__}: {exception_text(exc)}"
    if problem is None:
        return None
    where, what = problem
    return f"at result{where}: {what}"


def _call(attempt: Attempt, store: Store, args: list[Any], kwargs: dict[str, Any]) -> Any:
    job, task = attempt.job, attempt.task
    if task.options.takes_context:
        args.insert(0, task.context(JobContext(job, store, attempt.cancelled)))
    if not task.is_async:
        return task.func(*args, **kwargs)

    async def bounded() -> Any:
        attempt.bind_loop(asyncio.current_task())
        try:
            return await asyncio.wait_for(task.func(*args, **kwargs), attempt.timeout or None)
        except TimeoutError:
            attempt.cancelled.set()
            raise AttemptTimeout(timeout_message(attempt)) from None
        except asyncio.CancelledError:
            if not attempt.cancelled.is_set():
                raise  # not ours: the handler's own doing, reported as it is
            # Its outcome is refused by the fence anyway; this says why in the log.
            raise AttemptCancelled(
                f"job {attempt.job.id}: the attempt was cancelled while it ran (discarded, "
                "or its lease lost)"
            ) from None
        finally:
            attempt.bind_loop(None)

    return asyncio.run(bounded())


def _record_failure(store: Store, attempt: Attempt, error: dict[str, Any], worker: str) -> None:
    delay = record_failure(store, attempt.job, attempt.task, error, worker)
    if delay is not None:
        attempt.on_scheduled(delay)


def record_failure(
    store: Store, job: ClaimedJob, task: Task[Any, Any], error: dict[str, Any], worker: str
) -> float | None:
    """Retry after the task's backoff while attempts are left, else fail for good.

    Returns the delay before the retry, or ``None`` when the job failed for good.
    """
    if not job.attempts_left:
        store.fail(job, error, worker=worker)
        return None
    try:
        delay = task.backoff_delay(job.attempt)
    except Exception:
        # A broken backoff callable must not strand the job: fall back to the default.
        logger.exception(
            "job %s: the backoff of %s failed; using the default backoff %s",
            job.id,
            task.name,
            conf.DEFAULTS["BACKOFF"],
        )
        delay = default_backoff_delay(job.attempt)
    store.retry(job, error, delay, worker=worker)  # clamps the delay, and says so
    return clamp_delay(delay)


def record_timeout(store: Store, attempt: Attempt, worker: str) -> None:
    """Fail an attempt that outlived its timeout; its thread's late outcome is fenced off."""
    frame = _current_frame(attempt.thread_id)
    stack = "".join(traceback.format_stack(frame)) if frame else ""
    error = {
        **error_entry(AttemptTimeout(timeout_message(attempt)), attempt.job, worker),
        "traceback": storable_text(
            f"Handler stack when the timeout fired:\n{stack}", TRACEBACK_LIMIT
        )
        if stack
        else "",
    }
    try:
        delay = record_failure(store, attempt.job, attempt.task, error, worker)
        if delay is not None:
            attempt.on_scheduled(delay)
    except JobRunAborted as exc:
        logger.warning("timeout not recorded: %s", exc)
    except Exception:
        # The database may be away; the lease will run out and recovery takes over.
        logger.exception("job %s: could not record its timeout", attempt.job.id)


def default_backoff_delay(attempt: int) -> float:
    first, factor, cap = conf.DEFAULTS["BACKOFF"]
    return float(min(cap, first * factor ** (attempt - 1)))


def timeout_message(attempt: Attempt) -> str:
    job = attempt.job
    return (
        f"attempt {job.attempt} of {job.max_attempts} timed out after {attempt.timeout:g} s "
        f"(the task's timeout)"
    )


def _current_frame(thread_id: int | None) -> FrameType | None:
    return sys._current_frames().get(thread_id) if thread_id else None
