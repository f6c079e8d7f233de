"""Count the statements the server runs for one database, from its log: PostgreSQL's
(:class:`ServerLog`) or MariaDB's general query log (:class:`MariaDBLog`).

``ALTER DATABASE <bench db> SET log_statement = 'all'`` makes the server log every statement
that a NEW connection to that database runs (no restart, no other database affected, unlike
``pg_stat_statements``, which needs ``shared_preload_libraries``); the count is the number of
``statement:`` and ``execute ...:`` lines for that database, read from the server's log file
past an offset. Only databases whose name contains ``bench`` are touched.

MariaDB has no per-database switch: ``SET GLOBAL general_log = ON`` logs every connection's
commands to one file while a count is wanted, and off again afterwards. Each line names a
connection (a thread id), and a connection's ``Connect`` (or ``Init DB``) line names its
database, so the count keeps the ``Query`` and ``Execute`` lines of the connections to that
database, read past an offset. Connection set-up statements (``SET autocommit``, ``SET
SESSION TRANSACTION ISOLATION LEVEL``, ``SET NAMES``) are counted, as they are queries.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

# Debian's log_line_prefix '%m [%p] %q%u@%d ': "... [123] postgres@db LOG:  statement: ..."
LINE = re.compile(r"@(?P<db>\S+) LOG:  (?:statement|execute [^:]*): ")


class ServerLog:
    def __init__(self, path: Path, server_url: str) -> None:
        self.path = path
        self.server_url = server_url

    @classmethod
    def find(cls, server_url: str) -> ServerLog | None:
        """The server's log file if this process can read it (``BENCH_SERVER_LOG`` overrides)."""
        with psycopg.connect(f"{server_url}/postgres") as conn:
            row = conn.execute("SHOW server_version_num").fetchone()
            data = conn.execute("SHOW data_directory").fetchone()
        major = int(row[0]) // 10000 if row else 0
        # Debian's clusters live in /var/lib/postgresql/<major>/<cluster> and log to
        # /var/log/postgresql/postgresql-<major>-<cluster>.log.
        cluster = Path(str(data[0])).name if data else "main"
        default = f"/var/log/postgresql/postgresql-{major}-{cluster}.log"
        path = Path(os.environ.get("BENCH_SERVER_LOG", default))
        return cls(path, server_url) if os.access(path, os.R_OK) else None

    def _set(self, database: str, on: bool) -> None:
        assert "bench" in database, database
        name = sql.Identifier(database)
        statement = (
            sql.SQL("ALTER DATABASE {} SET log_statement = 'all'")
            if on
            else sql.SQL("ALTER DATABASE {} RESET log_statement")
        )
        for attempt in range(10):  # the shared server may be restarting: wait for it
            try:
                with psycopg.connect(f"{self.server_url}/postgres", autocommit=True) as conn:
                    conn.execute(statement.format(name))
                return
            except psycopg.OperationalError:
                if attempt == 9:
                    raise
                time.sleep(1)

    def enable(self, database: str) -> None:
        """Log every statement of connections opened from now on to ``database``."""
        self._set(database, on=True)

    def disable(self, database: str) -> None:
        self._set(database, on=False)

    def offset(self) -> int:
        return self.path.stat().st_size

    def count(self, offset: int) -> Counter[str]:
        """Statements per database logged since ``offset``."""
        time.sleep(0.2)  # let the last lines reach the file
        with self.path.open("rb") as file:
            file.seek(offset)
            text = file.read().decode("utf-8", "replace")
        counts: Counter[str] = Counter()
        for line in text.splitlines():
            match = LINE.search(line)
            if match:
                counts[match["db"]] += 1
        return counts


# "261201 15:56:00\t    20 Quit\t" or "\t\t    21 Query\tselect 1": an optional time stamp,
# the thread id, the command, a tab, its argument (a statement may go on over more lines).
GENERAL_LINE = re.compile(
    r"^(?:\d{6} [ \d]\d:\d\d:\d\d)?\s+(?P<thread>\d+) "
    r"(?P<command>[A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*)?)\t(?P<argument>.*)$"
)
CONNECT = re.compile(r" on (?P<db>\S*) using ")
COUNTED = {"Query", "Execute"}


def general_log_counts(text: str, start: int, databases: set[str]) -> Counter[str]:
    """Statements per database in ``databases`` among the lines of the general log ``text``
    that begin at or after character ``start``; the lines before it name the databases of
    the connections opened earlier."""
    where: dict[str, str] = {}  # thread id -> its database
    counts: Counter[str] = Counter()
    position = 0
    for line in text.splitlines(keepends=True):
        at = position
        position += len(line)
        match = GENERAL_LINE.match(line.rstrip("\n"))
        if not match:
            continue
        thread, command = match["thread"], match["command"]
        if command == "Connect":
            connected = CONNECT.search(match["argument"])
            where[thread] = connected["db"] if connected else ""
        elif command == "Init DB":
            where[thread] = match["argument"].strip()
        elif command in COUNTED and at >= start and where.get(thread) in databases:
            counts[where[thread]] += 1
    return counts


class MariaDBLog:
    """:class:`ServerLog`'s counterpart for MariaDB, the same four calls: the general query
    log is on while any database is enabled, and off once none is."""

    def __init__(self, path: Path, config: dict[str, Any]) -> None:
        self.path = path
        self.config = config
        self.databases: set[str] = set()
        self.start = 0  # where the log began to be read: every Connect line since is seen

    @classmethod
    def find(cls, config: dict[str, Any]) -> MariaDBLog | None:
        """The server's general log file if this process can read it (it is in the server's
        data directory: run as root, or set ``BENCH_SERVER_LOG``)."""
        from bench.database import connect_mysql

        with connect_mysql(config) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT @@datadir, @@general_log_file, @@log_output")
            datadir, name, output = cursor.fetchone()
        if "FILE" not in str(output).upper():
            return None
        path = Path(os.environ.get("BENCH_SERVER_LOG", Path(datadir) / name))
        return cls(path, config) if os.access(path, os.R_OK) else None

    def _general_log(self, on: bool) -> None:
        from bench.database import connect_mysql

        with connect_mysql(self.config) as conn, conn.cursor() as cursor:
            cursor.execute(f"SET GLOBAL general_log = {'ON' if on else 'OFF'}")

    def enable(self, database: str) -> None:
        """Count ``database``'s statements from now on, its connections opened from now on."""
        assert "bench" in database, database
        if not self.databases:
            self.start = self.offset()
            self._general_log(on=True)
        self.databases.add(database)

    def disable(self, database: str) -> None:
        self.databases.discard(database)
        if not self.databases:
            self._general_log(on=False)

    def offset(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def count(self, offset: int) -> Counter[str]:
        """Statements per enabled database logged since ``offset``."""
        time.sleep(0.2)  # let the last lines reach the file
        with self.path.open("rb") as file:
            file.seek(self.start)
            data = file.read()
        # Offsets are in bytes; the lines before ``offset`` only name connections' databases.
        head = data[: max(offset - self.start, 0)].decode("utf-8", "replace")
        text = head + data[max(offset - self.start, 0) :].decode("utf-8", "replace")
        return general_log_counts(text, len(head), self.databases)
