"""``python bench/run.py``: set up the bench database, run the workloads, write the report."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from bench import database
from bench.report import progress
from bench.systems.base import REPO

URLS = {
    "postgresql": "postgres://postgres@127.0.0.1:5432/jobqueue_bench",
    "sqlite": f"sqlite:///{Path(tempfile.gettempdir()) / 'jobqueue_bench.sqlite3'}",
    # MariaDB: a fresh database for each run, dropped at its end; django-tasks-db's is
    # bench_django_tasks_db on the same server.
    "mysql": "mysql://root@127.0.0.1:3306/bench_jobqueue",
}
T = TypeVar("T")
ATTEMPTS = 3  # per run of a workload on a system
WORKLOADS = (
    "W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "W11", "W12", "W13"
)  # fmt: skip
# Workloads with a table of their own, of jobqueue alone (W11's raw-100 row is the driver's
# code run in the bench process), on PostgreSQL only; W9 and W10 add the peers of PEERED.
ALONE = ("W6", "W9", "W10", "W11", "W12")
# W8 runs jobqueue, then pgqueuer if it is in --systems, each in a table of its own.
PEERED = {"W8": ("pgqueuer",), "W9": ("pgqueuer",), "W10": ("pgqueuer",)}
# Workloads with a table of their own, of every system that takes part, on PostgreSQL only.
OWN_TABLE = (*ALONE, "W8", "W13")
QUICK = {  # --quick: about 3-4 minutes
    "jobs": 2_000,
    "slow_jobs": 300,
    "count_jobs": 200,
    "repeat": 2,
    "latency_jobs": 50,
    "idle_seconds": 20.0,
    "idle_windows": 1,
    "idle_settle": 5.0,
    "large_finished": 100_000,
    "large_jobs": 2_000,
    "floor_jobs": 5_000,
    "admin_jobs": 10_000,
    "admin_renders": 3,
    "admin_minutes": 1440,
    "backlog_sizes": [2_000, 20_000],
    "processes_jobs": 2_000,
    "memory_jobs": 10_000,
    "memory_slow_jobs": 500,
    "churn_minutes": 3.0,
    "churn_probe_jobs": 3_000,
}


def at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer of ``low`` or more."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low:,}, not {value:,}")
        return value

    return parse


positive = at_least(1)


def above_zero(text: str) -> float:
    """An argparse ``type``: a number above 0."""
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {value:g}")
    return value


# W12 renders page 100 of the changelist, whose pages have 50 jobs (JobAdmin.list_per_page).
ADMIN_MIN_JOBS = 100 * 50


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/run.py",
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--database", choices=sorted(URLS), default="postgresql")
    parser.add_argument(
        "--database-url",
        help="the bench database; its tables are dropped, so its name must contain 'bench' "
        f"(default: {', '.join(f'{k}: {v}' for k, v in URLS.items())})",
    )
    parser.add_argument("--quick", action="store_true", help=f"about 3-4 minutes: {QUICK}")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per W1-W3 run")
    parser.add_argument(
        "--slow-jobs", type=int, default=2_000, help="jobs per W3 drain of the slow peers"
    )
    parser.add_argument("--count-jobs", type=int, default=1_000, help="jobs per W7 run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each workload")
    parser.add_argument("--latency-jobs", type=int, default=200, help="W4 jobs per run")
    parser.add_argument("--latency-interval", type=float, default=0.02, help="W4: s apart")
    parser.add_argument("--idle-seconds", type=float, default=60.0, help="W5: one window")
    parser.add_argument(
        "--idle-windows", type=int, help="W5: consecutive windows (default: --repeat)"
    )
    parser.add_argument(
        "--idle-settle", type=float, default=10.0, help="W5: idle seconds before the windows"
    )
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[4, 16], help="W7 in-process drains"
    )
    parser.add_argument(
        "--systems",
        nargs="+",
        default=[
            "jobqueue",
            "procrastinate",
            "pgqueuer",
            "graphile-worker",
            "django-tasks-db",
            "raw-1",
            "raw-100",
        ],
        help="on SQLite and MariaDB only jobqueue and django-tasks-db run; graphile-worker "
        "needs Node.js",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=WORKLOADS,
        default=list(WORKLOADS),
        help="these workloads (W6 a large table, W9 more processes, W10 a big backlog, W11 the "
        "drain floor, W12 the admin's pages: jobqueue alone, and pgqueuer in W9 and W10 if "
        "it is in --systems; W8 sustained churn, jobqueue then pgqueuer if it is in "
        "--systems; W13 a worker's memory, every system but the raw baselines; all "
        "PostgreSQL only)",
    )
    parser.add_argument(
        "--prepared",
        action="store_true",
        help="turn on prepared statements (Django's server_side_binding, prepare_threshold 5) "
        "in the Django projects, jobqueue's and django-tasks-db's, as the peers that use "
        "psycopg directly have them by default; the report goes to <date>-<host>-prepared.md",
    )
    large = parser.add_argument_group("W6: a large table")
    large.add_argument(
        "--large-finished", type=positive, default=1_000_000, help="finished rows retained"
    )
    large.add_argument("--large-jobs", type=positive, default=5_000, help="jobs per drain")
    large.add_argument(
        "--large-concurrency", type=positive, default=16, help="the draining worker's slots"
    )
    floor = parser.add_argument_group("W11: the drain floor")
    floor.add_argument("--floor-jobs", type=positive, default=20_000, help="jobs per drain")
    floor.add_argument(
        "--floor-connections",
        type=positive,
        nargs="+",
        default=[1, 4],
        help="connections each drain but the worker's runs on, one at a time",
    )
    admin = parser.add_argument_group("W12: the admin's pages")
    admin.add_argument(
        "--admin-jobs",
        type=at_least(ADMIN_MIN_JOBS),
        default=100_000,
        help=f"jobs in the table, at least {ADMIN_MIN_JOBS:,} (for page 100)",
    )
    admin.add_argument("--admin-renders", type=positive, default=7, help="timed renders per page")
    admin.add_argument(
        "--admin-minutes",
        type=positive,
        default=7 * 24 * 60,
        help="minutes of dashboard history loaded (4 workers x 10 tasks each)",
    )
    churn = parser.add_argument_group("W8: sustained churn")
    churn.add_argument(
        "--churn-minutes",
        type=above_zero,
        default=30.0,
        help="minutes of paced enqueue and drain for each system (a fraction is allowed)",
    )
    churn.add_argument(
        "--churn-share",
        type=above_zero,
        default=0.7,
        help="the enqueue rate, as a share of the drain rate measured first",
    )
    churn.add_argument(
        "--churn-rate",
        type=above_zero,
        help="a fixed enqueue rate, jobs/s, instead of --churn-share of the measured drain "
        "rate: runs on a busy machine compare then",
    )
    churn.add_argument(
        "--churn-interval",
        type=above_zero,
        default=60.0,
        help="s per sample (a row of the table); finished jobs are kept this long",
    )
    churn.add_argument(
        "--churn-probe-jobs",
        type=positive,
        default=5_000,
        help="jobs drained by one burst worker to measure the drain rate first",
    )
    churn.add_argument(
        "--churn-vacuum",
        action="store_true",
        help="VACUUM the jobs tables after each prune, in place of autovacuum",
    )
    more = parser.add_argument_group("W9: more processes")
    more.add_argument("--processes-jobs", type=positive, default=10_000, help="jobs per drain")
    more.add_argument(
        "--processes",
        type=positive,
        nargs="+",
        default=[1, 2, 4],
        help="worker processes of the one supervisor's default pool, one drain each; "
        "the first is the yardstick",
    )
    backlog = parser.add_argument_group("W10: a big backlog")
    backlog.add_argument(
        "--backlog-sizes",
        type=positive,
        nargs="+",
        default=[10_000, 100_000, 1_000_000],
        help="backlogs drained, each by one supervisor and by four; the first is the yardstick",
    )
    backlog.add_argument(
        "--backlog-batch", type=positive, default=10_000, help="jobs per enqueue_many call"
    )
    backlog.add_argument(
        "--backlog-window",
        type=float,
        default=60.0,
        help="s of each drain counted, from the moment every worker has started a job; "
        "then the workers are stopped",
    )
    memory = parser.add_argument_group("W13: memory")
    memory.add_argument(
        "--memory-jobs",
        type=positive,
        default=100_000,
        help="no-op jobs, then jobs returning 10 KB, drained by each system's one worker",
    )
    memory.add_argument(
        "--memory-slow-jobs",
        type=positive,
        default=2_000,
        help="the same for the slow peers (procrastinate, django-tasks-db)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="report file (default: bench/results/<date>-<host>.md; "
        "<date>-<host>-W11.md and the like with --only)",
    )
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    parser.add_argument(
        "--also",
        nargs="*",
        choices=sorted(COMPANIONS),
        help="runs of their own whose reports become sections of this one: W1-W4 with "
        "prepared statements, and W1-W4 on SQLite (default: both, for a run of every "
        "workload on PostgreSQL; none otherwise; --also alone for none)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        given = {a.split("=")[0].lstrip("-").replace("-", "_") for a in argv if a.startswith("--")}
        for key, value in QUICK.items():
            if key not in given:
                setattr(args, key, value)
    return args


@dataclass(frozen=True)
class Companion:
    """A run of its own whose report becomes a section of this one: ``python bench/run.py``
    again in a process of its own (its own settings: prepared statements are read at
    start-up, SQLite is another database), with this run's sizes."""

    arguments: tuple[str, ...]  # added to this run's
    heading: str
    # The systems it compares, of this run's (None: all); whether it runs on this run's
    # database (only the binding changes) or chooses its own.
    systems: tuple[str, ...] | None = None
    same_database: bool = False


COMPANIONS = {
    "prepared": Companion(
        ("--prepared", "--only", "W1", "W2", "W3", "W4"),
        "With prepared statements (`--prepared`)",
        # The Django projects it changes, and the fastest peer, whose psycopg prepares by
        # default.
        systems=("jobqueue", "django-tasks-db", "pgqueuer"),
        same_database=True,
    ),
    "sqlite": Companion(("--database", "sqlite"), "On SQLite (`--database sqlite`)"),
}
# Options of this run a companion does not take over: it chooses its own.
NOT_PASSED_ON = {"--database", "--database-url", "--output", "--also", "--only", "--systems"}


def companions(args: argparse.Namespace, vendor: str) -> list[str]:
    """The companion runs this run makes: those asked for, else both after a run of every
    workload on PostgreSQL."""
    if args.also is not None:
        return list(args.also)
    if vendor == "postgresql" and set(args.only) == set(WORKLOADS) and not args.prepared:
        return list(COMPANIONS)
    return []


def passed_on(argv: list[str]) -> list[str]:
    """``argv`` without the options a companion run chooses for itself."""
    kept: list[str] = []
    skipping = False
    for arg in argv:
        if arg.startswith("--"):
            skipping = arg.split("=")[0] in NOT_PASSED_ON
        if not skipping:
            kept.append(arg)
    return kept


def companion_section(
    name: str, argv: list[str], systems: list[str], database_url: str | None
) -> str:
    """Run companion ``name`` with this run's sizes; its report, one heading level down."""
    companion = COMPANIONS[name]
    wanted = [s for s in systems if companion.systems is None or s in companion.systems]
    command = [*passed_on(argv), *companion.arguments, "--systems", *wanted, "--no-write"]
    command.append("--also")  # no companions of its own
    if companion.same_database and database_url:
        command += ["--database-url", database_url]
    progress(f"companion run: python bench/run.py {' '.join(command)}")
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), *command],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "DATABASE_PREPARED"},
    )
    if done.returncode:
        raise SystemExit(f"the companion run {name!r} failed (exit code {done.returncode})")
    report = done.stdout[done.stdout.index("# ") :]  # past anything printed before it
    title, *rest = report.splitlines()
    lines = ["#" + line if line.startswith("#") else line for line in rest]
    return "\n".join([f"# {companion.heading}", "", title.lstrip("# ") + ".", *lines])


def prepare_database(url: str) -> dict[str, Any]:
    """Point every process at the bench database, creating it on PostgreSQL if missing and
    afresh on MariaDB; its settings."""
    config = database.checked(url, "bench", "the bench drops its tables")
    database.use(url, "bench.settings")
    if config["ENGINE"] == database.POSTGRESQL:
        database.create(config)
    elif config["ENGINE"] == database.MYSQL:
        database.create(config, replace=True)
    return config


def drop_databases(config: dict[str, Any], names: list[str]) -> None:
    """On MariaDB, drop the run's databases (the bench's and each peer's) at its end."""
    if config["ENGINE"] != database.MYSQL:
        return
    from django.db import connections

    connections.close_all()
    for name in names:
        database.drop({**config, "NAME": name})


def again_on_error(what: str, block: Callable[[], T], retried: list[str]) -> T:
    """The machine is shared: a database restart by someone else must not end the run."""
    from django.db import connections

    for attempt in range(1, ATTEMPTS + 1):
        try:
            return block()
        except Exception as exc:
            if attempt == ATTEMPTS:
                raise
            progress(f"{what} failed, measuring again in 10 s: {str(exc)[-500:]}")
            retried.append(what)
            connections.close_all()  # a connection the server dropped is not reopened
            time.sleep(10)
    raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    config = prepare_database(args.database_url or URLS[args.database])
    if args.prepared:
        # Read by the settings of both Django projects, here and in every subprocess.
        os.environ["DATABASE_PREPARED"] = "true"
    under_test: list[Any] = []  # the systems, filled in by run(): their databases go too
    try:
        text, output = run(args, argv, config, under_test)
    finally:
        names = {str(config["NAME"]), *(system.database() for system in under_test)}
        drop_databases(config, sorted(names))
    given = sys.argv[1:] if argv is None else argv
    vendor = "postgresql" if config["ENGINE"] == database.POSTGRESQL else "other"
    for name in companions(args, vendor):
        section = companion_section(name, given, args.systems, args.database_url)
        print("\n" + section)  # after the report's own lines, one blank line apart
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n")
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text.rstrip("\n") + "\n")
        progress(f"wrote {output}")


def run(
    args: argparse.Namespace,
    argv: list[str] | None,
    config: dict[str, Any],
    under_test: list[Any],
) -> tuple[str, Path | None]:
    """Choose and set up the systems, run the workloads, print the report; the report and
    the file it is to be written to (None with --no-write)."""
    import django

    django.setup()
    from django.db import connection

    from bench import memory, report, systems

    available = systems.available()
    compared = bool(set(args.only) - set(OWN_TABLE))  # any workload with the systems side by side
    if connection.vendor != "postgresql":
        # On SQLite or MariaDB, jobqueue and the peers that run there (django-tasks-db) only.
        runs_here = "on_mysql" if connection.vendor == "mysql" else "on_sqlite"
        args.systems = [
            name
            for name in args.systems
            if name not in available or getattr(available[name], runs_here)
        ]
    elif not compared:  # only the peers W9, W10 and W13 measure take part: no other is set up
        peered = {peer for key in args.only for peer in PEERED.get(key, ())}
        args.systems = [
            name
            for name in args.systems
            if name in {"jobqueue", *peered}
            or ("W13" in args.only and name in available and memory.takes_part(available[name]))
        ]
    if "graphile-worker" in args.systems and not (shutil.which("node") and shutil.which("npm")):
        progress("no graphile-worker: it needs Node.js and npm on PATH")
        args.systems.remove("graphile-worker")
    unknown = set(args.systems) - set(available)
    if unknown:
        sys.exit(f"unknown system(s) {', '.join(sorted(unknown))}; known: {', '.join(available)}")
    info = report.machine()  # before the runs load the machine
    if connection.vendor == "postgresql":
        info["prepared statements"] = (
            "on in jobqueue and django-tasks-db (--prepared)"
            if args.prepared
            else "off in jobqueue and django-tasks-db (Django's default)"
        )
        if report.autovacuum_off() and {"W8", "W10"} & set(args.only):
            progress(
                "autovacuum is off on this server: nothing vacuums the tables W8 and W10 "
                "churn, unlike a server at PostgreSQL's defaults"
            )
    started = time.monotonic()
    for name in args.systems:
        under_test.append(available[name]())

    from bench import (
        admin_changelist,
        backlog,
        churn,
        floor,
        idle,
        large_table,
        processes,
        workloads,
    )
    from bench.serverlog import MariaDBLog, ServerLog
    from bench.systems import peers

    for system in under_test:
        progress(f"setting up {system.name}: dropping and recreating its tables")
        system.setup()
        info.update(system.versions())
    log: ServerLog | MariaDBLog | None = None
    if connection.vendor == "postgresql":
        log = ServerLog.find(peers.server_url())
        if log is None:
            progress("cannot read the PostgreSQL server log: no W5, no server-counted W7")
    elif connection.vendor == "mysql":
        log = MariaDBLog.find(config)
        if log is None:
            progress("cannot read MariaDB's general log file: no W5, no server-counted W7")
        progress("MariaDB: no W6, W8, W9, W10, W11, W12 or W13")
    else:
        progress("SQLite: no W5, W6, W8, W9, W10, W11, W12 or W13, no server-counted W7")

    measured: list[report.Measured] = []
    retried: list[str] = []

    def repeated(workload: workloads.Workload) -> None:
        if workload.key not in args.only:
            return
        results = [report.Measured(row) for row in workload.rows]
        measured.extend(results)
        for run in range(1, args.repeat + 1):
            for system in [s for s in under_test if workload.runs_on(s)]:  # interleaved
                what = f"{workload.rows[0].key} {workload.rows[0].title} [{system.name}]"
                values = again_on_error(what, partial(workload.measure, system), retried)
                for result, value in zip(results, values, strict=True):
                    result.samples.setdefault(system.name, []).append(value)
                first = workload.rows[0]
                shown = ", ".join(report.number(v, first.unit) for v in values)
                progress(
                    f"{first.key} {first.title} [{system.name}] run {run}: {shown} {first.unit}"
                )

    for workload in workloads.throughput(args.jobs, args.slow_jobs):
        repeated(workload)
    repeated(idle.latency(args.latency_jobs, args.latency_interval, settle=1.0))
    if log is not None:
        for workload in workloads.server_counted(args.count_jobs, log):
            repeated(workload)
        if "W5" in args.only:
            windows = args.idle_windows or args.repeat
            progress(f"W5: every idle worker at once, {windows} x {args.idle_seconds:g} s")
            per_day = again_on_error(
                "W5",
                lambda: idle.idle_cost(
                    under_test, log, args.idle_seconds, windows, args.idle_settle
                ),
                retried,
            )
            measured.append(report.Measured(idle.IDLE_ROW, per_day))
            progress(f"W5 {per_day}")

    counted: list[report.Counted] = []
    if "W7" in args.only:
        for counting in workloads.statements(args.count_jobs, args.concurrency):
            result = report.Counted(counting, args.count_jobs)
            for run in range(1, args.repeat + 1):
                for system in [s for s in under_test if s.counts_statements]:
                    counts = counting.count(system)
                    result.samples.setdefault(system.name, []).append(counts)
                    progress(
                        f"W7 {counting.title} [{system.name}] run {run}: "
                        f"{counts.total() / args.count_jobs:.3f} statements/job"
                    )
            counted.append(result)

    tables: list[report.Table] = []

    def beside(key: str) -> list[Any]:
        """The peers measured beside jobqueue in ``key``'s table."""
        return [s for s in under_test if s.name in PEERED.get(key, ())]

    alone = {
        "W6": lambda: large_table.large_table(
            args.large_finished, args.large_jobs, args.large_concurrency, args.repeat
        ),
        "W9": lambda: processes.processes(
            args.processes_jobs, args.processes, args.repeat, beside("W9")
        ),
        "W10": lambda: backlog.backlog(
            args.backlog_sizes, args.backlog_batch, args.backlog_window, beside("W10")
        ),
        "W11": lambda: floor.floor(args.floor_jobs, args.floor_connections, args.repeat),
        "W12": lambda: admin_changelist.admin_pages(
            args.admin_jobs, args.admin_renders, args.admin_minutes
        ),
    }
    wanted = [key for key in alone if key in args.only]
    if wanted and "jobqueue" not in args.systems:
        progress(f"no {', '.join(wanted)}: they measure jobqueue, which is not in --systems")
    elif connection.vendor == "postgresql":
        for key in wanted:
            names = ", ".join(["jobqueue", *(s.name for s in beside(key))])
            progress(f"{key}: {names}" if key in PEERED else f"{key}: jobqueue alone")
            tables.append(again_on_error(key, alone[key], retried))
    if "W13" in args.only and connection.vendor == "postgresql":
        progress(f"W13: {', '.join(s.name for s in under_test if memory.takes_part(s))}")
        tables.append(
            memory.memory(
                under_test,
                args.memory_jobs,
                args.memory_slow_jobs,
                lambda what, block: again_on_error(what, block, retried),
            )
        )

    if "W8" in args.only and connection.vendor == "postgresql":
        progress("W8: sustained churn, one system after the other")
        tables += again_on_error(
            "W8",
            lambda: churn.churn(
                under_test,
                args.churn_minutes,
                args.churn_share,
                args.churn_rate,
                args.churn_interval,
                args.churn_probe_jobs,
                args.churn_vacuum,
            ),
            retried,
        )

    for system in under_test:
        system.reset()
    info["bench wall time"] = f"{time.monotonic() - started:.0f} s"
    if retried:
        info["runs measured again after an error"] = "; ".join(retried)
    ran = {m.row.key for m in measured} | {t.key for t in tables} | ({"W7"} if counted else set())
    host = socket.gethostname()
    today = dt.date.today().isoformat()
    text = report.markdown(
        title=f"Benchmark {today} on {host} ({connection.vendor})",
        command=" ".join(["python bench/run.py", *(argv or sys.argv[1:])]),
        info=info,
        repeat=args.repeat,
        measured=measured,
        counted=counted,
        tables=tables,
        systems=args.systems,
        notes=[
            *report.notes_on(ran, connection.vendor),
            *[
                f"{s.name}: {note}"
                for s in under_test
                for note in s.notes()
                if ran - set(OWN_TABLE) or ("W13" in ran and s.name != "jobqueue")
            ],
            *[
                f"{s.name}, W3 {setting}: {meaning}{' (a slow system)' if s.slow else ''}"
                for s in under_test
                for setting, meaning in s.drain_settings.items()
                if "W3" in ran
            ],
        ],
    )
    print(text.rstrip("\n"))
    if args.no_write:
        return text, None
    suffix = "" if connection.vendor == "postgresql" else f"-{connection.vendor}"
    suffix += "-prepared" if args.prepared and connection.vendor == "postgresql" else ""
    # A run of some workloads does not overwrite the day's full report.
    suffix += "" if set(args.only) == set(WORKLOADS) else "-" + "-".join(sorted(args.only))
    return text, args.output or REPO / "bench" / "results" / f"{today}-{host}{suffix}.md"
