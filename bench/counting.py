"""Count the SQL statements Django runs, on every thread, while a block runs.

Each thread has its own connection, so the counter installs itself as an execute wrapper
(Django's public hook, ``connection.execute_wrappers``) on every connection opened inside
the block, announced by the ``connection_created`` signal. Statements a connection runs
while it is being set up are not counted: they are paid once per connection, not per job.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created


class StatementCounter:
    """``with StatementCounter(classify) as counter: ...`` then read ``counter.counts``."""

    def __init__(self, classify: Callable[[str], str]) -> None:
        self.classify = classify
        self.counts: Counter[str] = Counter()
        self.connections = 0
        self._lock = threading.Lock()

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        kind = self.classify(sql)
        with self._lock:
            self.counts[kind] += 1  # executemany counts once: one call, one round trip
        return execute(sql, params, many, context)

    def __enter__(self) -> StatementCounter:
        # This thread's connection is already open: close it so that its next use opens a
        # new one, which the signal below hooks like every other thread's.
        connections.close_all()
        connection_created.connect(self._hook)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        connection_created.disconnect(self._hook)
        for conn in connections.all():
            if self in conn.execute_wrappers:
                conn.execute_wrappers.remove(self)

    def _hook(self, sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
        with self._lock:
            self.connections += 1
        # A connection object reconnects with its wrappers kept: hook it once only.
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)
