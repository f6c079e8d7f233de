"""Database outages: one line when the database goes away, one when it is back, and a backoff.

A restart or a failover of PostgreSQL makes every thread of a worker fail at once: the main
loop's claims, the writer's statements, the heartbeat, the rescue pass. Each thread retries
on its own schedule (a ``Backoff``), but the process logs the outage once, whichever thread
meets it first (``Health``), instead of one traceback per thread per second. An error that
is not about reaching the database (a value it refuses, a bug) is not an outage: callers
log it as before.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType

from django.db import InterfaceError, OperationalError, connections

logger = logging.getLogger("jobqueue.worker")

# A retry waits this long after the first failure, twice as long after each further one, up
# to OUTAGE_CAP: a worker resumes within OUTAGE_CAP of the database coming back, and a
# refused connection every few seconds costs the database nothing.
OUTAGE_FIRST = 0.5
OUTAGE_CAP = 5.0


def is_outage(exc: BaseException) -> bool:
    """True for errors about reaching the database (refused, terminated, closed), which
    Django raises as ``OperationalError`` or ``InterfaceError`` whatever the driver."""
    return isinstance(exc, OperationalError | InterfaceError)


def describe(exc: BaseException) -> str:
    """The error's first line, short enough for one log line."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if len(first) <= 200 else first[:200] + "..."


class Backoff:
    """One thread's wait before its next try: OUTAGE_FIRST, doubling, up to OUTAGE_CAP."""

    def __init__(self, first: float = OUTAGE_FIRST, cap: float = OUTAGE_CAP) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def next(self) -> float:
        wait, self._next = self._next, min(self._next * 2, self.cap)
        return wait

    def reset(self) -> None:
        self._next = self.first


class Health:
    """Whether this process last found the database reachable; logs each change once."""

    def __init__(self, name: str, log: logging.Logger = logger) -> None:
        self.name = name  # who is speaking: "worker host:pid:tag", "supervisor"
        self._log = log
        # Threads report at once when the database goes: the first one logs, the others
        # only add to the count.
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._failures = 0

    def begin(self, name: str) -> None:
        """Start afresh under ``name``: a new worker has seen no outage yet."""
        with self._lock:
            self.name = name
            self._down_since, self._failures = None, 0

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def failed(self, exc: BaseException, doing: str) -> bool:
        """Report a failed statement; False if ``exc`` is not an outage (the caller logs it).

        Only the first failure of an outage is logged.
        """
        if not is_outage(exc):
            return False
        with self._lock:
            self._failures += 1
            if self._down_since is not None:
                return True
            self._down_since = time.monotonic()
        self._log.warning(
            "%s: database unavailable (%s, while %s); retrying with backoff up to %g s",
            self.name,
            describe(exc),
            doing,
            OUTAGE_CAP,
        )
        return True

    def trying(
        self,
        doing: str,
        using: str,
        message: str,
        *args: object,
        catching: type[BaseException] = Exception,
        log: logging.Logger = logger,
    ) -> Trying:
        """A ``with`` block that meets its database errors for this process: see ``Trying``."""
        return Trying(self, doing, using, (message, *args), catching, log)

    def ok(self) -> None:
        """Report a statement that went through: logs the end of an outage, if one was on."""
        if self._down_since is None:  # the common case, without the lock
            return
        with self._lock:
            if self._down_since is None:
                return
            lasted, failures = time.monotonic() - self._down_since, self._failures
            self._down_since, self._failures = None, 0
        self._log.warning(
            "%s: database is back after %.1f s (%s failed statement(s)); resuming",
            self.name,
            lasted,
            failures,
        )


class Trying:
    """What a thread does when a statement of its own fails, written once.

    Inside ``with health.trying(doing, using, message, *args) as attempt:`` an exception of
    ``catching`` closes the thread's connection to ``using`` (the next statement opens a
    fresh one), is reported to ``Health`` (an outage is logged once for the process), is
    logged with ``message % args`` and its traceback if it is not an outage, and is
    swallowed: after the block, ``attempt.failed`` and ``attempt.outage`` say what
    happened, and the caller decides when to try again. Any other exception propagates.
    """

    def __init__(
        self,
        health: Health,
        doing: str,
        using: str,
        message: tuple[object, ...],
        catching: type[BaseException],
        log: logging.Logger,
    ) -> None:
        self._health = health
        self._doing = doing
        self._using = using
        self._message = message
        self._catching = catching
        self._log = log
        self.error: BaseException | None = None
        self.outage = False

    @property
    def failed(self) -> bool:
        return self.error is not None

    def __enter__(self) -> Trying:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None or not isinstance(exc, self._catching):
            return False
        self.error = exc
        connections[self._using].close()
        self.outage = self._health.failed(exc, self._doing)
        if not self.outage:
            message, *args = self._message
            self._log.error(str(message), *args, exc_info=exc)
        return True


# One per process: a worker process runs one Worker, whose threads all share it (the writer
# reports through it too). In-process tests that build several workers share it as well,
# which only merges their outage lines.
HEALTH = Health("worker")
