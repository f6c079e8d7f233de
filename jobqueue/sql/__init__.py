"""Every hand-written statement, by name, and the dialect that runs them on each database.

Each statement sits in ``<vendor>.sql`` under a ``-- name: <name>`` line; Python refers to
them by name only. How a vendor wants its parameters shaped (arrays or JSON text, the
database clock or the caller's), how many statements a vendor needs for one piece of work
(PostgreSQL's writing CTEs against SQLite's one transaction of several, and MySQL's locking
read before each write whose rows it reports, for want of UPDATE ... RETURNING), and what
the rest of jobqueue asks a database (how its workers are woken, how NOTIFY is sent,
whether a connection was left in a transaction) is its dialect's: the shared
:class:`~jobqueue.sql.base.Dialect` and one class per vendor, in :mod:`.postgresql`,
:mod:`.sqlite` and :mod:`.mysql`. Django's vendor ``mysql`` is MySQL and MariaDB alike:
``mysql.sql`` serves both.

This module is the way in: :func:`Queries` (the dialect of a database alias), :func:`load`
(a vendor's statements), :func:`dialect_class`, :func:`in_transaction` and
:func:`unsupported_vendor` (questions about any connection), ``SUPPORTED_VENDORS``, and the
hook that sets up each new connection. It is the one place that reads a connection's
vendor, with the system checks and the migrations.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from jobqueue.sql.base import ClaimedRow, Dialect, WakeUp, loads
from jobqueue.sql.mysql import MySQLDialect
from jobqueue.sql.postgresql import PostgreSQLDialect
from jobqueue.sql.sqlite import SQLiteDialect

__all__ = [
    "SUPPORTED_VENDORS",
    "ClaimedRow",
    "Dialect",
    "Queries",
    "WakeUp",
    "dialect_class",
    "in_transaction",
    "load",
    "loads",
    "unsupported_vendor",
]

# Django's vendor name -> its dialect.
DIALECTS: dict[str, type[Dialect]] = {
    dialect.vendor: dialect for dialect in (PostgreSQLDialect, MySQLDialect, SQLiteDialect)
}
SUPPORTED_VENDORS = tuple(DIALECTS)


@cache
def load(vendor: str) -> dict[str, str]:
    """Return ``{name: statement}`` for one vendor's file."""
    return DIALECTS[vendor].load()


# Named as a class: it was one, and every caller still says Queries(using).
def Queries(using: str) -> Dialect:
    """The dialect of the database alias ``using``: its vendor's named statements, with
    vendor-shaped parameters.

    Cheap to make (no query, no connection kept: the dialect looks its connection up on
    every use, as Django's connections are per thread), so callers make one where they
    need it.
    """
    dialect = dialect_class(connections[using])
    if dialect is None:
        raise NotImplementedError(
            "jobqueue supports PostgreSQL, MySQL, MariaDB and SQLite; database "
            f"{using!r} is {connections[using].vendor}."
        )
    return dialect(using, load(dialect.vendor))


def dialect_class(connection: BaseDatabaseWrapper) -> type[Dialect] | None:
    """The dialect of ``connection``'s database, None if jobqueue does not support it."""
    return DIALECTS.get(connection.vendor)


def unsupported_vendor(connection: BaseDatabaseWrapper) -> str | None:
    """``connection``'s vendor if jobqueue has no dialect for it, for an error to name;
    None if it has one."""
    return None if connection.vendor in DIALECTS else connection.vendor


def in_transaction(connection: BaseDatabaseWrapper) -> bool:
    """Whether the driver's connection under ``connection`` (of any alias, connected) is
    in a transaction, a handler's raw ``BEGIN`` or one Django knows of; False where the
    driver cannot tell, and on a database jobqueue does not support."""
    dialect = dialect_class(connection)
    return dialect is not None and dialect.in_transaction(connection)


@receiver(connection_created)
def _configure_connection(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    dialect = dialect_class(connection)
    if dialect is not None:
        dialect.configure_connection(connection)
