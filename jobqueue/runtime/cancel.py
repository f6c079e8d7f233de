"""Prompt cancel: an attempt whose job an operator discarded is told within a second.

An operator's Discard changes a running job's token (:meth:`jobqueue.store.Store.discard_jobs`),
so the fence refuses whatever its attempt writes later; this part makes the attempt stop
too, long before the heartbeat would notice (up to ``LEASE / 3`` later).

* On PostgreSQL the discard sends, in its own transaction, one notification per running job,
  ``cancel:<id>`` (:data:`jobqueue.channel.CANCEL_PREFIX`; ``parse`` also reads a
  comma-separated list). The listener's thread hands it to ``heard()``, which keeps the ids
  this worker holds and wakes the loop.
* On SQLite there is no NOTIFY: the watcher's thread reports another connection's commit
  through ``committed()``, and the worker asks at its next look, at most every
  ``CHECK_INTERVAL``, and only while it holds jobs.
* On MySQL there is neither NOTIFY nor a file to watch (``polls``): the worker asks every
  ``CHECK_INTERVAL`` while it holds jobs, as if every moment brought a commit.

Either way the loop's thread then runs ``check()``: one read by primary key
(:meth:`~jobqueue.store.Store.held_jobs`) says which of the suspected attempts still own
their job, since a notification is a hint, never the truth. Each one that does not is
cancelled (:meth:`jobqueue.runtime.attempt.Attempt.cancel`: ``ctx.cancelled`` is set and an
``async def`` handler's coroutine is cancelled); one still waiting in line is taken out of
it. Its slot frees as for any attempt when its handler returns, and the fence refuses its
outcome. A sync handler stops only when it checks ``ctx.cancelled``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from jobqueue.runtime.executor import Executor
from jobqueue.runtime.outage import Health
from jobqueue.store.channel import CANCEL_PREFIX
from jobqueue.store.jobs import Store

logger = logging.getLogger("jobqueue.worker")

# SQLite: the shortest time between two checks after commits. A busy worker sees its own
# commits all the time; this keeps it at two small reads a second, whatever the rate.
CHECK_INTERVAL = 0.5
# After a failed check (the database away), the next one waits at least this long.
RETRY_INTERVAL = 1.0


def parse(payload: str) -> list[int] | None:
    """The job ids of a cancel notification's payload, or None if it is not one (it names
    a queue). A malformed id list counts as none: the heartbeat still catches the jobs."""
    if not payload.startswith(CANCEL_PREFIX):
        return None
    ids = []
    for part in payload[len(CANCEL_PREFIX) :].split(","):
        part = part.strip()
        if part.isdigit():
            ids.append(int(part))
    return ids


class Canceller:
    """Which held attempts lost their job, confirmed by the database, and their cancel.

    ``heard()`` and ``committed()`` may be called from any thread (the listener's, the
    watcher's); ``check()`` and ``next_at()`` only from the loop's.
    """

    def __init__(
        self,
        *,
        store: Store,
        worker: str,
        executor: Executor,
        health: Health,
        wake: Callable[[], None],
        polls: bool = False,
    ) -> None:
        self._store = store
        # Nothing tells this worker of other connections' commits (MySQL): it asks every
        # CHECK_INTERVAL while it holds jobs, one read by primary key each time.
        self._polls = polls
        self._worker = worker
        self._executor = executor
        self._health = health
        self._wake = wake
        self._lock = threading.Lock()
        self._suspects: set[int] = set()  # ids named by notifications, not checked yet
        self._commit_seen = False  # SQLite: another connection committed since the check
        self._next_check = 0.0  # monotonic; no commit-driven check before it
        self._retry_at = 0.0  # monotonic; after a failed check, no check before it

    def heard(self, ids: list[int]) -> None:
        """A cancel notification named ``ids``: keep those this worker holds, and wake the
        loop to check them."""
        held = {attempt.job.id for attempt in self._executor.holding()}
        mine = held.intersection(ids)
        if not mine:
            return  # another worker's jobs, or ones that finished here meanwhile
        with self._lock:
            self._suspects.update(mine)
        self._wake()

    def committed(self) -> None:
        """Another connection committed (SQLite): a held job may have been discarded."""
        with self._lock:
            self._commit_seen = True

    def next_at(self) -> float | None:
        """When the loop should wake to check (monotonic), None if nothing is owed."""
        with self._lock:
            if self._suspects:
                return max(time.monotonic(), self._retry_at)
            if not (self._commit_seen or self._polls):
                return None
        if not self._executor.holding():
            return None
        return max(self._next_check, self._retry_at)

    def check(self, now: float) -> None:
        """If a check is owed, confirm the suspects with one read and cancel the attempts
        that lost their job. Never raises: a database error is reported and retried."""
        if now < self._retry_at:
            return
        with self._lock:
            suspects, commit_seen = self._suspects, self._commit_seen or self._polls
            if not suspects and not (commit_seen and now >= self._next_check):
                return
            self._suspects, self._commit_seen = set(), False
        held = [a for a in self._executor.holding() if not a.cancelled.is_set()]
        if suspects and not commit_seen:
            held = [a for a in held if a.job.id in suspects]
        if not held:
            return
        if commit_seen:
            self._next_check = now + CHECK_INTERVAL
        still: set[int] = set()
        with self._health.trying(
            "checking for discarded jobs",
            self._store.queries.using,
            "worker %s: could not check for discarded jobs; trying again",
            self._worker,
        ) as read:
            still = self._store.held_jobs(self._worker, [a.job for a in held])
        if read.failed:
            with self._lock:  # owed again, a little later
                self._suspects.update(suspects)
                self._commit_seen = self._commit_seen or commit_seen
            self._retry_at = now + RETRY_INTERVAL
            return
        lost = [a for a in held if a.job.id not in still]
        if not lost:
            return
        withdrawn = {id(a) for a in self._executor.withdraw(lost)}
        for attempt in lost:
            if attempt.cancel():
                logger.warning(
                    "job %s (%s): discarded while it %s; its attempt is cancelled and its "
                    "outcome will be discarded",
                    attempt.job.id,
                    attempt.job.task_name,
                    "waited in line" if id(attempt) in withdrawn else "ran",
                )
        if withdrawn:
            self._wake()  # room in the line: the loop may claim again
