"""``manage.py runjobs``: parse and validate arguments, then hand off to a Worker."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobqueue import conf
from jobqueue.runtime import shutdown
from jobqueue.runtime.worker import Worker, default_pool


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {number}")
    return number


def seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more seconds, got {number:g}")
    return number


class Command(BaseCommand):
    help = "Run a worker that claims and runs jobs until it is stopped (SIGTERM or Ctrl-C)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--pool",
            help='the pool from JOBQUEUE["POOLS"] to serve (default: "default", else the '
            "catch-all pool)",
        )
        parser.add_argument(
            "--queue",
            action="append",
            default=[],
            metavar="NAME",
            help="serve this queue instead of the pool's own (repeat for several)",
        )
        parser.add_argument(
            "--exclude-queue",
            action="append",
            default=[],
            metavar="NAME",
            help="leave this queue alone, in addition to what the pool leaves (repeatable)",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            help="jobs run at once, one thread each (default: the pool's concurrency)",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="exit (status 0) as soon as nothing is due and nothing is running",
        )
        parser.add_argument(
            "--max-jobs",
            type=positive_int,
            help="stop claiming after this many jobs, finish, and exit (status 0)",
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=seconds,
            help="seconds to wait for in-flight jobs when stopping (default: "
            'JOBQUEUE["SHUTDOWN_TIMEOUT"])',
        )

    def handle(self, *args: Any, **options: Any) -> None:
        settings = conf.get()
        pool = options["pool"] or default_pool(settings)
        if pool not in settings.pools:
            raise CommandError(
                f'--pool {pool!r} is not in JOBQUEUE["POOLS"]; the pools are: '
                f"{', '.join(settings.pools)}."
            )
        _log_to_stderr(options["verbosity"])
        worker = Worker(
            pool=pool,
            queues=options["queue"],
            exclude_queues=options["exclude_queue"],
            concurrency=options["concurrency"],
            burst=options["burst"],
            max_jobs=options["max_jobs"],
            shutdown_timeout=options["shutdown_timeout"],
            settings=settings,
        )
        if worker.queues == ():
            raise CommandError(
                "this worker would serve no queue: check --queue and --exclude-queue."
            )
        shutdown.install(worker)
        exit_code = worker.run()
        if exit_code:
            sys.exit(exit_code)


def _log_to_stderr(verbosity: int) -> None:
    # A project that configures LOGGING for "jobqueue" keeps its own handlers.
    logger = logging.getLogger("jobqueue")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO)
