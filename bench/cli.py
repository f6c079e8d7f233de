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
from typing import Any

from bench import database
from bench.report import progress
from bench.serverlog import MariaDBLog, ServerLog
from bench.systems.base import REPO, System
from bench.workload import Context, Part, Workload
from bench.workloads import KEYS, WORKLOADS

URLS = {
    "postgresql": "postgres://postgres@127.0.0.1:5432/jobqueue_bench",
    "sqlite": f"sqlite:///{Path(tempfile.gettempdir()) / 'jobqueue_bench.sqlite3'}",
    # MariaDB: a fresh database for each run, dropped at its end; django-tasks-db's is
    # bench_django_tasks_db on the same server.
    "mysql": "mysql://root@127.0.0.1:3306/bench_jobqueue",
}
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
    "flow_jobs": 2_000,
    "flow_head": 2_000,
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
        choices=KEYS,
        default=list(KEYS),
        help="these workloads (W6 a large table, W9 more processes, W10 a big backlog, W11 the "
        "drain floor, W12 the admin's pages, W14 flow control: jobqueue alone, and pgqueuer "
        "in W9 and W10 if it is in --systems; W8 sustained churn, jobqueue then pgqueuer if "
        "it is in --systems; W13 a worker's memory, every system but the raw baselines; all "
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
    flow = parser.add_argument_group("W14: flow control")
    flow.add_argument(
        "--flow-jobs",
        type=positive,
        default=10_000,
        help="jobs per drain, without limits, with Concurrency(limit=2) and with RateLimit",
    )
    flow.add_argument(
        "--flow-keys", type=positive, default=100, help="keys of each drain, round-robin"
    )
    flow.add_argument(
        "--flow-head",
        type=positive,
        default=10_000,
        help="jobs of key A (Concurrency(limit=1)) enqueued before key B's 10",
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

    key: str  # what --also calls it
    arguments: tuple[str, ...]  # added to this run's
    heading: str
    # The systems it compares, of this run's (None: all); whether it runs on this run's
    # database (only the binding changes) or chooses its own.
    systems: tuple[str, ...] | None = None
    same_database: bool = False

    def run(self, argv: list[str], systems: list[str], database_url: str | None) -> str:
        """This companion, with this run's sizes; its report, one heading level down."""
        wanted = [s for s in systems if self.systems is None or s in self.systems]
        command = [*passed_on(argv), *self.arguments, "--systems", *wanted, "--no-write"]
        command.append("--also")  # no companions of its own
        if self.same_database and database_url:
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
            raise SystemExit(f"the companion run {self.key!r} failed (exit code {done.returncode})")
        report = done.stdout[done.stdout.index("# ") :]  # past anything printed before it
        title, *rest = report.splitlines()
        lines = ["#" + line if line.startswith("#") else line for line in rest]
        return "\n".join([f"# {self.heading}", "", title.lstrip("# ") + ".", *lines])


COMPANIONS = {
    companion.key: companion
    for companion in (
        Companion(
            "prepared",
            ("--prepared", "--only", "W1", "W2", "W3", "W4"),
            "With prepared statements (`--prepared`)",
            # The Django projects it changes, and the fastest peer, whose psycopg prepares by
            # default.
            systems=("jobqueue", "django-tasks-db", "pgqueuer"),
            same_database=True,
        ),
        Companion("sqlite", ("--database", "sqlite"), "On SQLite (`--database sqlite`)"),
    )
}
# Options of this run a companion does not take over: it chooses its own.
NOT_PASSED_ON = {"--database", "--database-url", "--output", "--also", "--only", "--systems"}


def companions(args: argparse.Namespace, vendor: str) -> list[str]:
    """The companion runs this run makes: those asked for, else both after a run of every
    workload on PostgreSQL."""
    if args.also is not None:
        return list(args.also)
    if vendor == "postgresql" and set(args.only) == set(KEYS) and not args.prepared:
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


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    config = prepare_database(args.database_url or URLS[args.database])
    if args.prepared:
        # Read by the settings of both Django projects, here and in every subprocess.
        os.environ["DATABASE_PREPARED"] = "true"
    under_test: list[System] = []  # the systems, filled in by run(): their databases go too
    try:
        text, output = run(args, argv, config, under_test)
    finally:
        names = {str(config["NAME"]), *(system.database() for system in under_test)}
        drop_databases(config, sorted(names))
    given = sys.argv[1:] if argv is None else argv
    vendor = "postgresql" if config["ENGINE"] == database.POSTGRESQL else "other"
    for name in companions(args, vendor):
        section = COMPANIONS[name].run(given, args.systems, args.database_url)
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
    under_test: list[System],
) -> tuple[str, Path | None]:
    """Choose and set up the systems, run the workloads, print the report; the report and
    the file it is to be written to (None with --no-write)."""
    import django

    django.setup()
    from django.db import connection

    from bench import report, systems

    vendor = connection.vendor
    chosen = [w for w in WORKLOADS if w.key in args.only]
    available = systems.available()
    args.systems = taking_part(args.systems, chosen, vendor, available)
    info = report.machine()  # before the runs load the machine
    if vendor == "postgresql":
        info["prepared statements"] = (
            "on in jobqueue and django-tasks-db (--prepared)"
            if args.prepared
            else "off in jobqueue and django-tasks-db (Django's default)"
        )
        churned = [w.key for w in WORKLOADS if w.churns]
        if report.autovacuum_off() and any(w.churns for w in chosen):
            progress(
                f"autovacuum is off on this server: nothing vacuums the tables "
                f"{listed(churned, 'and')} churn, unlike a server at PostgreSQL's defaults"
            )
    started = time.monotonic()
    under_test += [available[name]() for name in args.systems]
    for system in under_test:
        progress(f"setting up {system.name}: dropping and recreating its tables")
        system.setup()
        info.update(system.versions())

    context = Context(args, under_test, vendor, statement_log(config, vendor))
    ran: dict[str, list[Part]] = {}
    without = [w.key for w in chosen if w.needs_jobqueue and "jobqueue" not in args.systems]
    if without:
        progress(f"no {', '.join(without)}: they measure jobqueue, which is not in --systems")
    for workload in chosen:
        if vendor in workload.databases and workload.key not in without:
            if workload.own_table:
                names = [s.name for s in under_test if workload.takes_part(type(s))]
                alone = " alone" if names == ["jobqueue"] else ""
                progress(f"{workload.key}: {', '.join(names)}{alone}")
            block = partial(workload.run, context)
            ran[workload.key] = context.again(workload.key, block) if workload.again else block()

    for system in under_test:
        system.reset()
    info["bench wall time"] = f"{time.monotonic() - started:.0f} s"
    if context.retried:
        info["runs measured again after an error"] = "; ".join(context.retried)
    parts = [part for key in ran for part in ran[key]]
    done = [w for w in WORKLOADS if ran.get(w.key)]
    compared = any(not w.own_table for w in done)
    host = socket.gethostname()
    today = dt.date.today().isoformat()
    text = report.markdown(
        title=f"Benchmark {today} on {host} ({vendor})",
        command=" ".join(["python bench/run.py", *(argv or sys.argv[1:])]),
        info=info,
        repeat=args.repeat,
        measured=[p for p in parts if isinstance(p, report.Measured)],
        counted=[p for p in parts if isinstance(p, report.Counted)],
        tables=[p for p in parts if isinstance(p, report.Table)],
        systems=args.systems,
        notes=[
            *report.notes_on({w.key for w in done}, vendor),
            *[
                f"{s.name}: {note}"
                for s in under_test
                for note in s.notes()
                if compared or any(w.peer_notes and s.name != "jobqueue" for w in done)
            ],
            *[note for w in done for note in w.notes(under_test)],
        ],
    )
    print(text.rstrip("\n"))
    if args.no_write:
        return text, None
    suffix = "" if vendor == "postgresql" else f"-{vendor}"
    suffix += "-prepared" if args.prepared and vendor == "postgresql" else ""
    # A run of some workloads does not overwrite the day's full report.
    suffix += "" if set(args.only) == set(KEYS) else "-" + "-".join(sorted(args.only))
    return text, args.output or REPO / "bench" / "results" / f"{today}-{host}{suffix}.md"


def taking_part(
    names: list[str], chosen: list[Workload], vendor: str, available: dict[str, type[System]]
) -> list[str]:
    """The systems of ``names`` that run here and that the chosen workloads take: every one
    if any of them is a row of the systems' table; known or not (the run then refuses)."""
    if vendor != "postgresql":
        # On SQLite or MariaDB, jobqueue and the peers that run there (django-tasks-db) only.
        runs_here = "on_mysql" if vendor == "mysql" else "on_sqlite"
        names = [n for n in names if n not in available or getattr(available[n], runs_here)]
    elif all(w.own_table for w in chosen):  # no other system is set up
        names = [
            n for n in names if n in available and any(w.takes_part(available[n]) for w in chosen)
        ]
    if "graphile-worker" in names and not (shutil.which("node") and shutil.which("npm")):
        progress("no graphile-worker: it needs Node.js and npm on PATH")
        names.remove("graphile-worker")
    unknown = set(names) - set(available)
    if unknown:
        sys.exit(f"unknown system(s) {', '.join(sorted(unknown))}; known: {', '.join(available)}")
    return names


def statement_log(config: dict[str, Any], vendor: str) -> ServerLog | MariaDBLog | None:
    """The server's statement log, where this process can read it (W5, the server-counted
    W7); what this database leaves out, said."""
    from bench.systems import peers

    here = [w.key for w in WORKLOADS if vendor not in w.databases]
    if vendor == "postgresql":
        log = ServerLog.find(peers.server_url())
        if log is None:
            progress("cannot read the PostgreSQL server log: no W5, no server-counted W7")
        return log
    if vendor == "mysql":
        found = MariaDBLog.find(config)
        if found is None:
            progress("cannot read MariaDB's general log file: no W5, no server-counted W7")
        progress(f"MariaDB: no {listed(here, 'or')}")
        return found
    progress(f"SQLite: no {listed(here, 'or')}, no server-counted W7")
    return None


def listed(keys: list[str], last: str) -> str:
    """``["W6", "W8", "W9"]`` -> ``"W6, W8 or W9"``."""
    ordered = sorted(keys, key=lambda key: int(key[1:]))
    return f"{', '.join(ordered[:-1])} {last} {ordered[-1]}" if len(ordered) > 1 else ordered[0]
