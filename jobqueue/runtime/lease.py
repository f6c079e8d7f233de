"""A worker's liveness, as the database sees it: its row and the leases of its jobs.

``Registration`` is the worker's row in ``jobqueue_worker``: written at start-up, on the
loop's thread, refreshed by each beat, and removed at shutdown. ``Heartbeat`` is a thread
with its own connection that keeps this worker's claims alive.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DatabaseError, connections

from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.limits import resident_memory
from jobqueue.runtime.outage import HEALTH, Backoff, Health
from jobqueue.runtime.service import Control
from jobqueue.store.jobs import Store

logger = logging.getLogger("jobqueue.worker")


class Registration:
    """This worker's row: who it is, what it serves and which tasks it has registered."""

    def __init__(
        self,
        *,
        store: Store,
        worker: str,
        hostname: str,
        pid: int,
        pool: str,
        queues: dict[str, Any],
        concurrency: int,
        health: Health,
    ) -> None:
        self._store = store
        self._worker = worker
        self._hostname, self._pid, self._pool = hostname, pid, pool
        self._queues, self._concurrency = queues, concurrency
        self._health = health
        self._tasks: Sequence[str] = ()

    def register_first(self, tasks: Sequence[str], control: Control) -> bool:
        """Register this worker's row, with the names of its ``tasks``, waiting out a
        database outage; False if ``control`` was stopped first.

        A worker started while the database is away (a restart, a failover, a supervisor
        replacing a child mid-outage) waits for it, logging the outage once, instead of
        exiting: its supervisor would take an exit for a broken start-up and back off, up
        to a minute, after the database is back. Any other error still ends the process.
        """
        self._tasks = tasks
        backoff = Backoff()
        while True:
            try:
                self.register()
            except DatabaseError as exc:
                connections[self._store.queries.using].close()
                if not self._health.failed(exc, "registering at start-up"):
                    raise
                if control.wait_for_stop(backoff.next()):
                    return False
            else:
                self._health.ok()
                return True

    def register(self) -> None:
        """Insert the row, or refresh its heartbeat if it is there (each beat does)."""
        self._store.register_worker(
            worker=self._worker,
            hostname=self._hostname,
            pid=self._pid,
            pool=self._pool,
            queues=self._queues,
            concurrency=self._concurrency,
            tasks=self._tasks,
            memory=resident_memory(),
        )

    def deregister(self) -> None:
        """Remove the row (the worker is leaving); an error is logged, not raised."""
        try:
            self._store.deregister_worker(self._worker)
        except Exception:
            logger.exception("worker %s: could not remove its worker row", self._worker)


class Heartbeat:
    """Every ``LEASE / 3``: refresh the worker row and renew every held lease in one statement.

    It runs on its own thread, so on its own database connection: a handler holding a long
    transaction on its connection does not hold up the renewal. A held job the renewal did
    not match has lost its lease (another worker may own it now): it is cancelled
    (``Attempt.cancel()``: ``ctx.cancelled``, and an async handler's coroutine) and its
    eventual outcome is refused by the fence. A job discarded by an operator is usually
    cancelled sooner, by :mod:`jobqueue.runtime.cancel`; the beat is the backstop.
    """

    def __init__(
        self,
        *,
        store: Store,
        worker: str,
        held: Callable[[], list[Attempt]],
        register: Callable[[], None],
        interval: float,
    ) -> None:
        self._store = store
        self._worker = worker
        self._held = held
        self._register = register
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobqueue-heartbeat", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() or self._stop.is_set()

    def beat(self) -> None:
        """Renew once now."""
        self._register()
        held = [a for a in self._held() if not a.cancelled.is_set()]
        renewed = self._store.renew_leases(self._worker, [a.job.token for a in held])
        for attempt in held:
            if attempt.job.id not in renewed and attempt.cancel():
                logger.error(
                    "job %s (%s) lost its lease: another worker may own it now; this "
                    "attempt's outcome will be discarded",
                    attempt.job.id,
                    attempt.job.task_name,
                )

    def _run(self) -> None:
        backoff = Backoff()
        wait = self.interval
        try:
            while not self._stop.wait(wait):
                with HEALTH.trying(
                    "renewing leases",
                    self._store.queries.using,
                    "heartbeat failed; retrying in %.3g s",
                    self.interval,
                ) as attempt:
                    self.beat()
                if attempt.failed:
                    # A database blip must not kill the heartbeat: the leases still have
                    # two thirds of their time left. During an outage the next beat comes
                    # sooner than the interval, so that the leases are renewed within
                    # OUTAGE_CAP of the database's return.
                    wait = min(self.interval, backoff.next()) if attempt.outage else self.interval
                    continue
                HEALTH.ok()
                backoff.reset()
                wait = self.interval
        except BaseException as exc:  # pragma: no cover - reported by the worker loop
            self.error = exc
            raise
        finally:
            connections.close_all()
