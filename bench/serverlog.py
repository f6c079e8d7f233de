"""Count the statements the PostgreSQL server runs for one database, from its log.

``ALTER DATABASE <bench db> SET log_statement = 'all'`` makes the server log every statement
that a NEW connection to that database runs (no restart, no other database affected, unlike
``pg_stat_statements``, which needs ``shared_preload_libraries``); the count is the number of
``statement:`` and ``execute ...:`` lines for that database, read from the server's log file
past an offset. Only databases whose name contains ``bench`` are touched.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from pathlib import Path

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
        major = int(row[0]) // 10000 if row else 0
        default = f"/var/log/postgresql/postgresql-{major}-main.log"
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
