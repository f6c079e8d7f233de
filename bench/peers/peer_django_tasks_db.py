"""django-tasks-db: Django's ``django.tasks`` with the database backend and its db_worker.
It keeps results: the ``ten_kb`` task returns its 10 KB, stored as the result's value."""

from __future__ import annotations

import argparse
from typing import Any

import django

django.setup()  # DJANGO_SETTINGS_MODULE=dtdb_settings, from the bench

from _common import main, paced, stamp, stop_on_sigterm, ten_kb, timed  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.tasks import task  # noqa: E402
from django_tasks_db.models import DBTaskResult  # noqa: E402


@task
def noop(n: int) -> None:
    """Do nothing."""


@task
def ten_kb_task(n: int) -> str:
    return ten_kb(n)


TASKS = {"noop": noop, "ten_kb": ten_kb_task}


@task
def stamp_task(n: int) -> None:
    stamp(n)


def setup(args: argparse.Namespace) -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    else:  # a SQLite file or a MariaDB database of its own: its tables go with its migrations
        call_command("migrate", DBTaskResult._meta.app_label, "zero", verbosity=0)
    call_command("migrate", verbosity=0)


def reset(args: argparse.Namespace) -> None:
    empty = "DELETE FROM {}" if connection.vendor == "sqlite" else "TRUNCATE {}"
    with connection.cursor() as cursor:
        cursor.execute(empty.format(DBTaskResult._meta.db_table))


def enqueue(args: argparse.Namespace) -> dict[str, Any]:
    connection.ensure_connection()
    return timed(lambda: [TASKS[args.task].enqueue(n) for n in range(args.jobs)])


def stamps(args: argparse.Namespace) -> dict[str, Any]:
    connection.ensure_connection()
    return {"committed": paced(args.start, args.jobs, args.interval, stamp_task.enqueue)}


def work(args: argparse.Namespace) -> None:
    stop_on_sigterm()
    call_command("db_worker", batch=args.burst, verbosity=0)


def succeeded(args: argparse.Namespace) -> dict[str, Any]:
    return {"succeeded": DBTaskResult.objects.successful().count()}


def versions(args: argparse.Namespace) -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "versions": {
            "django-tasks-db": version("django-tasks-db"),
            "Django (peer)": django.get_version(),
        }
    }


if __name__ == "__main__":
    main(globals())
