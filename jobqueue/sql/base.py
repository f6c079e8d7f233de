"""What every database's dialect shares, and the hooks each vendor's class overrides.

A dialect (:class:`Dialect`) is one vendor's named statements bound to one database alias:
it runs them, shapes their parameters, and answers what the rest of jobqueue asks of a
database (how its workers are woken, how a notification is sent, whether a driver's
connection was left in a transaction). What is written here serves a database with neither
writing CTEs nor NOTIFY: a piece of work is a transaction of several statements, lists
travel as JSON text, the statements read the database's clock, and nothing is notified.
:mod:`jobqueue.sql.postgresql`, :mod:`jobqueue.sql.sqlite` and :mod:`jobqueue.sql.mysql`
each override what their database does otherwise; nothing here asks which vendor it serves.

Also here: :func:`parse`, the reader of a ``.sql`` file; :class:`ClaimedRow`, one job a
claim took, as every dialect's claim returns it; and :func:`loads`, for JSON columns.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)

# How a worker hears that work may be waiting: a LISTEN connection (PostgreSQL), a watch
# on the database file for other connections' commits (SQLite), or neither, so it polls.
WakeUp = Literal["listen", "watch", "poll"]


def parse(text: str) -> dict[str, str]:
    """``{name: statement}`` for the text of a ``.sql`` file: each statement under its
    ``-- name:`` line, comment lines and the final semicolon left out."""
    parts = _NAME.split(text)
    statements = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        statements[name] = "\n".join(lines).strip().rstrip(";")
    return statements


def without(statement: str, clause: str) -> str:
    """``statement`` with one line that is exactly ``clause`` taken out."""
    lines = statement.splitlines()
    lines.remove(clause)  # a ValueError if the statement no longer has it
    return "\n".join(lines)


def loads(value: Any) -> Any:
    """Decode a JSON column read by raw SQL (Django hands jsonb over as text)."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


class ClaimedRow(NamedTuple):
    """One job a claim took: what a worker needs to run its attempt, decoded.

    Every dialect's ``record_and_claim`` returns these, whatever its statements' rows look
    like; :class:`jobqueue.store.Store` reads them by name.
    """

    id: int
    task_name: str
    queue: str
    priority: int
    args: list[Any]
    kwargs: dict[str, Any]
    attempt: int  # the job's attempts, this one counted
    max_attempts: int
    crashes: int
    token: str
    steps: dict[str, Any]
    held: bool  # claimed ahead of the free slots, its start not yet recorded
    waited: float  # seconds from due (run_at) to the claim, never below 0
    trace_context: dict[str, str] | None

    @classmethod
    def decode(
        cls,
        *,
        id: int,
        task_name: str,
        queue: str,
        priority: int,
        args: Any,
        kwargs: Any,
        attempt: int,
        max_attempts: int,
        crashes: int,
        token: str,
        steps: Any,
        held: Any,
        waited: Any,
        trace_context: Any,
    ) -> ClaimedRow:
        """A row from the values a statement returned: JSON columns decoded (text or
        already decoded), ``held`` a bool (SQLite and MySQL answer 0 or 1), ``waited`` a
        float (MySQL answers a Decimal, a clock behind run_at a negative number)."""
        return cls(
            id=id,
            task_name=task_name,
            queue=queue,
            priority=priority,
            args=loads(args),
            kwargs=loads(kwargs),
            attempt=attempt,
            max_attempts=max_attempts,
            crashes=crashes,
            token=token,
            steps=loads(steps) or {},
            held=bool(held),
            waited=max(0.0, float(waited or 0.0)),
            trace_context=loads(trace_context),
        )

    @classmethod
    def returned(cls, values: Sequence[Any]) -> ClaimedRow:
        """A row of the claim's RETURNING list, which PostgreSQL's and SQLite's ``claim``
        write in this order: ``id, task_name, queue, priority, args, kwargs, attempts,
        max_attempts, crashes, token, steps, held, waited, trace_context``."""
        (
            id,
            task_name,
            queue,
            priority,
            args,
            kwargs,
            attempts,
            max_attempts,
            crashes,
            token,
            steps,
            held,
            waited,
            trace_context,
        ) = values
        return cls.decode(
            id=id,
            task_name=task_name,
            queue=queue,
            priority=priority,
            args=args,
            kwargs=kwargs,
            attempt=attempts,
            max_attempts=max_attempts,
            crashes=crashes,
            token=token,
            steps=steps,
            held=held,
            waited=waited,
            trace_context=trace_context,
        )


# What record_and_claim returns: the ids of the successes the fence matched, the jobs
# claimed, and, when it claimed nothing, the seconds until the next job is due.
Recorded = tuple[list[int], list[ClaimedRow], float | None]


# The limits of jobs enqueued without any (see Dialect.insert_jobs).
_NO_LIMITS = {"concurrency_limit": None, "rate_limit": None, "rate_per": None, "rate_burst": None}


class Dialect:
    """The named statements of one database alias, with vendor-shaped parameters.

    A subclass sets ``vendor`` (Django's name for the database, and the stem of its
    ``.sql`` file) and overrides what its database does otherwise.
    """

    vendor: ClassVar[str]
    # Whether Django's DDL leaves out an index's or a unique constraint's condition on this
    # database, and jobqueue's migrations build those themselves (so Django's warnings that
    # they would be ignored, models.W036 and models.W037, are not true of jobqueue's).
    conditions_built_by_migration: ClassVar[bool] = False
    # Whether this database's claim enforces flow control (Concurrency, RateLimit): an
    # enqueue of jobs with limits is refused where it does not, never run unlimited.
    flow_control: ClassVar[bool] = False

    def __init__(self, using: str, statements: Mapping[str, str] | None = None) -> None:
        self.using = using
        self.statements = statements if statements is not None else self.load()

    @classmethod
    @cache
    def load(cls) -> dict[str, str]:
        """``{name: statement}`` of this vendor's file, with those derived from them."""
        statements = parse((Path(__file__).parent / f"{cls.vendor}.sql").read_text())
        statements.update(cls._derived(statements))
        return statements

    @classmethod
    def _derived(cls, statements: Mapping[str, str]) -> dict[str, str]:
        """Statements made from others of the file, so that the two never drift apart."""
        return {}

    @property
    def connection(self) -> BaseDatabaseWrapper:
        # Django's connections are per thread: look it up on every use, never keep one.
        return connections[self.using]

    # -- parameter shapes -------------------------------------------------------------

    def names(self, values: Sequence[str]) -> Any:
        """A list parameter: JSON text, for json_each on SQLite and JSON_TABLE on MySQL."""
        return self._list(values)

    def ids(self, values: Sequence[int]) -> Any:
        """A list of ids, shaped as :meth:`names` shapes names."""
        return self._list(values)

    def _list(self, values: Sequence[Any]) -> Any:
        return json.dumps(list(values))

    def step_key(self, name: str) -> dict[str, str]:
        """Where ``save_step`` writes the step ``name`` in ``steps``: PostgreSQL's
        ``jsonb_set`` takes the key itself, SQLite's ``json_set`` a JSON path to it (step
        names are validated by the context, so quoting the key is enough)."""
        return {"name": name, "path": '$."' + name + '"'}

    def time(self, value: dt.datetime) -> Any:
        return self.connection.ops.adapt_datetimefield_value(value)

    def clock(self, **offsets: float) -> dict[str, Any]:
        """Times for statements that take the caller's clock: ``now`` and ``now + offset``
        for each offset. None here: the statements read the database's clock."""
        return {}

    # -- the enqueue ------------------------------------------------------------------

    def insert_jobs(
        self,
        shared: Mapping[str, Any],
        *,
        run_at: dt.datetime,
        now: dt.datetime,
        rows: tuple[Sequence[Any], Sequence[Any], Sequence[str | None]],
        flow_keys: Sequence[tuple[str | None, str | None]] | None = None,
        trace_context: str | None = None,
    ) -> list[tuple[int, str | None]]:
        """Insert one pending job per entry of ``rows`` (args, kwargs and keys, in step).

        ``shared`` holds the values every job of the batch has (task_name, queue, ...,
        and the NOTIFY channel); ``trace_context`` is one more, the JSON text of the
        enqueue span's carrier (:mod:`jobqueue.tracing`), or None for NULL. Returns
        ``(id, idempotency_key)`` for each row written, in the order of ``rows``: a row
        skipped for its key is missing.

        ``flow_keys`` holds each row's concurrency key and rate key (:mod:`jobqueue.tasks.limits`),
        or is None when the jobs have no limit; ``shared`` then holds the limits themselves
        (``concurrency_limit``, ``rate_limit``, ``rate_per``, ``rate_burst``; left out or None for
        none).
        """
        args, kwargs, keys = rows
        params = {
            **_NO_LIMITS,
            **shared,
            "run_at": self._enqueue_time(run_at),
            "now": self._enqueue_time(now),
            "trace_context": trace_context,
        }
        flow = list(flow_keys) if flow_keys is not None else [(None, None)] * len(args)
        return self._insert_rows(params, args, kwargs, keys, flow)

    def _insert_rows(
        self,
        params: dict[str, Any],
        args: Sequence[Any],
        kwargs: Sequence[Any],
        keys: Sequence[str | None],
        flow: Sequence[tuple[str | None, str | None]],
    ) -> list[tuple[int, str | None]]:
        """:meth:`insert_jobs` with the shared parameters made: one statement, with
        RETURNING, and ON CONFLICT DO NOTHING for the keys. ``flow`` has each row's
        concurrency key and rate key (both None for a job without limits)."""
        if len(args) == 1:
            params.update(
                args=json.dumps(args[0]),
                kwargs=json.dumps(kwargs[0]),
                idempotency_key=keys[0],
                concurrency_key=flow[0][0],
                rate_key=flow[0][1],
            )
            return self.fetchall("enqueue_one", params)
        params.update(self._batch(args, kwargs, keys, flow))
        inserted = self.fetchall(self._enqueue_statement(keys), params)
        # Ids ascend in insertion order, and RETURNING promises no order: sort by id (ids
        # are unique, so the key never decides).
        inserted.sort()
        return inserted

    def _batch(
        self,
        args: Sequence[Any],
        kwargs: Sequence[Any],
        keys: Sequence[str | None],
        flow: Sequence[tuple[str | None, str | None]],
    ) -> dict[str, str]:
        """The per-job values of the ``enqueue`` batch, one entry per job in each sequence:
        one JSON array of ``[args, kwargs, key, concurrency_key, rate_key]`` rows."""
        rows = [
            [a, k, key, ckey, rkey]
            for a, k, key, (ckey, rkey) in zip(args, kwargs, keys, flow, strict=True)
        ]
        return {"rows": json.dumps(rows)}

    def _enqueue_statement(self, keys: Sequence[str | None]) -> str:
        """The name of the statement that inserts a batch of jobs with these keys."""
        return "enqueue"

    def _enqueue_time(self, value: dt.datetime) -> Any:
        """A time of the enqueue's, in the format the column stores."""
        return self.time(value)

    # -- execution --------------------------------------------------------------------

    def execute(self, name: str, params: dict[str, Any]) -> int:
        with self.connection.cursor() as cursor:
            cursor.execute(self.statements[name], params)
            return cursor.rowcount

    def fetchall(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The rows of the statement ``name``."""
        with self.connection.cursor() as cursor:
            cursor.execute(self.statements[name], params)
            return list(cursor.fetchall())

    def fetchall_selection(
        self, name: str, selection: str, params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run an operator statement with its ``{selection}`` replaced by the subquery
        ``selection`` (``operator_ids``, or a Django filter compiled to SQL)."""
        with self.connection.cursor() as cursor:
            cursor.execute(self.statements[name].replace("{selection}", selection), params)
            return list(cursor.fetchall())

    # -- the worker's writes ----------------------------------------------------------

    def record_and_claim(
        self, params: dict[str, Any], *, done: bool, started: bool, claiming: bool
    ) -> Recorded:
        """Record successes and held jobs' starts, and claim, with the parameters of the
        ``claim`` statement; the ids of the successes the fence matched, the claimed
        jobs, and, when it claimed nothing, the seconds until the next job of its
        selection is due (as ``next_due``: None if none is pending, or if it claimed
        something).

        ``done``, ``started`` and ``claiming`` say which parts have anything to do. Here,
        without writing CTEs, that is one transaction of up to three statements
        (``record_started``, ``succeed_many``, then the claim, :meth:`_claim`), each skipped
        when it has nothing to do, and a claim that found nothing is followed by
        ``next_due``, as the worker's look did before it was folded into the claim.
        """
        with self._claim_transaction(started + done + claiming > 1):
            if started:
                self.execute("record_started", params)
            matched = [row[0] for row in self.fetchall("succeed_many", params)] if done else []
            claimed = self._claim(params) if claiming else []
            seconds = None
            if claiming and not claimed:
                [(seconds,)] = self.fetchall("next_due", params)
        return matched, claimed, None if seconds is None else float(seconds)

    def _claim_transaction(self, several: bool) -> AbstractContextManager[Any]:
        """The transaction around :meth:`record_and_claim`'s statements: one when there
        are ``several``, none around just one."""
        return transaction.atomic(using=self.using) if several else nullcontext()

    def _claim(self, params: dict[str, Any]) -> list[ClaimedRow]:
        """Claim with the ``claim`` statement, whose rows are its RETURNING list."""
        return [ClaimedRow.returned(row) for row in self.fetchall("claim", params)]

    def rescue_check(self, params: dict[str, Any]) -> bool:
        """Whether any running job's lease has expired, with the parameters of
        ``reap_workers``; when none has, the dead workers' rows are deleted too, as
        ``reap_workers`` does: here the check is followed by ``reap_workers`` when it
        found nothing."""
        found = self._expired_leases(params)
        if not found:
            self.execute("reap_workers", params)
        return found

    def _expired_leases(self, params: dict[str, Any]) -> bool:
        rows = self.fetchall("rescue_check", params)
        return bool(rows[0][0])

    # -- the dashboard and the metrics ------------------------------------------------

    def compact_stats(self, from_span: int, to_span: int, before: dt.datetime) -> None:
        """Merge the dashboard's stat rows of ``from_span`` seconds older than ``before`` (a
        multiple of ``to_span``) into rows of ``to_span`` seconds: an insert and a delete
        in one transaction."""
        params = {"from_span": from_span, "to_span": to_span, "before": self.time(before)}
        with transaction.atomic(using=self.using):
            self._lock_stats(params)
            self.execute("compact_stats_insert", params)
            self.execute("compact_stats_delete", params)

    def _lock_stats(self, params: dict[str, Any]) -> None:
        """Before :meth:`compact_stats` writes: nothing to lock where one writer at a time
        holds the whole database."""

    def queue_gauges(self, cap: int) -> list[tuple[str, int, int, int, int, int, float | None]]:
        """Per queue with jobs: due, scheduled, running, failed and abandoned jobs, each
        counted up to ``cap``, and the seconds its oldest due job has been due (None: none)."""
        params: dict[str, Any] = {"cap": cap, "now": self.time(timezone.now())}
        with transaction.atomic(using=self.using):
            self._prepare_gauges()
            found = self.fetchall("queue_gauges", params)
        rows = []
        for name, due, scheduled, running, failed, abandoned, late in found:
            counts = (int(due), int(scheduled), int(running), int(failed), int(abandoned))
            rows.append((str(name), *counts, None if late is None else max(0.0, float(late))))
        return rows

    def _prepare_gauges(self) -> None:
        """Set up :meth:`queue_gauges`'s transaction before its statement; nothing here."""

    def queue_state_rows(
        self, queue: str, status: str, after: dt.datetime, before: dt.datetime
    ) -> int:
        """One queue's jobs in ``status`` with run_at in (after, before]: here an exact
        count."""
        params = {
            "queue": queue,
            "status": status,
            "after": self.time(after),
            "before": self.time(before),
        }
        [(value,)] = self.fetchall("queue_state_estimate", params)
        return self._state_rows(value)

    def _state_rows(self, value: Any) -> int:
        """The rows ``queue_state_estimate`` says there are, from its one value."""
        return int(value)

    # -- answers the rest of jobqueue asks of a database ------------------------------

    @property
    def wake_up(self) -> WakeUp:
        """How this database's workers hear of new work (see ``WakeUp``): here they poll."""
        return "poll"

    def database_now(self) -> dt.datetime:
        """The clock the statements compare times with, read from the database (its
        ``database_now`` statement); a naive answer is in UTC."""
        [(value,)] = self.fetchall("database_now", {})
        if timezone.is_naive(value):
            value = value.replace(tzinfo=dt.UTC)
        return value

    def database_file(self) -> str | None:
        """The file the database lives in, which other processes can open too; None for a
        server's database."""
        return None

    def estimated_rows(self, table: str) -> int | None:
        """The planner's estimate of ``table``'s rows; None: this database keeps none
        worth showing."""
        return None

    def refresh_statistics(self, added: int) -> bool:
        """Bring the planner's statistics up to date after ``added`` jobs were committed
        at once, if they need it; whether anything was done. Nothing here."""
        return False

    def notify(self, channel: str, payloads: Sequence[str]) -> None:
        """Send ``payloads`` on ``channel``, one notification each, to the workers that
        listen there, at commit. Nothing here: without LISTEN, nobody hears; the commit
        itself (a watched file) or the next poll brings the news instead."""

    @classmethod
    def in_transaction(cls, connection: BaseDatabaseWrapper) -> bool:
        """Whether the driver's connection under ``connection`` (connected, of this
        vendor, of any alias) is in a transaction: a handler's raw ``BEGIN`` left open,
        or one Django knows of. False here: the driver cannot tell."""
        return False

    @classmethod
    def configure_connection(cls, connection: BaseDatabaseWrapper) -> None:
        """Set up a new connection of this vendor (Django's ``connection_created``)."""
