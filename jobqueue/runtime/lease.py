"""The heartbeat: a thread with its own connection that keeps this worker's claims alive."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import connections

from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.outage import HEALTH, Backoff
from jobqueue.store import Store

logger = logging.getLogger("jobqueue.worker")


class Heartbeat:
    """Every ``LEASE / 3``: refresh the worker row and renew every held lease in one statement.

    It runs on its own thread, so on its own database connection: a handler holding a long
    transaction on its connection does not hold up the renewal. A held job the renewal did
    not match has lost its lease (another worker may own it now): its ``cancelled`` is set
    and its eventual outcome is refused by the fence.
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
            if attempt.job.id not in renewed:
                attempt.cancelled.set()
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
                try:
                    self.beat()
                except Exception as exc:
                    # A database blip must not kill the heartbeat: the leases still have
                    # two thirds of their time left. During an outage the next beat comes
                    # sooner than the interval, so that the leases are renewed within
                    # OUTAGE_CAP of the database's return.
                    connections[self._store.queries.using].close()
                    if HEALTH.failed(exc, "renewing leases"):
                        wait = min(self.interval, backoff.next())
                    else:
                        wait = self.interval
                        logger.exception("heartbeat failed; retrying in %.3g s", wait)
                    continue
                HEALTH.ok()
                backoff.reset()
                wait = self.interval
        except BaseException as exc:  # pragma: no cover - reported by the worker loop
            self.error = exc
            raise
        finally:
            connections.close_all()
