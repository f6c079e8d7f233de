"""SQLite's wake-up: a thread that notices other connections' commits, where there is no LISTEN.

The watcher owns one read-only sqlite3 connection to the database file, outside Django's
connection handling, and the thread that runs it. Every ``WATCH_INTERVAL`` it asks
``PRAGMA data_version``, which changes when any other connection has committed a change to
the file since the last time this connection asked. It reads no table and touches no page
of the jobs table: it costs microseconds, and the jobs table sees no statement until the
number changes and the loop looks. Like a notification it is a hint, never the truth: the
safety poll stays.

It cannot tell a commit that enqueued a job from any other: the web process's writes to its
own tables, another worker's claim, or a commit of this process's own threads (the writer,
the heartbeat, the slots, each of which has its own connection). A wake it should not have
caused costs one look; an idle worker's only own commit is its heartbeat, one look per
``LEASE / 3``. A busy worker's looks take nothing while its slots are full.

It watches files only: an in-memory database cannot be shared with another process, so no
other process could enqueue into it (``Queries.database_file`` is then ``None``).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from jobqueue.sql import load

logger = logging.getLogger("jobqueue.worker")

WATCH_INTERVAL = 0.1  # s between looks at data_version: a job enqueued elsewhere waits half that
RECONNECT_FIRST = 0.1
RECONNECT_CAP = 5.0


class Watcher:
    """A thread that calls ``on_change`` when another connection commits to ``path``."""

    def __init__(
        self,
        *,
        path: str,
        on_change: Callable[[], None],
        interval: float = WATCH_INTERVAL,
    ) -> None:
        self._path = path
        self._uri = Path(path).resolve().as_uri() + "?mode=ro"
        self._statement = load("sqlite")["data_version"]
        self._on_change = on_change
        self._interval = interval
        self._stop = threading.Event()
        # Set while the watcher sees every commit: the loop may then wait for it, not a poll.
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobqueue-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._interval + RECONNECT_CAP)

    def _run(self) -> None:
        delay = RECONNECT_FIRST
        failures = 0
        while not self._stop.is_set():
            try:
                self._watch()
            except sqlite3.Error as exc:
                was_connected = self.connected.is_set()
                self.connected.clear()
                if was_connected:
                    delay, failures = RECONNECT_FIRST, 0
                failures += 1
                if was_connected or failures == 1:
                    logger.warning(
                        "cannot watch the SQLite database for commits (%s); polling until it "
                        "can, retrying every %g s at most",
                        exc,
                        RECONNECT_CAP,
                    )
                if self._stop.wait(delay):
                    break
                delay = min(delay * 2, RECONNECT_CAP)
            else:
                break
        self.connected.clear()

    def _watch(self) -> None:
        # Read-only and in autocommit: the pragma never holds a read transaction open, so it
        # never keeps a checkpoint from resetting the WAL.
        connection = sqlite3.connect(
            self._uri, uri=True, isolation_level=None, check_same_thread=False
        )
        try:
            version = self._version(connection)
            self.connected.set()
            logger.debug(
                "watching %s for other connections' commits every %g s", self._path, self._interval
            )
            # A commit between the loop's last look and the first version read here would
            # otherwise go unseen until the safety poll: look once now.
            self._on_change()
            while not self._stop.wait(self._interval):
                seen = self._version(connection)
                if seen != version:
                    version = seen
                    self._on_change()
        finally:
            connection.close()

    def _version(self, connection: sqlite3.Connection) -> int:
        row = connection.execute(self._statement).fetchone()
        return int(row[0])
