"""What a ``takes_context=True`` handler receives as its first argument."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from asgiref.sync import sync_to_async

from jobqueue.tasks.arguments import json_problem

if TYPE_CHECKING:
    from jobqueue.models import Job
    from jobqueue.store.jobs import ClaimedJob, Store

T = TypeVar("T")


class JobContext:
    """The running attempt: its row, its number, its cancel signal and its steps."""

    def __init__(self, claimed: ClaimedJob, store: Store, cancelled: threading.Event) -> None:
        self._claimed = claimed
        self._store = store
        self.cancelled = cancelled
        self.attempt = claimed.attempt

    def __repr__(self) -> str:
        return f"<JobContext job={self._claimed.id} attempt={self.attempt}>"

    @property
    def job_id(self) -> int:
        return self._claimed.id

    @cached_property
    def job(self) -> Job:
        """The job's row, read when first asked for."""
        # Imported here: this module may load before the app registry is ready.
        from jobqueue.models import Job

        return Job.objects.using(self._store.queries.using).get(pk=self._claimed.id)

    def step(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` once per job: a retry or a recovery returns the stored result instead.

        The result must be JSON; it is written, fenced, as soon as ``fn`` returns, so a
        crash after this line resumes after it.
        """
        _check_step_name(name)
        steps = self._claimed.steps
        if name in steps:
            return steps[name]
        value = fn(*args, **kwargs)
        problem = json_problem(value, path="")
        if problem:
            raise TypeError(f"step {name!r} returned a value that is not JSON: {problem[1]}")
        self._store.save_step(self._claimed, name, value)
        return value

    # Async twins: an ``async def`` handler runs in an event loop, where Django refuses
    # synchronous database calls.

    async def ajob(self) -> Job:
        """The job's row, for ``async def`` handlers."""
        return await sync_to_async(lambda: self.job, thread_sensitive=False)()

    async def astep(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """:meth:`step` for ``async def`` handlers; ``fn`` may be a coroutine function."""
        _check_step_name(name)
        if name in self._claimed.steps:
            return self._claimed.steps[name]
        if inspect.iscoroutinefunction(fn):
            value = await fn(*args, **kwargs)
        else:
            # Not thread-sensitive: concurrent async handlers must not queue on one thread.
            value = await sync_to_async(fn, thread_sensitive=False)(*args, **kwargs)
        return await sync_to_async(self.step, thread_sensitive=False)(name, lambda: value)


def _check_step_name(name: object) -> None:
    if not isinstance(name, str) or not name or '"' in name or "\\" in name:
        raise ValueError(f"step name must be a non-empty string without quotes: {name!r}")
