"""Load the named statements of ``<vendor>.sql`` and run them on a Django connection.

Each statement sits in its file under a ``-- name: <name>`` line, except PostgreSQL's
``enqueue_keyless``: ``enqueue`` without its ON CONFLICT line, and MySQL's
``enqueue_one_plain``, ``enqueue_one`` without its RETURNING line, derived here so that
the two never drift apart. Python refers to them by name only; how a vendor wants its
parameters shaped (arrays or JSON text, the database clock or the caller's, a JSON path or
a key), and how many statements a vendor needs for one piece of work (PostgreSQL's writing
CTEs against SQLite's one transaction of several, and MySQL's locking read before each
write whose rows it reports, for want of UPDATE ... RETURNING), is decided here and in the
``.sql`` files, nowhere else: the store and the operator's side read the same for every
database. Django's vendor ``mysql`` is MySQL and MariaDB alike: ``mysql.sql`` serves both.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from functools import cache
from pathlib import Path
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.db.backends.sqlite3.creation import DatabaseCreation as SQLiteCreation
from django.dispatch import receiver
from django.utils import timezone

SUPPORTED_VENDORS = ("postgresql", "mysql", "sqlite")
# The MySQL error of a duplicate key (ER_DUP_ENTRY), and the index an enqueue may hit.
_MYSQL_DUPLICATE_KEY = 1062
_UNFINISHED_KEY_INDEX = "jobqueue_job_unfinished_key"
# How many times an enqueue on MySQL runs again after another transaction's commit of the
# same key beat it to the unique index (each run sees what was committed before it).
_MYSQL_ENQUEUE_RUNS = 5
_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@cache
def load(vendor: str) -> dict[str, str]:
    """Return ``{name: statement}`` for one vendor's file."""
    text = (Path(__file__).parent / f"{vendor}.sql").read_text()
    parts = _NAME.split(text)
    statements = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        statements[name] = "\n".join(lines).strip().rstrip(";")
    if vendor == "postgresql":
        statements["enqueue_keyless"] = _without(statements["enqueue"], "ON CONFLICT DO NOTHING")
    if vendor == "mysql":
        # MySQL's enqueue (MariaDB's takes RETURNING): the id comes from the driver.
        statements["enqueue_one_plain"] = _without(
            statements["enqueue_one"], "RETURNING id, idempotency_key"
        )
    return statements


def _without(statement: str, clause: str) -> str:
    """``statement`` with one line that is exactly ``clause`` taken out."""
    lines = statement.splitlines()
    lines.remove(clause)  # a ValueError if the statement no longer has it
    return "\n".join(lines)


class Queries:
    """The named statements of one database alias, with vendor-shaped parameters."""

    def __init__(self, using: str) -> None:
        self.using = using
        self.vendor = connections[using].vendor
        if self.vendor not in SUPPORTED_VENDORS:
            raise NotImplementedError(
                "jobqueue supports PostgreSQL, MySQL, MariaDB and SQLite; database "
                f"{using!r} is {self.vendor}."
            )
        self.statements = load(self.vendor)
        self.is_postgresql = self.vendor == "postgresql"
        self.is_mysql = self.vendor == "mysql"
        # Whose clock the statements read: the database's (now(), UTC_TIMESTAMP(6)), or on
        # SQLite, which serves one host, the caller's.
        self.database_clock = self.vendor != "sqlite"

    @property
    def connection(self) -> BaseDatabaseWrapper:
        # Django's connections are per thread: look it up on every use, never keep one.
        return connections[self.using]

    @property
    def insert_returning(self) -> bool:
        """Whether an INSERT may report its rows with RETURNING: on MySQL's vendor, MariaDB
        (10.5+) only; MySQL 8 has none."""
        if not self.is_mysql:
            return True
        return bool(self.connection.mysql_is_mariadb)  # type: ignore[attr-defined]

    # -- parameter shapes -------------------------------------------------------------

    def names(self, values: Sequence[str]) -> Any:
        """A list parameter: a text array on PostgreSQL, JSON text for json_each on SQLite
        and for JSON_TABLE on MySQL."""
        return self._list(values)

    def ids(self, values: Sequence[int]) -> Any:
        """A list of ids: a bigint array on PostgreSQL, JSON text for json_each on SQLite."""
        return self._list(values)

    def _list(self, values: Sequence[Any]) -> Any:
        return list(values) if self.is_postgresql else json.dumps(list(values))

    def _jobs(
        self, args: Sequence[Any], kwargs: Sequence[Any], keys: Sequence[str | None]
    ) -> dict[str, str]:
        """The per-job values of the ``enqueue`` batch, one entry per job in each sequence.

        PostgreSQL reads three JSON arrays in step (ROWS FROM); SQLite and MySQL, which have
        no such zip, one JSON array of ``[args, kwargs, key]`` triples.
        """
        if self.is_postgresql:
            return {
                "args": json.dumps(args),
                "kwargs": json.dumps(kwargs),
                "keys": json.dumps(keys),
            }
        return {"rows": json.dumps(list(zip(args, kwargs, keys, strict=True)))}

    def _enqueue_statement(self, keys: Sequence[str | None]) -> str:
        """The name of the statement that inserts a batch of jobs with these keys.

        On PostgreSQL a batch in which no job has a key needs no ON CONFLICT: a plain
        insert is cheaper than a speculative one. SQLite's insert costs the same either way.
        """
        if self.is_postgresql and not any(key is not None for key in keys):
            return "enqueue_keyless"
        return "enqueue"

    def step_key(self, name: str) -> dict[str, str]:
        """Where ``save_step`` writes the step ``name`` in ``steps``: PostgreSQL's
        ``jsonb_set`` takes the key itself, SQLite's ``json_set`` a JSON path to it (step
        names are validated by the context, so quoting the key is enough)."""
        return {"name": name, "path": '$."' + name + '"'}

    def time(self, value: dt.datetime) -> Any:
        return self.connection.ops.adapt_datetimefield_value(value)

    def clock(self, **offsets: float) -> dict[str, Any]:
        """Times for SQLite statements, from this host's clock: ``now`` and ``now + offset``.

        PostgreSQL and MySQL statements use the database's clock and ignore these.
        """
        if self.database_clock:
            return {}
        now = timezone.now()
        params = {"now": self.time(now)}
        for name, seconds in offsets.items():
            params[name] = self.time(now + dt.timedelta(seconds=seconds))
        return params

    # -- the enqueue ------------------------------------------------------------------

    def insert_jobs(
        self,
        shared: Mapping[str, Any],
        *,
        run_at: dt.datetime,
        now: dt.datetime,
        rows: tuple[Sequence[Any], Sequence[Any], Sequence[str | None]],
        trace_context: str | None = None,
    ) -> list[tuple[int, str | None]]:
        """Insert one pending job per entry of ``rows`` (args, kwargs and keys, in step).

        ``shared`` holds the values every job of the batch has (task_name, queue, ...,
        and the NOTIFY channel); ``trace_context`` is one more, the JSON text of the
        enqueue span's carrier (:mod:`jobqueue.tracing`), or None for NULL. Returns
        ``(id, idempotency_key)`` for each row written, in the order of ``rows``: a row
        skipped for its key is missing.
        """
        args, kwargs, keys = rows
        params = {
            **shared,
            "run_at": self._enqueue_time(run_at),
            "now": self._enqueue_time(now),
            "trace_context": trace_context,
        }
        if self.is_mysql:
            return self._insert_jobs_mysql(params, args, kwargs, keys)
        if len(args) == 1:
            params.update(
                args=json.dumps(args[0]), kwargs=json.dumps(kwargs[0]), idempotency_key=keys[0]
            )
            return self.fetchall("enqueue_one", params)
        params.update(self._jobs(args, kwargs, keys))
        inserted = self.fetchall(self._enqueue_statement(keys), params)
        # Ids ascend in insertion order, and RETURNING promises no order: sort by id (ids
        # are unique, so the key never decides).
        inserted.sort()
        return inserted

    def _insert_jobs_mysql(
        self,
        params: dict[str, Any],
        args: Sequence[Any],
        kwargs: Sequence[Any],
        keys: Sequence[str | None],
    ) -> list[tuple[int, str | None]]:
        """MySQL's enqueue: ``NOT EXISTS`` on the unique index leaves out a key an unfinished
        job holds, and a duplicate key on that index (another transaction committed the key
        after this statement read) runs the insert again, in a savepoint, until it sees
        that job. A batch's later jobs with a key an earlier one has are left out here, as
        ON CONFLICT DO NOTHING leaves them out on the other databases.

        MariaDB inserts a batch in one statement and reports the rows with RETURNING. MySQL
        has no INSERT ... RETURNING, and a multi-row insert's ids need not be consecutive
        there, so it inserts one row per statement (``enqueue_one_plain``) and reads each
        id from the driver: slower, and tested only by making MariaDB take the same path.
        """
        kept = []
        seen: set[str] = set()
        for row in zip(args, kwargs, keys, strict=True):
            key = row[2]
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
                    inserted = [(int(i), key) for i, key in self._mysql_insert(kept, params)]
            except IntegrityError as exc:
                if not keyed or run == _MYSQL_ENQUEUE_RUNS or not _duplicate_key(exc):
                    raise
                run += 1
                continue
            inserted.sort()
            return inserted

    def _mysql_insert(self, rows: list[Any], params: dict[str, Any]) -> list[tuple[Any, ...]]:
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

    def _enqueue_time(self, value: dt.datetime) -> Any:
        # PostgreSQL: ISO text that the statement casts, quoted faster than a datetime;
        # elsewhere the stored format (on MySQL, naive UTC).
        return value.isoformat() if self.is_postgresql else self.time(value)

    # -- execution --------------------------------------------------------------------

    def execute(self, name: str, params: dict[str, Any]) -> int:
        with self.connection.cursor() as cursor:
            cursor.execute(self.statements[name], params)
            return cursor.rowcount

    def fetchall(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The rows of the statement ``name``; on MySQL, for a write whose rows it reports
        (one with a ``<name>_lock``), the rows of its locking read (see :meth:`_locked`)."""
        if f"{name}_lock" in self.statements:
            return self._locked(name, self.statements[f"{name}_lock"], params)
        with self.connection.cursor() as cursor:
            cursor.execute(self.statements[name], params)
            return list(cursor.fetchall())

    def _locked(self, name: str, lock: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """MySQL's stand-in for UPDATE ... RETURNING, in one transaction: ``lock`` (the
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

    def record_and_claim(
        self, params: dict[str, Any], *, done: bool, started: bool, claiming: bool
    ) -> tuple[list[int], list[tuple[Any, ...]], float | None]:
        """Record successes and held jobs' starts, and claim, with the parameters of the
        ``claim`` statement; the ids of the successes the fence matched, the claimed
        jobs' rows as the claim returns them, and, when it claimed nothing, the seconds
        until the next job of its selection is due (as ``next_due``: None if none is
        pending, or if it claimed something).

        ``done``, ``started`` and ``claiming`` say which parts have anything to do. On
        PostgreSQL ``claim`` does all three in one statement, whatever is empty, and reads
        the next due job in it too. SQLite has no writing CTEs, so there it is one
        transaction of up to three statements, each skipped when it has nothing to do (and
        no transaction around just one), and a claim that found nothing is followed by
        ``next_due``, as the worker's look did before it was folded into the claim.
        """
        if self.is_mysql:
            return self._record_and_claim_mysql(
                params, done=done, started=started, claiming=claiming
            )
        if self.is_postgresql:
            rows = self.fetchall("claim", params)
            # One row per claimed job (one with a NULL id if none was), each carrying the
            # ids of the successes the fence matched and, on the empty row of a claim that
            # asked for jobs, the next due job.
            matched = list(rows[0][0] or []) if rows else []
            claimed = [row[2:] for row in rows if row[2] is not None]
            seconds = rows[0][1] if rows and not claimed else None
            return matched, claimed, None if seconds is None else float(seconds)
        several = started + done + claiming > 1
        with transaction.atomic(using=self.using) if several else nullcontext():
            if started:
                self.execute("record_started", params)
            matched = [row[0] for row in self.fetchall("succeed_many", params)] if done else []
            claimed = self.fetchall("claim", params) if claiming else []
            seconds = None
            if claiming and not claimed:
                [(seconds,)] = self.fetchall("next_due", params)
        return matched, claimed, None if seconds is None else float(seconds)

    def _record_and_claim_mysql(
        self, params: dict[str, Any], *, done: bool, started: bool, claiming: bool
    ) -> tuple[list[int], list[tuple[Any, ...]], float | None]:
        """MySQL's record_and_claim: SQLite's transaction of several statements, with the
        claim a pair (claim_lock, a locking read of the candidates with SKIP LOCKED, then
        claim, the write of those it takes); here, between the two, which to take: the
        first ``limit`` for the free slots, then held ones for as long as each may be held
        (the rule of PostgreSQL's claim, in Python since MySQL's locking read cannot sit in
        the statement that numbers the rows)."""
        with transaction.atomic(using=self.using):
            if started:
                self.execute("record_started", params)
            matched = [row[0] for row in self.fetchall("succeed_many", params)] if done else []
            claimed: list[tuple[Any, ...]] = []
            seconds = None
            if claiming:
                limit = params["limit"]
                candidates = self.fetchall(
                    "claim_lock", {**params, "claim_limit": limit + params["ahead"]}
                )
                picked = []
                for n, row in enumerate(candidates):
                    if n >= limit and not row[-1]:
                        break  # the first that may not be held, and all after it, stay
                    picked.append(row)
                if picked:
                    tokens = {row[0]: secrets.token_hex(16) for row in picked}
                    self.execute(
                        "claim",
                        {
                            **params,
                            "ids": json.dumps(list(tokens)),
                            "picked": json.dumps({str(i): t for i, t in tokens.items()}),
                            "free": json.dumps([row[0] for row in picked[:limit]]),
                        },
                    )
                    # The rows as PostgreSQL's RETURNING reads them: one attempt more, the
                    # new token, whether the job is held, and how long it waited.
                    claimed = [
                        (
                            *row[:6],  # id, task_name, queue, priority, args, kwargs
                            row[6] + 1,  # attempts
                            row[7],  # max_attempts
                            row[8],  # crashes
                            tokens[row[0]],
                            row[9],  # steps
                            n >= limit,  # held
                            float(row[10]),  # waited
                            row[11],  # trace_context
                        )
                        for n, row in enumerate(picked)
                    ]
                else:
                    [(seconds,)] = self.fetchall("next_due", params)
        return matched, claimed, None if seconds is None else float(seconds)

    def rescue_check(self, params: dict[str, Any]) -> bool:
        """Whether any running job's lease has expired, with the parameters of
        ``reap_workers``; when none has, the dead workers' rows are deleted too, as
        ``reap_workers`` does. On PostgreSQL that is one statement (a writing CTE), which is
        all an idle worker's recovery pass costs; SQLite has none, so there the check is
        followed by ``reap_workers`` when it found nothing."""
        rows = self.fetchall("rescue_check", params)
        found = bool(rows[0][0])
        if not found and not self.is_postgresql:  # SQLite and MySQL
            self.execute("reap_workers", params)
        return found

    def fetchall_selection(
        self, name: str, selection: str, params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run an operator statement with its ``{selection}`` replaced by the subquery
        ``selection`` (``operator_ids``, or a Django filter compiled to SQL)."""
        if f"{name}_lock" in self.statements:
            lock = self.statements[f"{name}_lock"].replace("{selection}", selection)
            return self._locked(name, lock, params)
        with self.connection.cursor() as cursor:
            cursor.execute(self.statements[name].replace("{selection}", selection), params)
            return list(cursor.fetchall())

    # -- answers that only one vendor gives ------------------------------------------

    def database_now(self) -> dt.datetime:
        """The clock the statements compare times with: PostgreSQL's ``now()`` (inside a
        transaction, its start), MySQL's ``UTC_TIMESTAMP(6)``, or this host's clock on
        SQLite, whose statements take the caller's."""
        if not self.database_clock:
            return timezone.now()
        [(value,)] = self.fetchall("database_now", {})
        if timezone.is_naive(value):  # MySQL's, in UTC
            value = value.replace(tzinfo=dt.UTC)
        return value

    def database_file(self) -> str | None:
        """The file a SQLite database lives in, which other processes can open too;
        ``None`` on PostgreSQL and MySQL, and for an in-memory SQLite database, which no
        other process can reach."""
        if self.vendor != "sqlite":
            return None
        name = self.connection.settings_dict["NAME"]
        if not name or SQLiteCreation.is_in_memory_db(name):
            return None
        return str(name)

    def estimated_rows(self, table: str) -> int | None:
        """The planner's estimate of ``table``'s rows on PostgreSQL (``None`` before it was
        ever analysed); always ``None`` on SQLite, which keeps no such estimate, and on
        MySQL, whose estimate (information_schema's TABLE_ROWS) can be off by half."""
        if not self.is_postgresql:
            return None
        rows = self.fetchall("estimated_rows", {"table": table})
        # -1: never vacuumed or analysed, so no estimate yet.
        return int(rows[0][0]) if rows and rows[0][0] is not None and rows[0][0] >= 0 else None

    def refresh_statistics(self, added: int) -> bool:
        """On PostgreSQL, ``ANALYZE`` the job table if its statistics believe fewer pending
        jobs than the ``added`` just committed; whether it did. Never on SQLite, which is
        left as it was: its planner keeps no statistics unless it is asked to. Nor on
        MySQL, whose InnoDB recalculates a table's statistics by itself once a tenth of it
        has changed.

        Run outside the enqueue's transaction: ``ANALYZE`` holds a lock that another
        ``ANALYZE`` or a vacuum of the table waits for until the transaction ends.
        """
        if not self.is_postgresql:
            return False
        [(plan,)] = self.fetchall("pending_estimate", {})
        plan = loads(plan)
        if plan[0]["Plan"]["Plan Rows"] >= added:
            return False
        self.execute("analyze_jobs", {})
        return True


def _one(params: dict[str, Any], row: Sequence[Any]) -> dict[str, Any]:
    """The parameters of MySQL's ``enqueue_one`` for one ``[args, kwargs, key]`` row."""
    args, kwargs, key = row
    return {
        **params,
        "args": json.dumps(args),
        "kwargs": json.dumps(kwargs),
        "idempotency_key": key,
    }


def _duplicate_key(exc: IntegrityError) -> bool:
    """Whether a MySQL IntegrityError is a duplicate key on the unfinished-key index (an
    enqueue that another transaction's commit beat to it), and not any other refusal."""
    cause = exc.__cause__
    args: tuple[Any, ...] = tuple(getattr(cause, "args", ()))
    return bool(args) and args[0] == _MYSQL_DUPLICATE_KEY and _UNFINISHED_KEY_INDEX in str(cause)


def loads(value: Any) -> Any:
    """Decode a JSON column read by raw SQL (Django hands jsonb over as text)."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


@receiver(connection_created)
def _configure_sqlite(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    # WAL lets workers read while another process writes; it is a property of the file, so
    # setting it on every new connection is cheap and idempotent. In-memory databases
    # answer "memory" and stay as they are.
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
