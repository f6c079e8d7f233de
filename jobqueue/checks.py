"""System checks: a bad ``JOBQUEUE`` setting or an unsupported database fails at start-up."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from jobqueue import conf
from jobqueue.sql import SUPPORTED_VENDORS
from jobqueue.tasks import base as tasks
from jobqueue.tasks.limits import Concurrency, RateLimit


@checks.register()
def check_settings(**kwargs: Any) -> list[checks.CheckMessage]:
    try:
        settings = conf.get()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="jobqueue.E001")]
    if settings.catch_all_pool() is None:
        return [
            checks.Warning(
                'No pool in JOBQUEUE["POOLS"] has queues "*": a queue that no pool lists and '
                'JOBQUEUE["ROUTING"] does not route has no worker, and its jobs wait forever.',
                hint='Give one pool "queues": "*" to catch every other queue.',
                id="jobqueue.W002",
            ),
            *_queues_without_pool(settings),
        ]
    return []


def _queues_without_pool(settings: conf.Settings) -> list[checks.CheckMessage]:
    """Registered tasks whose queue no pool serves (only possible without a catch-all)."""
    try:
        tasks.discover()
    except Exception:  # an import error surfaces where the module is used
        return []
    orphans: dict[str, list[str]] = {}
    for name in tasks.registered_names():
        task = tasks.get(name)
        queue = getattr(getattr(task, "options", None), "queue", None)
        if queue and settings.pool_for(queue) is None:
            orphans.setdefault(queue, []).append(name)
    return [
        checks.Error(
            f'Queue "{queue}" of task(s) {", ".join(names)} is served by no pool in '
            'JOBQUEUE["POOLS"] and not routed by JOBQUEUE["ROUTING"]: its jobs would never run.',
            hint=f'List "{queue}" in a pool\'s queues, route it in ROUTING, or add a catch-all '
            'pool ("queues": "*").',
            id="jobqueue.E003",
        )
        for queue, names in sorted(orphans.items())
    ]


@checks.register()
def check_schedules(**kwargs: Any) -> list[checks.CheckMessage]:
    """Every mistake in ``JOBQUEUE["SCHEDULES"]``, one error each, naming the schedule and
    the key: a worker would refuse to start with any of them."""
    from jobqueue.schedules import spec

    try:
        settings = conf.get()
    except ImproperlyConfigured:
        return []  # check_settings reports it
    messages: list[checks.CheckMessage] = []
    if settings.schedules and not any(pool.resident for pool in settings.pools.values()):
        # The workers evaluate the schedules; an on-demand pool's workers run only while
        # jobs are due, and a tick is not a due job until a worker has evaluated it.
        messages.append(
            checks.Warning(
                'JOBQUEUE["SCHEDULES"] is set but every pool in JOBQUEUE["POOLS"] is '
                'on-demand ("resident": False): under a runjobs supervisor no worker runs '
                "between jobs to evaluate the schedules, so their ticks may never fire.",
                hint='Keep one pool resident (the default), or run "runjobs --pool NAME".',
                id="jobqueue.W004",
            )
        )
    return messages + [
        checks.Error(
            str(problem),
            hint="Install it with: pip install django-jobqueue[cron]"
            if problem.key == "cron" and "django-jobqueue[cron]" in problem.message
            else None,
            id="jobqueue.E004",
        )
        for problem in spec.problems(settings)
    ]


@checks.register()
def check_limit_groups(**kwargs: Any) -> list[checks.CheckMessage]:
    """jobqueue.E007 for a group that two tasks declare with different limits.

    Every job stores the limit it was enqueued with, and the claim holds each job to its
    own limit against the running jobs of the whole group: with two limits in one group,
    how many run at once (or how fast they start) would depend on which task's job is next.
    """
    try:
        tasks.discover()
    except Exception:  # an import error surfaces where the module is used
        return []
    # (kind, group) -> declaration -> task names; a declaration is what a job stores.
    declared: dict[tuple[str, str], dict[str, list[str]]] = {}
    for name in tasks.registered_names():
        options = getattr(tasks.get(name), "options", None)
        for limit in (getattr(options, "concurrency", None), getattr(options, "rate_limit", None)):
            if not isinstance(limit, Concurrency | RateLimit):
                continue
            group = limit.group if limit.group is not None else name
            declared.setdefault((type(limit).__name__, group), {}).setdefault(
                _declaration(limit), []
            ).append(name)
    return [
        checks.Error(
            f'{kind} group "{group}" is declared with {len(by_limit)} different limits: '
            + "; ".join(f"{shown} by {', '.join(names)}" for shown, names in by_limit.items())
            + ". Its jobs share one count, so each would be held to its own task's limit.",
            hint=f"Give every task of the group the same {kind}, or give them different groups.",
            id="jobqueue.E007",
        )
        for (kind, group), by_limit in sorted(declared.items())
        if len(by_limit) > 1
    ]


def _declaration(limit: Concurrency | RateLimit) -> str:
    if isinstance(limit, Concurrency):
        return f"limit={limit.limit}"
    return f"limit={limit.limit}, per={float(limit.per)!r}, burst={limit.burst}"


@checks.register()
def check_database(**kwargs: Any) -> list[checks.CheckMessage]:
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor not in SUPPORTED_VENDORS:
        return [
            checks.Error(
                "jobqueue needs PostgreSQL, MySQL, MariaDB or SQLite; the default database is "
                f"{connection.vendor}.",
                id="jobqueue.E002",
            )
        ]
    if connection.vendor == "mysql":
        return _mysql_version(connection)
    if connection.vendor == "sqlite":
        mode = connection.settings_dict.get("OPTIONS", {}).get("transaction_mode")
        if (mode or "").upper() != "IMMEDIATE":
            return [
                checks.Warning(
                    'SQLite should run with DATABASES["default"]["OPTIONS"]["transaction_mode"] '
                    '= "IMMEDIATE", so that a transaction that enqueues jobs waits for the '
                    'write lock instead of failing with "database is locked" while a worker '
                    "writes.",
                    hint='Add "transaction_mode": "IMMEDIATE" and "timeout": 20 to OPTIONS.',
                    id="jobqueue.W001",
                )
            ]
    return []


# The oldest servers jobqueue's MySQL statements run on: SKIP LOCKED and JSON_TABLE need
# MySQL 8.0; MariaDB has JSON_TABLE from 10.6 (and INSERT ... RETURNING from 10.5).
MYSQL_OLDEST = (8, 0)
MARIADB_OLDEST = (10, 6)


def _mysql_version(connection: BaseDatabaseWrapper) -> list[checks.CheckMessage]:
    """jobqueue.E005 for a MySQL older than 8.0 or a MariaDB older than 10.6, naming it.
    Asking the version connects: a server that cannot be reached is left to the first
    query to report, as for any database."""
    try:
        is_mariadb = connection.mysql_is_mariadb  # type: ignore[attr-defined]
        version = tuple(connection.mysql_version)  # type: ignore[attr-defined]
    except Exception:
        return []
    name, oldest = ("MariaDB", MARIADB_OLDEST) if is_mariadb else ("MySQL", MYSQL_OLDEST)
    if version[:2] >= oldest:
        return []
    shown = ".".join(str(part) for part in version)
    return [
        checks.Error(
            f"jobqueue needs {name} {oldest[0]}.{oldest[1]} or later; the default database "
            f"is {name} {shown}.",
            hint="Upgrade the server, or use PostgreSQL or SQLite.",
            id="jobqueue.E005",
        )
    ]


@checks.register()
def check_metrics(**kwargs: Any) -> list[checks.CheckMessage]:
    """``JOBQUEUE["METRICS_PORT"]`` set without prometheus-client installed."""
    from jobqueue import metrics

    try:
        settings = conf.get()
    except ImproperlyConfigured:
        return []  # check_settings reports it (a METRICS_PORT that is no port among them)
    if settings.metrics_port is None or metrics.available():
        return []
    return [
        checks.Error(
            f'JOBQUEUE["METRICS_PORT"] is {settings.metrics_port}, but prometheus-client is '
            "not installed: runjobs could not serve /metrics.",
            hint="Install it with: pip install django-jobqueue[metrics]",
            id="jobqueue.E006",
        )
    ]
