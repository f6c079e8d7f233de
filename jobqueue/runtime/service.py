"""What a worker and the supervisor share: a loop that sleeps until an event, and stops.

``Control`` holds the loop's two events. *Stop* is set once, by ``stop()`` (a signal
handler, a limit, a test) and never cleared. *Wake* is set by whatever may have work for
the loop (a freed slot, a notification, a job enqueued in this process) and cleared each
time the loop sleeps. Any thread may set them; only the loop's own thread sleeps on them.

``Service`` is the base of ``Worker`` and ``Supervisor``: its ``control``, ``stop()``,
``stopping`` and its ``listener``, the thread that tells the loop that work may be waiting:
on PostgreSQL a ``Listener`` whose notifications wake it (``notified``), on a SQLite file a
``Watcher`` whose every sight of another connection's commit wakes it (``committed``).
Which one a database gets is its dialect's answer (``Dialect.wake_up``: "listen", "watch"
or "poll"); the part is built here, so that the loop and the lookout only ask
``listening``.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from jobqueue import conf
from jobqueue.runtime.listener import Listener, connection_target
from jobqueue.runtime.watcher import Watcher
from jobqueue.store.channel import CANCEL_PREFIX, NOTIFY_CHANNEL
from jobqueue.store.jobs import Store


class Hint(Protocol):
    """A thread that wakes the loop when work may be waiting: a ``Listener`` or a ``Watcher``.

    ``connected`` is set while it would see new work; the loop then needs to poll only
    for safety.
    """

    connected: threading.Event

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Control:
    """A loop's stop and wake events."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._wake = threading.Event()

    def stop(self) -> None:
        """Ask the loop to stop, and wake it for that; safe from a signal handler."""
        self._stop.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wake(self) -> None:
        """Make the loop's current or next sleep return at once."""
        self._wake.set()

    def sleep(self, until: float) -> bool:
        """Wait until the monotonic time ``until`` or a wake; True if a wake ended it.

        A wake that came while the loop was busy ends this sleep at once: it is cleared
        only here, after the wait, so the loop never misses one.
        """
        timeout = until - time.monotonic()
        woken = self._wake.wait(timeout) if timeout > 0 else self._wake.is_set()
        self._wake.clear()
        return woken

    def wait_for_stop(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for a stop (a wake does not end it); True if stopped."""
        return self._stop.wait(seconds)


class Service:
    """A loop with a ``Control``, and when ``listen`` a ``Hint`` that wakes it."""

    def __init__(self, *, store: Store, settings: conf.Settings, listen: bool = True) -> None:
        self.control = Control()
        self.listener: Hint | None = None
        if not listen:
            return
        # The database says how its workers hear of work: LISTEN (PostgreSQL), a watch on
        # its file (SQLite, unless in memory, where no other process can enqueue), or
        # nothing, so that the loop polls (MySQL).
        queries = store.queries
        wake_up = queries.wake_up
        if wake_up == "listen":
            self.listener = Listener(
                target=connection_target(queries.using, settings.listen_url),
                channel=NOTIFY_CHANNEL,
                on_notify=self.notified,
                on_connect=self.control.wake,
            )
        elif wake_up == "watch":
            path = queries.database_file()
            if path is not None:
                self.listener = Watcher(path=path, on_change=self.committed)

    def stop(self) -> None:
        """Ask the loop to stop; safe from a signal handler."""
        self.control.stop()

    @property
    def stopping(self) -> bool:
        return self.control.stopping

    @property
    def listening(self) -> bool:
        """True while the listener is connected: it, not a poll, brings news of work."""
        return self.listener is not None and self.listener.connected.is_set()

    def notified(self, payload: str) -> None:
        """A notification came (on the listener's thread): wake the loop.

        The payload is a queue name (an enqueue, an operator's Retry), or ``cancel:<id>``
        (``jobqueue.channel.CANCEL_PREFIX``: an operator discarded a running job). A worker
        wakes only for the queues it serves, and checks a cancel against the jobs it runs.
        Here (the supervisor) a cancel brings no work, so it does not wake the loop; a
        service older than the cancel payload took it for a queue and woke once: harmless.
        """
        if not payload.startswith(CANCEL_PREFIX):
            self.control.wake()

    def committed(self) -> None:
        """Another connection committed to the SQLite file (on the watcher's thread): wake
        the loop. A worker also checks, at its next look, whether it lost a job it runs."""
        self.control.wake()
