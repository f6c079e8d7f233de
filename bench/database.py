"""The database a bench command uses: the name guard, its server, creating it.

Every command here empties or drops what it is given, the benchmark its tables
(``bench/run.py``), the soak the whole database (``bench/soak.py``), so each first checks
that the name says the database is there to be thrown away. Then it points Django, and
every process it starts, at that database: a ``DATABASE_URL`` already in the environment
is never used.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import environ
import psycopg
from psycopg import sql

POSTGRESQL = "django.db.backends.postgresql"
MYSQL = "django.db.backends.mysql"


def checked(url: str, marker: str, why: str) -> dict[str, Any]:
    """``url`` as Django's database settings; exit, naming it, unless its name has ``marker``.

    Only the name counts, not the directory of a SQLite file: ``/tmp/bench/dev.sqlite3`` is
    somebody's database in a directory called bench.
    """
    config: dict[str, Any] = environ.Env.db_url_config(url)
    if marker not in Path(str(config["NAME"])).name:
        sys.exit(
            f"refusing to use database {config['NAME']!r}: {why}, so its name must "
            f"contain {marker!r}"
        )
    return config


def use(url: str, settings: str) -> None:
    """Point this process's Django, and the processes it starts, at ``url``."""
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = settings


def server(config: Mapping[str, Any]) -> dict[str, Any]:
    """``psycopg.connect()`` keywords for the server of ``config``, its ``postgres`` database."""
    return {
        "dbname": "postgres",
        "host": config.get("HOST") or None,
        "port": config.get("PORT") or None,
        "user": config.get("USER") or None,
        "password": config.get("PASSWORD") or None,
    }


def connect_server(config: Mapping[str, Any], wait: float = 0.0) -> psycopg.Connection[Any]:
    """An autocommit connection to the server, trying for up to ``wait`` s while it is away
    (the machine is shared: someone's test, or a soak before this one, may be restarting it)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return psycopg.connect(**server(config), autocommit=True)
        except psycopg.OperationalError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1)


def create(config: Mapping[str, Any], *, replace: bool = False, wait: float = 0.0) -> None:
    """Create the PostgreSQL or MariaDB database of ``config`` if it is missing; drop it
    first if ``replace``."""
    name = str(config["NAME"])
    if config["ENGINE"] == MYSQL:
        with connect_mysql(config) as conn, conn.cursor() as cursor:
            if replace:
                cursor.execute(f"DROP DATABASE IF EXISTS {mysql_name(name)}")
            cursor.execute(
                f"CREATE DATABASE IF NOT EXISTS {mysql_name(name)} "
                "CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
            )
        return
    with connect_server(config, wait) as conn:
        if replace:
            # FORCE: the workers of a run that was killed may still be connected.
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop(config: Mapping[str, Any]) -> None:
    """Drop the MariaDB database of ``config``: a MariaDB run leaves none behind."""
    assert config["ENGINE"] == MYSQL, config["ENGINE"]
    with connect_mysql(config) as conn, conn.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {mysql_name(str(config['NAME']))}")


def mysql_name(name: str) -> str:
    """``name`` quoted as a MariaDB identifier; a name the guard lets through has no
    backtick, and one that had would be refused here rather than quoted."""
    if "`" in name or not name:
        raise ValueError(f"bad MariaDB database name {name!r}")
    return f"`{name}`"


def mysql_server(config: Mapping[str, Any]) -> dict[str, Any]:
    """``MySQLdb.connect()`` keywords for the server of ``config``, no database selected."""
    keywords: dict[str, Any] = {
        "host": config.get("HOST") or "127.0.0.1",
        "user": config.get("USER") or "root",
        "password": config.get("PASSWORD") or "",
        "charset": "utf8mb4",
        "autocommit": True,
    }
    if config.get("PORT"):
        keywords["port"] = int(config["PORT"])
    return keywords


def connect_mysql(config: Mapping[str, Any]) -> Any:
    """An autocommit connection to the MariaDB server of ``config`` (MySQLdb, imported
    here: only a MariaDB run needs mysqlclient)."""
    import MySQLdb

    return MySQLdb.connect(**mysql_server(config))
