"""A fixed number of slots, each a thread with its own database connection.

Claimed jobs wait in one line, first claimed first run; a free slot takes the next at once.
Jobs claimed ahead wait there, held, until a slot frees. A slot's thread is long-lived so
its connection is reused from job to job. An attempt that outlives its timeout leaves its
slot at once: a fresh thread takes the slot over, and the stuck thread, whenever its
handler returns, exits instead of taking more work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from django.db import connections

from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.cleanup import restore_connections

logger = logging.getLogger("jobqueue.worker")

# How much the latest run counts in the typical run time (an exponential moving average).
TYPICAL_RUN_WEIGHT = 0.2


class AttemptRunner(Protocol):
    """What the slots ask to run their attempts (the worker's ``intake.Runner``)."""

    def starting(self, attempt: Attempt) -> None:
        """Called by the slot that took ``attempt`` out of the line, just before it runs it."""
        ...

    def run(self, attempt: Attempt) -> bool:
        """Run ``attempt``; True when something else sees to the slot's next job (a success
        handed to the writer, whose statement claims it)."""
        ...


class Executor:
    def __init__(
        self,
        *,
        concurrency: int,
        on_slot_free: Callable[[], None],
        name: str = "jobqueue-slot",
    ) -> None:
        """A slot left with nothing to run, whose runner did not see to its next job, calls
        ``on_slot_free()``: the one thing the slots tell the worker unasked."""
        self.concurrency = concurrency
        self._runner: AttemptRunner | None = None
        self._on_slot_free = on_slot_free
        self._name = name
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._line: deque[Attempt] = deque()  # claimed, not started yet
        self._running: dict[int, Attempt] = {}
        self._stuck: set[int] = set()  # job ids of timed-out attempts whose thread lives on
        self._threads = 0
        self._stopping = False
        self.completed = 0
        # Seconds a job typically takes here, from start to outcome; None before the first.
        self.typical_run: float | None = None

    def start(self, runner: AttemptRunner) -> None:
        """Start the slots, which run each attempt with ``runner``."""
        self._runner = runner
        for _ in range(self.concurrency):
            self._spawn()

    def _spawn(self) -> None:
        self._threads += 1
        name = f"{self._name}-{self._threads}"
        threading.Thread(target=self._slot, name=name, daemon=True).start()

    # -- what is where ----------------------------------------------------------------

    def load(self) -> tuple[int, int]:
        """How many attempts are running, and how many wait in line."""
        with self._lock:
            return len(self._running), len(self._line)

    @property
    def stuck(self) -> int:
        with self._lock:
            return len(self._stuck)

    def idle(self) -> bool:
        with self._lock:
            return not self._running and not self._line

    def running(self) -> list[Attempt]:
        with self._lock:
            return list(self._running.values())

    def holding(self) -> list[Attempt]:
        """Every attempt whose lease this process holds: running or waiting in line."""
        with self._lock:
            return [*self._running.values(), *self._line]

    def oldest_held(self) -> float | None:
        """When the attempt longest in line was claimed (monotonic), None if none waits."""
        with self._lock:
            return self._line[0].claimed if self._line else None

    # -- in and out -------------------------------------------------------------------

    def submit(self, attempt: Attempt) -> None:
        with self._lock:
            self._line.append(attempt)
            self._ready.notify()

    def take_held(self, claimed_before: float | None = None) -> list[Attempt]:
        """Take out of the line, unstarted, the attempts claimed before ``claimed_before``
        (every one if None), to be handed back."""
        with self._lock:
            taken = [a for a in self._line if claimed_before is None or a.claimed < claimed_before]
            for attempt in taken:
                self._line.remove(attempt)
        return taken

    def withdraw(self, attempts: list[Attempt]) -> list[Attempt]:
        """Take ``attempts`` out of the line, unstarted, if they still wait there (a job
        discarded while it was held); return those taken."""
        with self._lock:
            taken = [a for a in attempts if a in self._line]
            for attempt in taken:
                self._line.remove(attempt)
        return taken

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
        """Wait for the running attempts to end; the caller has emptied the line."""
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self) -> None:
        """Let idle slot threads exit; busy ones exit after their attempt."""
        with self._lock:
            self._stopping = True
            self._ready.notify_all()

    # -- a slot -----------------------------------------------------------------------

    def _slot(self) -> None:
        try:
            while (attempt := self._next()) is not None:
                if not self._run_one(attempt):
                    return
        finally:
            connections.close_all()

    def _next(self) -> Attempt | None:
        with self._lock:
            while True:
                while self._line:
                    attempt = self._line.popleft()
                    if attempt.cancelled.is_set():
                        # Its lease was lost while it waited: another worker may own it.
                        continue
                    attempt.started = time.monotonic()
                    self._running[attempt.job.id] = attempt
                    return attempt
                if self._stopping:
                    return None
                self._ready.wait()

    def _run_one(self, attempt: Attempt) -> bool:
        """Run ``attempt``; return whether this thread stays for more."""
        assert self._runner is not None, "start() sets the runner"
        seen_to = False
        try:
            # Outside the lock: the runner hands the start to the writer, whose lock is
            # never taken while this one is held.
            self._runner.starting(attempt)
            seen_to = self._runner.run(attempt)
        except Exception:
            logger.exception("job %s: unexpected error in the worker", attempt.job.id)
        finally:
            _reset_connection()
        self.end(attempt)
        if attempt.timed_out:
            logger.warning(
                "job %s: the handler that timed out has returned; its thread exits",
                attempt.job.id,
            )
            return False
        with self._lock:
            free = not self._line
        if free and not seen_to:
            self._on_slot_free()
        return True

    def end(self, attempt: Attempt) -> None:
        """Free the slot of an attempt whose handler has returned (once; later calls pass).

        Called before its success is handed to the writer, so that the writer counts the
        slot as free when it claims.
        """
        took = time.monotonic() - attempt.started
        with self._lock:
            if attempt.ended:
                return
            attempt.ended = True
            self.completed += 1
            self.typical_run = (
                took
                if self.typical_run is None
                else self.typical_run + TYPICAL_RUN_WEIGHT * (took - self.typical_run)
            )
            if attempt.timed_out:
                self._stuck.discard(attempt.job.id)
            else:
                self._running.pop(attempt.job.id, None)


def _reset_connection() -> None:
    # A handler may leave its connection broken or inside a transaction it forgot; the next
    # job on this slot must start clean without paying for a new connection every time.
    # attempt.run() restores a transaction left open before it writes the outcome (and
    # fails the attempt for it); this catches what an unexpected error made it skip.
    for left in restore_connections():
        logger.error("a handler left %s; it was rolled back and the connection reset", left)
    for conn in connections.all(initialized_only=True):
        if conn.errors_occurred and not conn.is_usable():
            conn.close()
