"""What a handler may leave on its thread's database connections, and putting it right.

A slot's thread keeps its connections from job to job. A handler that returns inside an
``atomic()`` block it never left, or with autocommit turned off, would leave them so: the
attempt's outcome would be written inside the handler's transaction (and never committed),
every later job on the slot would run inside it too, and on SQLite its write lock would
shut the whole application out. So after every attempt, before its outcome is written, each
connection the thread opened is checked, and one left in a transaction is rolled back and
reset. A well-behaved handler costs a few attribute reads (on MariaDB, one query too). A
transaction the driver knows of but Django does not (a raw ``BEGIN``) is found by asking
the connection's dialect (:func:`jobqueue.sql.in_transaction`), whatever its alias.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from jobqueue.sql import in_transaction

logger = logging.getLogger("jobqueue.worker")


@dataclass(frozen=True)
class State:
    """What a connection was in before a handler ran: in a slot, nothing (``CLEAN``); under
    ``jobqueue.testing.run_jobs`` in a test, perhaps the test's own transaction."""

    depth: int = 0  # atomic blocks open
    autocommit: bool = True
    raw_open: bool = False  # a transaction Django does not know of


CLEAN = State()


def snapshot() -> dict[str, State]:
    """The state of this thread's connections, to compare with after the handler."""
    states = {}
    for conn in connections.all(initialized_only=True):
        if conn.connection is None and not conn.atomic_blocks:
            continue  # not connected: as clean as a connection the handler opens
        try:
            raw_open = conn.connection is not None and in_transaction(conn)
        except Exception:
            raw_open = False
        states[conn.alias] = State(len(conn.atomic_blocks), bool(conn.autocommit), raw_open)
    return states


def restore_connections(before: dict[str, State] | None = None) -> list[str]:
    """Roll back what a handler left open on this thread's connections since ``before``
    (a :func:`snapshot`; by default, nothing was open), and reset them.

    Returns what was found, one phrase per database, e.g. "a transaction still open on
    database 'default'"; empty when every connection was as it was.
    """
    found = []
    for conn in connections.all(initialized_only=True):
        state = (before or {}).get(conn.alias, CLEAN)
        left = _left_behind(conn, state)
        if left:
            _restore(conn, state)
            found.append(f"{left} on database {conn.alias!r}")
    return found


def _left_behind(conn: BaseDatabaseWrapper, state: State) -> str | None:
    if len(conn.atomic_blocks) > state.depth or (conn.in_atomic_block and not state.depth):
        return "a transaction still open"
    if conn.connection is None or state.depth:
        return None
    if not conn.autocommit and state.autocommit:
        return "autocommit turned off"
    try:
        raw_open = in_transaction(conn)
    except Exception:
        return None  # a broken connection: the executor closes it if it is unusable
    return "a transaction still open" if raw_open and not state.raw_open else None


def _restore(conn: BaseDatabaseWrapper, state: State) -> None:
    # First Django's own machinery: leave each atomic block the handler never left, innermost
    # first, as if an exception had gone through it. That rolls back to its savepoint, or
    # the whole transaction for the outermost, and restores autocommit, and it leaves the
    # blocks that were open before the handler (a test's) as they were.
    try:
        while len(conn.atomic_blocks) > state.depth and conn.in_atomic_block:
            conn.atomic_blocks[-1].__exit__(RuntimeError, RuntimeError("left open"), None)
    except Exception:
        logger.debug("leaving the atomic blocks of %r failed", conn.alias, exc_info=True)
    if state.depth:
        return  # inside a transaction that is not ours to end
    if conn.in_atomic_block or conn.atomic_blocks or _left_behind(conn, state):
        # Autocommit turned off, a raw BEGIN, or an exit that failed: by force.
        reset(conn)


def reset(conn: BaseDatabaseWrapper) -> None:
    """Roll back whatever ``conn`` is in, forget the atomic blocks a handler never left,
    and close it: the next statement on this thread opens a fresh connection, in
    autocommit as the settings say.

    ``conn.close()`` alone is not enough inside an atomic block: Django then marks the
    connection "closed in transaction" and keeps it, and every later statement of the
    thread fails until the block is left, which a handler that returned never does.
    """
    raw = conn.connection
    if raw is not None and not conn.closed_in_transaction:
        try:
            # The driver's own rollback (Django's refuses inside an atomic block): it ends
            # the transaction, and releases SQLite's write lock, whatever the close does.
            raw.rollback()
        except Exception:
            logger.debug("rollback of %r failed; closing it", conn.alias, exc_info=True)
    # What Django's connect() resets for a new connection, so that close() really closes.
    conn.in_atomic_block = False
    conn.savepoint_ids = []
    conn.atomic_blocks = []
    conn.needs_rollback = False
    conn.closed_in_transaction = False
    conn.savepoint_state = 0
    conn.commit_on_exit = True
    conn.run_on_commit = []  # callbacks of a transaction that never committed
    try:
        conn.close()
    except Exception:
        logger.debug("close of %r failed", conn.alias, exc_info=True)
        conn.connection = None
