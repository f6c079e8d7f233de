"""MySQL's and MariaDB's dialect: ``mysql.sql``, locking reads, and the claim's rule in Python.

Django's vendor ``mysql`` is MySQL 8.0+ and MariaDB 10.6+ alike. MySQL has neither writing
CTEs nor ``UPDATE ... RETURNING``, and forbids a subquery on the table an ``UPDATE``
writes, so a write that reports the rows it wrote is a pair here: ``<name>_lock``, a
``SELECT ... FOR UPDATE`` of the rows and of what ``RETURNING`` would say, then ``<name>``,
the write of those rows by id, and ``<name>_read`` where the report is of values the write
made (:meth:`MySQLDialect.fetchall`). The claim is such a pair with ``SKIP LOCKED``, and
between the two this module picks which of the locked candidates to take: the rule that
PostgreSQL's claim states in SQL. The enqueue leaves out a key an unfinished job holds
with ``NOT EXISTS`` and runs again when another transaction's commit of the key beat it to
the unique index; on MySQL, which has no ``INSERT ... RETURNING``, one row at a time.
Workers poll: there is neither NOTIFY nor a file to watch.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from decimal import Decimal
from typing import Any, NamedTuple

from django.db import IntegrityError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from jobqueue.sql.base import ClaimedRow, Dialect, without

# The MySQL error of a duplicate key (ER_DUP_ENTRY), and the index an enqueue may hit.
_DUPLICATE_KEY = 1062
_UNFINISHED_KEY_INDEX = "jobqueue_job_unfinished_key"
# How many times an enqueue runs again after another transaction's commit of the same key
# beat it to the unique index (each run sees what was committed before it).
_ENQUEUE_RUNS = 5


class Candidate(NamedTuple):
    """One row of ``claim_lock``: a due job, locked, that the claim may take."""

    id: int
    task_name: str
    queue: str
    priority: int
    args: Any
    kwargs: Any
    attempts: int  # before this claim
    max_attempts: int
    crashes: int
    steps: Any
    waited: Decimal
    trace_context: Any
    holdable: int  # 1 if it may be claimed ahead and held (see PostgreSQL's claim)


class MySQLDialect(Dialect):
    """MySQL's (and MariaDB's) named statements of one alias."""

    vendor = "mysql"
    # Migration 0009_mysql builds the partial indexes and the conditional unique
    # constraint on generated columns.
    conditions_built_by_migration = True

    @classmethod
    def _derived(cls, statements: Mapping[str, str]) -> dict[str, str]:
        # MySQL's enqueue (MariaDB's takes RETURNING): the id comes from the driver.
        return {
            "enqueue_one_plain": without(statements["enqueue_one"], "RETURNING id, idempotency_key")
        }

    @property
    def insert_returning(self) -> bool:
        """Whether an INSERT may report its rows with RETURNING: MariaDB (10.5+) only;
        MySQL 8 has none."""
        return bool(self.connection.mysql_is_mariadb)  # type: ignore[attr-defined]

    # -- the enqueue ------------------------------------------------------------------

    def _insert_rows(
        self,
        params: dict[str, Any],
        args: Sequence[Any],
        kwargs: Sequence[Any],
        keys: Sequence[str | None],
        flow: Sequence[tuple[str | None, str | None]],
    ) -> list[tuple[int, str | None]]:
        """``NOT EXISTS`` on the unique index leaves out a key an unfinished job holds, and
        a duplicate key on that index (another transaction committed the key after this
        statement read) runs the insert again, in a savepoint, until it sees that job. A
        batch's later jobs with a key an earlier one has are left out here, as ON CONFLICT
        DO NOTHING leaves them out on PostgreSQL and SQLite.

        MariaDB inserts a batch in one statement and reports the rows with RETURNING.
        MySQL has no INSERT ... RETURNING, and a multi-row insert's ids need not be
        consecutive there, so it inserts one row per statement (``enqueue_one_plain``) and
        reads each id from the driver: slower, and tested only by making MariaDB take the
        same path.
        """
        kept = []
        seen: set[str] = set()
        for a, k, key, (ckey, rkey) in zip(args, kwargs, keys, flow, strict=True):
            row = (a, k, key, ckey, rkey)
            if key is not None:
                if key in seen:
                    continue
                seen.add(key)
            kept.append(row)
        keyed = bool(seen)
        run = 1
        while True:
            try:
                # A savepoint, when a key may collide: the duplicate rolls back this
                # insert only, never the caller's transaction.
                with transaction.atomic(using=self.using) if keyed else nullcontext():
                    inserted = [(int(i), key) for i, key in self._insert(kept, params)]
            except IntegrityError as exc:
                if not keyed or run == _ENQUEUE_RUNS or not _duplicate_key(exc):
                    raise
                run += 1
                continue
            inserted.sort()
            return inserted

    def _insert(self, rows: list[Any], params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Insert ``rows`` (``[args, kwargs, key]`` each); the id and key of each row
        inserted."""
        if not self.insert_returning:
            inserted = []
            with transaction.atomic(using=self.using), self.connection.cursor() as cursor:
                for row in rows:
                    cursor.execute(self.statements["enqueue_one_plain"], _one(params, row))
                    if cursor.rowcount == 1:
                        inserted.append((cursor.lastrowid, row[2]))
            return inserted
        if len(rows) == 1:
            return self.fetchall("enqueue_one", _one(params, rows[0]))
        return self.fetchall("enqueue", {**params, "rows": json.dumps(rows)})

    # -- execution --------------------------------------------------------------------

    def fetchall(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The rows of the statement ``name``; for a write whose rows it reports (one with
        a ``<name>_lock``), the rows of its locking read (see :meth:`_locked`)."""
        if f"{name}_lock" in self.statements:
            return self._locked(name, self.statements[f"{name}_lock"], params)
        return super().fetchall(name, params)

    def fetchall_selection(
        self, name: str, selection: str, params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        if f"{name}_lock" in self.statements:
            lock = self.statements[f"{name}_lock"].replace("{selection}", selection)
            return self._locked(name, lock, params)
        return super().fetchall_selection(name, selection, params)

    def _locked(self, name: str, lock: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The stand-in for UPDATE ... RETURNING, in one transaction: ``lock`` (the
        statement ``<name>_lock``, a SELECT ... FOR UPDATE) reads and locks the rows and
        what RETURNING would say of them, ``name`` writes them by id (``%(ids)s``), and
        ``<name>_read``, if there is one, reads back what the write made of them."""
        with transaction.atomic(using=self.using), self.connection.cursor() as cursor:
            cursor.execute(lock, params)
            rows = list(cursor.fetchall())
            if not rows:
                return rows
            written = {**params, "ids": json.dumps([row[0] for row in rows])}
            cursor.execute(self.statements[name], written)
            if f"{name}_read" in self.statements:
                cursor.execute(self.statements[f"{name}_read"], written)
                rows = list(cursor.fetchall())
            return rows

    # -- the worker's writes ----------------------------------------------------------

    def _claim_transaction(self, several: bool) -> AbstractContextManager[Any]:
        # Always one: the claim's pair holds its locks from the read to the write.
        return transaction.atomic(using=self.using)

    def _claim(self, params: dict[str, Any]) -> list[ClaimedRow]:
        """The claim's pair: ``claim_lock``, a locking read of the candidates with SKIP
        LOCKED, then ``claim``, the write of those it takes; between the two, which to
        take: the first ``limit`` for the free slots, then held ones for as long as each
        may be held (the rule of PostgreSQL's claim, here since MySQL's locking read
        cannot sit in the statement that numbers the rows)."""
        limit = params["limit"]
        found = self.fetchall("claim_lock", {**params, "claim_limit": limit + params["ahead"]})
        picked: list[Candidate] = []
        for n, row in enumerate(found):
            candidate = Candidate(*row)
            if n >= limit and not candidate.holdable:
                break  # the first that may not be held, and all after it, stay
            picked.append(candidate)
        if not picked:
            return []
        tokens = {job.id: secrets.token_hex(16) for job in picked}
        self.execute(
            "claim",
            {
                **params,
                "ids": json.dumps(list(tokens)),
                "picked": json.dumps({str(i): t for i, t in tokens.items()}),
                "free": json.dumps([job.id for job in picked[:limit]]),
            },
        )
        # The rows as PostgreSQL's RETURNING reads them: one attempt more, the new token,
        # whether the job is held, and how long it waited.
        return [
            ClaimedRow.decode(
                id=job.id,
                task_name=job.task_name,
                queue=job.queue,
                priority=job.priority,
                args=job.args,
                kwargs=job.kwargs,
                attempt=job.attempts + 1,
                max_attempts=job.max_attempts,
                crashes=job.crashes,
                token=tokens[job.id],
                steps=job.steps,
                held=n >= limit,
                waited=job.waited,
                trace_context=job.trace_context,
            )
            for n, job in enumerate(picked)
        ]

    # -- the dashboard and the metrics ------------------------------------------------

    def _lock_stats(self, params: dict[str, Any]) -> None:
        # A locking read of the rows the insert and the delete take, for want of SQLite's
        # one writer: a second worker compacting at the same time waits, then finds none.
        self.execute("compact_stats_lock", params)

    # -- answers the rest of jobqueue asks of a database ------------------------------

    @classmethod
    def in_transaction(cls, connection: BaseDatabaseWrapper) -> bool:
        """mysqlclient does not report it: MariaDB answers a query (one round trip per
        attempt there); MySQL has no such variable, so a raw BEGIN goes unseen on it."""
        if not getattr(connection, "mysql_is_mariadb", False):
            return False
        with connection.connection.cursor() as cursor:
            cursor.execute(cls.load()["in_transaction"])
            return bool(cursor.fetchone()[0])


def _one(params: dict[str, Any], row: Sequence[Any]) -> dict[str, Any]:
    """The parameters of ``enqueue_one`` for one ``[args, kwargs, key, concurrency key,
    rate key]`` row."""
    args, kwargs, key, concurrency_key, rate_key = row
    return {
        **params,
        "args": json.dumps(args),
        "kwargs": json.dumps(kwargs),
        "idempotency_key": key,
        "concurrency_key": concurrency_key,
        "rate_key": rate_key,
    }


def _duplicate_key(exc: IntegrityError) -> bool:
    """Whether an IntegrityError is a duplicate key on the unfinished-key index (an
    enqueue that another transaction's commit beat to it), and not any other refusal."""
    cause = exc.__cause__
    args: tuple[Any, ...] = tuple(getattr(cause, "args", ()))
    return bool(args) and args[0] == _DUPLICATE_KEY and _UNFINISHED_KEY_INDEX in str(cause)
