"""Run one attempt of a job and write its outcome through the store."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from django.utils import timezone

from jobqueue import conf
from jobqueue.enqueue import json_problem
from jobqueue.exceptions import JobRunAborted, PermanentError, Snooze
from jobqueue.runtime.context import JobContext
from jobqueue.store import ClaimedJob, Store
from jobqueue.tasks import Task

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


class AttemptTimeout(Exception):
    """The attempt ran past its task's timeout."""


def run(
    attempt: Attempt,
    store: Store,
    worker: str,
    record_success: Callable[[Attempt, Any], None] | None = None,
) -> bool:
    """Run the handler and write its outcome; an outcome the fence refuses is logged.

    A success goes to ``record_success(attempt, value)`` when given (the worker's writer,
    which records it in a later statement), else it is written here. Returns True if it
    went there.
    """
    job, task = attempt.job, attempt.task
    attempt.thread_id = threading.get_ident()
    try:
        try:
            value = _call(attempt, store)
            problem = json_problem(value, path="")
            if problem:
                raise TypeError(f"the handler returned a value that is not JSON: {problem[1]}")
        except Snooze as snooze:
            store.snooze(job, snooze.seconds, worker=worker)
            attempt.on_scheduled(snooze.seconds)
        except JobRunAborted:
            raise
        except PermanentError as exc:
            store.fail(job, error_entry(exc, job, worker), worker=worker)
        except BaseException as exc:
            # Anything a handler raises fails the attempt, KeyboardInterrupt and a stray
            # CancelledError included: in a slot thread they are not the process's signals.
            delay = record_failure(store, job, task, error_entry(exc, job, worker), worker)
            if delay is not None:
                attempt.on_scheduled(delay)
        else:
            if record_success is not None:
                record_success(attempt, value)
                return True
            store.succeed(job, value, worker=worker)
    except JobRunAborted as exc:
        logger.warning("outcome discarded: %s", exc)
    return False


def _call(attempt: Attempt, store: Store) -> Any:
    job, task = attempt.job, attempt.task
    args = list(job.args)
    if task.options.takes_context:
        args.insert(0, task.context(JobContext(job, store, attempt.cancelled)))
    if not task.is_async:
        return task.func(*args, **job.kwargs)

    async def bounded() -> Any:
        try:
            return await asyncio.wait_for(task.func(*args, **job.kwargs), attempt.timeout or None)
        except TimeoutError:
            attempt.cancelled.set()
            raise AttemptTimeout(timeout_message(attempt)) from None

    return asyncio.run(bounded())


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
    store.retry(job, error, delay, worker=worker)
    return delay


def record_timeout(store: Store, attempt: Attempt, worker: str) -> None:
    """Fail an attempt that outlived its timeout; its thread's late outcome is fenced off."""
    frame = _current_frame(attempt.thread_id)
    stack = "".join(traceback.format_stack(frame)) if frame else ""
    error = {
        **error_entry(AttemptTimeout(timeout_message(attempt)), attempt.job, worker),
        "traceback": f"Handler stack when the timeout fired:\n{stack}" if stack else "",
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


def error_entry(exc: BaseException, job: ClaimedJob, worker: str) -> dict[str, Any]:
    """One entry of ``Job.errors``: what failed, where, and when."""
    kind = type(exc)
    name = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    return {
        "type": name,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)),
        "attempt": job.attempt,
        "at": timezone.now().isoformat(),
        "worker": worker,
    }
