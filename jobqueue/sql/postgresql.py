"""PostgreSQL's dialect: ``postgresql.sql``, and what PostgreSQL does in one statement.

Its writing CTEs make one statement of what the other databases do in a transaction of
several (the claim with the worker's successes and starts, the recovery check with the
reaping of dead workers, the stats' compaction); its lists are arrays; its statements read
``now()``; NOTIFY tells the listening workers of new work; and its planner's estimates
answer what the others count.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from jobqueue.sql.base import ClaimedRow, Dialect, Recorded, WakeUp, loads, without

# psycopg's transaction status (2 and 3 in psycopg 2 and 3 alike) that is a transaction
# left open: INTRANS, INERROR. IDLE (0) and ACTIVE (1, a statement running) are not, and
# UNKNOWN (4) is a broken connection, which the executor closes as unusable.
_IN_TRANSACTION = (2, 3)


class PostgreSQLDialect(Dialect):
    """PostgreSQL's named statements of one alias."""

    vendor = "postgresql"
    flow_control = True

    @classmethod
    def _derived(cls, statements: Mapping[str, str]) -> dict[str, str]:
        # enqueue without its ON CONFLICT line (see _enqueue_statement).
        return {"enqueue_keyless": without(statements["enqueue"], "ON CONFLICT DO NOTHING")}

    @property
    def wake_up(self) -> WakeUp:
        """A LISTEN connection hears every enqueue's NOTIFY."""
        return "listen"

    # -- parameter shapes -------------------------------------------------------------

    def _list(self, values: Sequence[Any]) -> Any:
        # An array (text[] or bigint[], as the statement casts it).
        return list(values)

    def _batch(
        self,
        args: Sequence[Any],
        kwargs: Sequence[Any],
        keys: Sequence[str | None],
        flow: Sequence[tuple[str | None, str | None]],
    ) -> dict[str, str]:
        # JSON arrays, read in step by ROWS FROM, which pads a shorter one with NULLs: jobs
        # without limits send two empty arrays of limit keys.
        limited = any(ckey is not None or rkey is not None for ckey, rkey in flow)
        return {
            "args": json.dumps(args),
            "kwargs": json.dumps(kwargs),
            "keys": json.dumps(keys),
            "concurrency_keys": json.dumps([c for c, _ in flow] if limited else []),
            "rate_keys": json.dumps([r for _, r in flow] if limited else []),
        }

    def _enqueue_statement(self, keys: Sequence[str | None]) -> str:
        # A batch in which no job has a key needs no ON CONFLICT: a plain insert is cheaper
        # than a speculative one.
        if not any(key is not None for key in keys):
            return "enqueue_keyless"
        return "enqueue"

    def _enqueue_time(self, value: dt.datetime) -> Any:
        # ISO text that the statement casts, quoted faster than a datetime.
        return value.isoformat()

    # -- the worker's writes ----------------------------------------------------------

    def record_and_claim(
        self, params: dict[str, Any], *, done: bool, started: bool, claiming: bool
    ) -> Recorded:
        """``claim`` does all three parts in one statement, whatever is empty, and reads
        the next due job in it too (see :meth:`Dialect.record_and_claim`)."""
        rows = self.fetchall("claim", params)
        # One row per claimed job (one with a NULL id if none was), each carrying the ids
        # of the successes the fence matched and, on the empty row of a claim that asked
        # for jobs, the next due job; then the claim's RETURNING list.
        matched = list(rows[0][0] or []) if rows else []
        claimed = [ClaimedRow.returned(row[2:]) for row in rows if row[2] is not None]
        # The next due job when nothing was claimed; when fewer were claimed than asked
        # for, the next start a rate limit allows (None: no such wait).
        seconds = rows[0][1] if rows else None
        return matched, claimed, None if seconds is None else float(seconds)

    def rescue_check(self, params: dict[str, Any]) -> bool:
        # One statement: the check, and a writing CTE that reaps the dead workers when it
        # found nothing. That is all an idle worker's recovery pass costs.
        return self._expired_leases(params)

    # -- the dashboard and the metrics ------------------------------------------------

    def compact_stats(self, from_span: int, to_span: int, before: dt.datetime) -> None:
        # One statement (a writing CTE deletes the rows it merges).
        params = {"from_span": from_span, "to_span": to_span, "before": self.time(before)}
        self.execute("compact_stats", params)

    def _prepare_gauges(self) -> None:
        self.execute("without_jit", {})

    def _state_rows(self, value: Any) -> int:
        # The planner's estimate (no rows read), from EXPLAIN's JSON.
        return int(loads(value)[0]["Plan"]["Plan Rows"])

    # -- answers the rest of jobqueue asks of a database ------------------------------

    def estimated_rows(self, table: str) -> int | None:
        """The planner's estimate of ``table``'s rows (``None`` before it was ever
        analysed)."""
        rows = self.fetchall("estimated_rows", {"table": table})
        # -1: never vacuumed or analysed, so no estimate yet.
        return int(rows[0][0]) if rows and rows[0][0] is not None and rows[0][0] >= 0 else None

    def refresh_statistics(self, added: int) -> bool:
        """``ANALYZE`` the job table if its statistics believe fewer pending jobs than the
        ``added`` just committed; whether it did.

        Run outside the enqueue's transaction: ``ANALYZE`` holds a lock that another
        ``ANALYZE`` or a vacuum of the table waits for until the transaction ends.
        """
        [(plan,)] = self.fetchall("pending_estimate", {})
        plan = loads(plan)
        if plan[0]["Plan"]["Plan Rows"] >= added:
            return False
        self.execute("analyze_jobs", {})
        return True

    def notify(self, channel: str, payloads: Sequence[str]) -> None:
        """``pg_notify`` each payload: delivered at commit, so a transaction rolled back
        wakes nobody."""
        if payloads:
            self.fetchall("notify_queues", {"channel": channel, "queues": self.names(payloads)})

    @classmethod
    def in_transaction(cls, connection: BaseDatabaseWrapper) -> bool:
        """psycopg 3 and psycopg2 both report the transaction status."""
        info = getattr(connection.connection, "info", None)
        status = getattr(info, "transaction_status", None)
        return status is not None and int(status) in _IN_TRANSACTION
