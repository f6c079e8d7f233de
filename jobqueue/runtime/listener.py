"""LISTEN on PostgreSQL: a hint that work may be waiting, never the truth.

The listener holds one dedicated psycopg connection, outside Django's connection handling,
so a transaction-mode pooler in front of Django's connections does not matter: its address
is ``JOBQUEUE["LISTEN_URL"]``, else the ``DATABASE_DIRECT_URL`` environment variable, else
the database's own settings. A lost notification costs at most one safety poll; a lost
connection is logged, the worker polls meanwhile, and the listener reconnects with backoff.

Every payload goes to ``on_notify`` as it is: a queue name (an enqueue, an operator's
Retry) or ``cancel:<id>[,<id>...]`` (an operator discarded running jobs; see
:mod:`jobqueue.channel`). The listener does not read them; the service does.

Through a transaction-mode pooler LISTEN succeeds and then hears nothing: the server session
that ran it goes back to the pool. The listener checks at each connection whether a pooler
is in between and, if it is one that would swallow notifications, says so and gives up, so
that the worker polls instead of waiting on a silent connection.
"""

from __future__ import annotations

import logging
import os
import secrets
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

from jobqueue.sql import load

logger = logging.getLogger("jobqueue.worker")

RECONNECT_FIRST = 0.1
RECONNECT_CAP = 1.0  # a refused connection is cheap; a restarted database is found fast
SAFETY_TIMEOUT = 5.0  # the thread's longest wait; stop() wakes it at once anyway
PROBE_TIMEOUT = 1.0  # how long a probe notification may take through a session-mode pooler

POOLER_WARNING = (
    "the LISTEN connection goes through a connection pooler (PgBouncer in transaction "
    "mode?): notifications will not arrive; set DATABASE_DIRECT_URL or "
    "JOBQUEUE['LISTEN_URL'] to the database itself. Polling instead."
)


def connection_target(using: str, listen_url: str | None) -> tuple[str, dict[str, Any]]:
    """Where to LISTEN: ``(url, {})`` or ``("", psycopg keyword arguments)``."""
    if listen_url:
        return listen_url, {}
    direct = os.environ.get("DATABASE_DIRECT_URL")
    if direct:
        return direct, {}
    params = connections[using].get_connection_params()
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    return "", params


class Listener:
    """A thread that LISTENs on ``channel`` and reports each payload to ``on_notify``."""

    def __init__(
        self,
        *,
        target: tuple[str, dict[str, Any]],
        channel: str,
        on_notify: Callable[[str], None],
        on_connect: Callable[[], None],
    ) -> None:
        self._url, self._params = target
        self._channel = channel
        self._on_notify = on_notify
        self._on_connect = on_connect
        self._stop = threading.Event()
        # stop() writes a byte here to wake the thread from its wait on the connection, so
        # that a worker shuts down without waiting out a polling timeout.
        self._wake_reader, self._wake_writer = socket.socketpair()
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobqueue-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        try:
            self._wake_writer.send(b"x")
        except OSError:  # stopped before, and the socket closed
            return
        self._thread.join(timeout=SAFETY_TIMEOUT)
        self._wake_reader.close()
        self._wake_writer.close()

    def _run(self) -> None:
        try:
            import psycopg
        except ImportError:
            logger.error("LISTEN needs psycopg 3 (pip install 'psycopg[binary]'); polling instead")
            return
        delay = RECONNECT_FIRST
        failures = 0
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True, **self._params) as conn:
                    if not self._can_hear(conn):
                        # A setting to fix, not an outage: every reconnection would find the
                        # same pooler. Never connected, so the worker keeps polling.
                        logger.warning(POOLER_WARNING)
                        return
                    conn.execute(f'LISTEN "{self._channel}"')
                    self.connected.set()
                    if failures:
                        logger.warning(
                            "LISTEN connection is back after %s failed attempt(s)", failures
                        )
                    delay, failures = RECONNECT_FIRST, 0
                    # Anything sent while we were away is lost: look once now.
                    self._on_connect()
                    while not self._stop.is_set():
                        # Takes what has arrived without blocking, including what psycopg
                        # had already read off the socket, which select() would not see.
                        for notification in conn.notifies(timeout=0):
                            self._on_notify(notification.payload)
                        waited_on = [conn.fileno(), self._wake_reader.fileno()]
                        select.select(waited_on, [], [], SAFETY_TIMEOUT)
            except Exception as exc:
                was_connected = self.connected.is_set()
                self.connected.clear()
                failures += 1
                if was_connected or failures == 1:
                    logger.warning(
                        "LISTEN connection lost (%s); polling until it is back, retrying "
                        "every %g s at most",
                        exc,
                        RECONNECT_CAP,
                    )
                if self._stop.wait(delay):
                    break
                delay = min(delay * 2, RECONNECT_CAP)
        self.connected.clear()

    def _can_hear(self, conn: Any) -> bool:
        """Whether notifications reach ``conn``: not through a transaction-mode pooler."""
        import psycopg

        statements = load("postgresql")
        row = conn.execute(statements["listener_backend_pid"]).fetchone()
        if row is not None and row[0] == conn.info.backend_pid:
            return True  # the server itself: one session for the life of the connection
        # A pooler (PgBouncer sends the client a cancel key of its own). In session mode the
        # connection keeps one server session and LISTEN works; in transaction mode it does
        # not. Ask: a probe sent from another connection, on a channel no one else uses.
        probe = f"{self._channel}_probe_{secrets.token_hex(6)}"
        conn.execute(f'LISTEN "{probe}"')
        with psycopg.connect(self._url, autocommit=True, **self._params) as other:
            other.execute(statements["listener_probe"], {"channel": probe})
        heard = any(True for _ in conn.notifies(timeout=PROBE_TIMEOUT, stop_after=1))
        conn.execute(f'UNLISTEN "{probe}"')
        if heard:
            logger.info("the LISTEN connection goes through a pooler in session mode: it hears")
        return heard
