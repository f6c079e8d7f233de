"""``manage.py runjobs``: parse and validate arguments, then hand off to a Worker."""

from __future__ import annotations

import argparse
import gc
import logging
import math
import os
import socket
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

import jobqueue
from jobqueue import conf, signals
from jobqueue.metrics import exposition
from jobqueue.runtime import shutdown
from jobqueue.runtime.worker import Worker
from jobqueue.supervisor.supervisor import READY, WORKED, ReadyReport, Supervisor


def positive_int(value: str) -> int:
    return _whole_number(value, least=1)


def non_negative_int(value: str) -> int:
    return _whole_number(value, least=0)


def _whole_number(value: str, least: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < least:
        raise argparse.ArgumentTypeError(f"expected {least} or more, got {number}")
    return number


def seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    # float() takes "nan" and "inf": NaN would pass every comparison below as False.
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, got {value!r}")
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more seconds, got {number:g}")
    if number > conf.MAX_DELAY:
        raise argparse.ArgumentTypeError(
            f"expected at most {conf.MAX_DELAY:,} seconds (ten years), got {number:g}"
        )
    return number


def positive_seconds(value: str) -> float:
    number = seconds(value)
    if number == 0:
        raise argparse.ArgumentTypeError("expected more than 0 seconds")
    return number


def port(value: str) -> int:
    number = _whole_number(value, least=1)
    if number > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port up to 65535, got {number}")
    return number


def memory(value: str) -> int:
    try:
        return conf.memory_size("--max-memory", value)
    except ImproperlyConfigured:
        raise argparse.ArgumentTypeError(
            f'expected a size such as "512M" or "2G", got {value!r}'
        ) from None


class Command(BaseCommand):
    help = (
        "Run the workers: without --pool, a supervisor that keeps every pool of "
        'JOBQUEUE["POOLS"] running; with --pool, one worker process for that pool. '
        "SIGTERM or Ctrl-C stops within SHUTDOWN_TIMEOUT."
    )

    def get_version(self) -> str:
        return jobqueue.__version__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--pool",
            help='run one worker for this pool of JOBQUEUE["POOLS"] instead of the supervisor',
        )
        parser.add_argument(
            "--queue",
            action="append",
            default=[],
            metavar="NAME",
            help="with --pool: serve this queue instead of the pool's own (repeatable)",
        )
        parser.add_argument(
            "--exclude-queue",
            action="append",
            default=[],
            metavar="NAME",
            help="with --pool: leave this queue alone, besides what the pool leaves (repeatable)",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            help="jobs run at once per process, one thread each (default: the pool's)",
        )
        parser.add_argument(
            "--prefetch",
            type=non_negative_int,
            metavar="N",
            help="jobs claimed ahead of the slots while jobs are short; 0: none "
            "(default: the pool's, else 16 per slot)",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="exit (status 0) as soon as nothing is due and nothing is running",
        )
        parser.add_argument(
            "--max-jobs",
            type=positive_int,
            help="claim no more than this many jobs, finish them and exit (default: the pool's)",
        )
        parser.add_argument(
            "--max-memory",
            type=memory,
            metavar="SIZE",
            help='between jobs, past this resident memory ("512M"), finish and exit '
            "(default: the pool's)",
        )
        parser.add_argument(
            "--idle-timeout",
            type=positive_seconds,
            metavar="SECONDS",
            help="exit after this long with nothing due (default: the pool's, if on demand)",
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=seconds,
            metavar="SECONDS",
            help='seconds in-flight jobs get when stopping (default: JOBQUEUE["SHUTDOWN_TIMEOUT"])',
        )
        parser.add_argument(
            "--metrics-port",
            type=port,
            metavar="PORT",
            help="serve Prometheus metrics on /metrics on this port: the supervisor's for "
            'itself and all its workers (default: JOBQUEUE["METRICS_PORT"], else none)',
        )
        # Set by the supervisor that serves metrics: the directory its children count into.
        parser.add_argument("--metrics-dir", help=argparse.SUPPRESS)
        # Set by the supervisor so that it knows its child's worker id before it registers.
        parser.add_argument("--worker-tag", help=argparse.SUPPRESS)
        # Set by the supervisor: the pipe on which this worker says how far it got.
        parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
        # Set by the supervisor: its own pid. A worker whose supervisor died while it was
        # still starting up has init as its parent already, so os.getppid() cannot tell.
        parser.add_argument("--supervisor-pid", type=int, help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        settings = conf.get()
        _log_to_stderr(options["verbosity"])
        if options["pool"] is None:
            self._supervise(settings, options)
            return
        pool = options["pool"]
        if pool not in settings.pools:
            raise CommandError(
                f'--pool {pool!r} is not in JOBQUEUE["POOLS"]; the pools are: '
                f"{', '.join(settings.pools)}."
            )
        tag = options["worker_tag"]
        worker = Worker(
            pool=pool,
            queues=options["queue"],
            exclude_queues=options["exclude_queue"],
            concurrency=options["concurrency"],
            prefetch=options["prefetch"],
            burst=options["burst"],
            max_jobs=options["max_jobs"],
            max_memory=options["max_memory"],
            idle_timeout=options["idle_timeout"],
            shutdown_timeout=options["shutdown_timeout"],
            worker_id=f"{socket.gethostname()}:{os.getpid()}:{tag}" if tag else None,
            settings=settings,
        )
        if worker.selection.queues == ():
            raise CommandError(
                "this worker would serve no queue: check --queue and --exclude-queue."
            )
        shutdown.install(worker, supervised=bool(tag))
        if tag:
            shutdown.stop_with_parent(worker, options["supervisor_pid"] or os.getppid())
        if options["ready_fd"] is not None:
            _report_to_supervisor(worker, ReadyReport(options["ready_fd"]))
        served = None
        if options["metrics_dir"]:
            exposition.join(options["metrics_dir"])
        elif not tag and (port := options["metrics_port"] or settings.metrics_port):
            served = _metrics(lambda: exposition.WorkerMetrics(port))
        # What start-up built (Django, the apps, the settings) lives as long as the process:
        # out of the cyclic collector's reach, a full collection walks only what the jobs
        # allocate, not every object of Django as well.
        gc.freeze()
        try:
            exit_code = worker.run()
        finally:
            if served is not None:
                served.close()
        if exit_code:
            sys.exit(exit_code)

    def _supervise(self, settings: conf.Settings, options: dict[str, Any]) -> None:
        for name in ("queue", "exclude_queue"):
            if options[name]:
                flag = "--" + name.replace("_", "-")
                raise CommandError(f"{flag} needs --pool: it narrows one pool's worker.")
        passed = []
        for name in ("concurrency", "prefetch", "max_jobs", "max_memory", "shutdown_timeout"):
            if options[name] is not None:
                passed += ["--" + name.replace("_", "-"), str(options[name])]
        served = None
        if port := options["metrics_port"] or settings.metrics_port:
            served = _metrics(lambda: exposition.SupervisorMetrics(port))
            passed += ["--metrics-dir", served.directory]
        try:
            supervisor = Supervisor(
                worker_args=passed,
                idle_timeout=options["idle_timeout"],
                burst=options["burst"],
                shutdown_timeout=options["shutdown_timeout"],
                settings=settings,
                on_child_ended=served.child_ended if served is not None else None,
            )
            supervisor.install_signal_handlers()
            supervisor.run()
        finally:
            if served is not None:
                served.close()


Served = TypeVar("Served", exposition.WorkerMetrics, exposition.SupervisorMetrics)


def _metrics(make: Callable[[], Served]) -> Served:
    """Start serving metrics, or stop with a message naming what is wrong."""
    try:
        served = make()
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from None
    try:
        served.start()
    except ImproperlyConfigured as exc:
        served.close()  # the supervisor's directory too
        raise CommandError(str(exc)) from None
    return served


def _report_to_supervisor(worker: Worker, report: ReadyReport) -> None:
    """READY once the worker has registered, WORKED once it has finished a job."""
    worker.on_ready = lambda: report.send(READY)

    worker_id = worker.id

    def finished(sender: Any, **kwargs: Any) -> None:
        if kwargs.get("worker") == worker_id:
            report.send(WORKED)  # once; later calls cost a set lookup under a lock

    # Kept connected (weak=False) for the life of the process, as the worker is.
    signals.job_finished.connect(finished, weak=False)


def _log_to_stderr(verbosity: int) -> None:
    # A project that configures LOGGING for "jobqueue" keeps its own handlers.
    logger = logging.getLogger("jobqueue")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO)
