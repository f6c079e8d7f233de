"""The worker's looks for work, on the loop's thread: one claim for the free slots, and how
long until the next look.

A look is one claim through the writer (inline when the writer is idle), retried at once
on a fresh connection after a database restart. What comes next depends on what it found:
work, and the next look waits for a freed slot or a notification; nothing, and it waits
for a notification (with LISTEN, or the watcher's news of a commit on SQLite) or a poll
that doubles after each empty look (without), never longer than until the earliest due
job, which the claim that found nothing read in the same statement (on PostgreSQL: an idle
worker's look is one statement); an outage, and it waits a backoff, so that work resumes
within OUTAGE_CAP of the database's return.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, connections

from jobqueue import conf
from jobqueue.runtime.demand import Demand
from jobqueue.runtime.executor import Executor
from jobqueue.runtime.outage import Backoff, Health
from jobqueue.runtime.polling import SAFETY_POLL, PollBackoff
from jobqueue.runtime.service import Hint
from jobqueue.runtime.writer import Writer
from jobqueue.store.jobs import ClaimScope, Store

logger = logging.getLogger("jobqueue.worker")
T = TypeVar("T")


class Lookout:
    """One look at a time, and the waits between looks."""

    def __init__(
        self,
        *,
        store: Store,
        writer: Writer,
        executor: Executor,
        demand: Demand,
        listener: Hint | None,
        health: Health,
        settings: conf.Settings,
        burst: bool,
    ) -> None:
        self._store = store
        self._writer = writer
        self._executor = executor
        self._demand = demand
        self._listener = listener
        self._health = health
        self._poll_interval = settings.poll_interval
        self._burst = burst
        self._poll = PollBackoff(settings.poll_interval)
        self._claim_backoff = Backoff()
        self._scope: ClaimScope | None = None

    def start(self, scope: ClaimScope) -> None:
        """Look for the jobs of ``scope`` from now on."""
        self._scope = scope

    @property
    def listening(self) -> bool:
        return self._listener is not None and self._listener.connected.is_set()

    def idle(self) -> bool:
        """Nothing running, nothing in line, no success waiting to be written."""
        return self._executor.idle() and not self._writer.pending

    def look(self) -> float | None:
        """Claim for the free slots (the writer does); return how long until the next look,
        None if a burst worker found nothing to do."""
        assert self._scope is not None, "start() sets the scope"
        worker = self._scope.worker
        if not sum(self._demand.sizes()):
            # Every slot is busy: a freed slot wakes us, and we claim again at once.
            return SAFETY_POLL
        try:
            asked, claimed, due = self._retrying_once(self._writer.look)
        except DatabaseError as exc:
            connections[self._store.queries.using].close()
            if self._health.failed(exc, "claiming"):
                # The database is away (restart, failover): keep the process and its
                # in-flight jobs, and look again soon, so that work resumes within
                # OUTAGE_CAP of its return (a notification or LISTEN's return is sooner).
                return self._claim_backoff.next()
            wait = self._poll.empty_look()
            logger.exception("worker %s: claim failed; retrying in %g s", worker, wait)
            return wait
        self._health.ok()
        self._claim_backoff.reset()
        if not self._writer.alive:
            return 0.0  # the loop's next turn sees why, and stops
        if not asked:
            return SAFETY_POLL  # the slots filled before the statement went out
        logger.debug("looked for up to %s job(s), claimed %s", asked, claimed)
        if claimed:
            # (The intake marked the worker busy as it took them: Demand.claimed.)
            self._poll.found_work()
            # We may have taken everything due; a freed slot or a notification wakes us,
            # or the next start a rate limit allows, if it held jobs back.
            wait = SAFETY_POLL if self.listening else self._poll_interval
            return wait if due is None else max(0.0, min(wait, due))
        if self._burst and self.idle():
            logger.info("worker %s: nothing is due, leaving (--burst)", worker)
            return None
        # An empty look. With LISTEN (or the SQLite watcher) a notification (or a commit)
        # wakes us; without, poll, twice as long after each empty look. Either way, sleep
        # no longer than until a job is due.
        wait = SAFETY_POLL if self.listening else self._poll.empty_look()
        return wait if due is None else max(0.0, min(wait, due))

    def _retrying_once(self, query: Callable[[], T]) -> T:
        # After a database restart this thread's connection is dead but the database is
        # back: one fresh connection, at once, rather than a wait of a whole poll. During
        # an outage already seen, the backoff decides instead.
        try:
            return query()
        except DatabaseError:
            connections[self._store.queries.using].close()
            if self._health.down:
                raise
            return query()
