"""A fixed number of slots, each a thread with its own database connection.

A slot's thread is long-lived so its connection is reused from job to job. ``run`` may
return the slot's next attempt (a job claimed along with the last one's success): the slot
runs it at once, without a trip through the worker's loop. An attempt that outlives its
timeout leaves its slot at once: a fresh thread takes the slot over, and the stuck thread,
whenever its handler returns, exits instead of taking more work.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from django.db import connections

from jobqueue.runtime.attempt import Attempt

logger = logging.getLogger("jobqueue.worker")


class Executor:
    def __init__(
        self,
        *,
        concurrency: int,
        run: Callable[[Attempt], Attempt | None],
        on_slot_free: Callable[[], None],
        name: str = "jobqueue-slot",
    ) -> None:
        self.concurrency = concurrency
        self._run = run
        self._on_slot_free = on_slot_free
        self._name = name
        self._inbox: queue.SimpleQueue[Attempt | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running: dict[int, Attempt] = {}
        self._stuck: set[int] = set()  # job ids of timed-out attempts whose thread lives on
        self._threads = 0
        self.completed = 0

    def start(self) -> None:
        for _ in range(self.concurrency):
            self._spawn()

    def _spawn(self) -> None:
        self._threads += 1
        name = f"{self._name}-{self._threads}"
        threading.Thread(target=self._slot, name=name, daemon=True).start()

    def free_slots(self) -> int:
        with self._lock:
            return self.concurrency - len(self._running)

    @property
    def stuck(self) -> int:
        with self._lock:
            return len(self._stuck)

    def busy(self) -> int:
        """How many slots are running a job."""
        with self._lock:
            return len(self._running)

    def idle(self) -> bool:
        with self._lock:
            return not self._running

    def running(self) -> list[Attempt]:
        with self._lock:
            return list(self._running.values())

    def submit(self, attempt: Attempt) -> None:
        with self._lock:
            if len(self._running) >= self.concurrency:
                raise RuntimeError("no free slot: claim no more than free_slots()")
            self._running[attempt.job.id] = attempt
        self._inbox.put(attempt)

    def next_deadline(self) -> float | None:
        deadlines = [a.deadline for a in self.running() if a.deadline is not None]
        return min(deadlines, default=None)

    def expire(self, now: float | None = None) -> list[Attempt]:
        """Take attempts past their deadline out of their slots and hand the slots on."""
        now = time.monotonic() if now is None else now
        expired = []
        with self._lock:
            for job_id, attempt in list(self._running.items()):
                if attempt.deadline is not None and attempt.deadline <= now:
                    attempt.timed_out = True
                    attempt.cancelled.set()
                    del self._running[job_id]
                    self._stuck.add(job_id)
                    expired.append(attempt)
        for _ in expired:
            self._spawn()
        return expired

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.idle():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self) -> None:
        """Let idle slot threads exit; busy ones exit after their attempt."""
        for _ in range(self._threads):
            self._inbox.put(None)

    def _slot(self) -> None:
        try:
            while (attempt := self._inbox.get()) is not None:
                while attempt is not None:
                    attempt, stay = self._run_one(attempt)
                    if not stay:
                        return
        finally:
            connections.close_all()

    def _run_one(self, attempt: Attempt) -> tuple[Attempt | None, bool]:
        """Run ``attempt``; return the slot's next attempt, and whether its thread stays."""
        following = None
        try:
            following = self._run(attempt)
        except Exception:
            logger.exception("job %s: unexpected error in the worker", attempt.job.id)
        finally:
            _reset_connection()
        with self._lock:
            self.completed += 1
            if following is not None:
                self._running[following.job.id] = following
            if attempt.timed_out:
                self._stuck.discard(attempt.job.id)
                logger.warning(
                    "job %s: the handler that timed out has returned; its thread exits",
                    attempt.job.id,
                )
                if following is not None:
                    # Its slot has a fresh thread now: the next free thread runs this.
                    self._inbox.put(following)
                return None, False
            self._running.pop(attempt.job.id, None)
        if following is None:
            self._on_slot_free()
        return following, True


def _reset_connection() -> None:
    # A handler may leave its connection broken or inside a transaction it forgot; the next
    # job on this slot must start clean without paying for a new connection every time.
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:
            logger.error("a handler left a transaction open on %r; rolling it back", conn.alias)
            conn.close()
        elif conn.errors_occurred and not conn.is_usable():
            conn.close()
