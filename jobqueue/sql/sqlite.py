"""SQLite's dialect: ``sqlite.sql``, the caller's clock, and a file to watch.

SQLite serves the processes of one host, so its statements take this host's clock
(:meth:`SQLiteDialect.clock`) instead of one of their own; its one writer at a time makes
the transactions of several statements that :class:`~jobqueue.sql.base.Dialect` runs safe
without locking reads; other processes' commits show in the database file, which a
worker watches (``runtime/watcher.py``); and every new connection is switched to WAL.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.sqlite3.creation import DatabaseCreation
from django.utils import timezone

from jobqueue.sql.base import Dialect, WakeUp


class SQLiteDialect(Dialect):
    """SQLite's named statements of one alias."""

    vendor = "sqlite"

    @property
    def wake_up(self) -> WakeUp:
        """A watch on the database file, which sees other connections' commits; an
        in-memory database, which no other process can reach, has nothing to watch."""
        return "watch" if self.database_file() is not None else "poll"

    def clock(self, **offsets: float) -> dict[str, Any]:
        """Times from this host's clock: ``now`` and ``now + offset`` for each offset."""
        now = timezone.now()
        params = {"now": self.time(now)}
        for name, seconds in offsets.items():
            params[name] = self.time(now + dt.timedelta(seconds=seconds))
        return params

    # -- answers the rest of jobqueue asks of a database ------------------------------

    def database_now(self) -> dt.datetime:
        """This host's clock, which the statements take."""
        return timezone.now()

    def database_file(self) -> str | None:
        """The file the database lives in; None for an in-memory one."""
        name = self.connection.settings_dict["NAME"]
        if not name or DatabaseCreation.is_in_memory_db(name):
            return None
        return str(name)

    @classmethod
    def in_transaction(cls, connection: BaseDatabaseWrapper) -> bool:
        """The sqlite3 module reports it."""
        return bool(connection.connection.in_transaction)

    @classmethod
    def configure_connection(cls, connection: BaseDatabaseWrapper) -> None:
        # WAL lets workers read while another process writes; it is a property of the
        # file, so setting it on every new connection is cheap and idempotent. In-memory
        # databases answer "memory" and stay as they are.
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
