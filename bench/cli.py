"""``python bench/run.py``: set up the bench database, run the workloads, write the report."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import environ

from bench.systems.base import REPO

URLS = {
    "postgresql": "postgres://postgres@127.0.0.1:5432/jobqueue_bench",
    "sqlite": f"sqlite:///{Path(tempfile.gettempdir()) / 'jobqueue_bench.sqlite3'}",
}
WORKLOADS = ("W1", "W2", "W3", "W7")


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
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per W1-W3 run")
    parser.add_argument("--count-jobs", type=int, default=1_000, help="jobs per W7 run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each workload")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--systems", nargs="+", default=["jobqueue"])
    parser.add_argument("--only", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument(
        "--output", type=Path, help="report file (default: bench/results/<date>-<host>.md)"
    )
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    return parser.parse_args(argv)


def prepare_database(url: str) -> None:
    """Point every process at the bench database, creating it on PostgreSQL if missing."""
    config = environ.Env.db_url_config(url)
    name = str(config["NAME"])
    if "bench" not in Path(name).name:
        sys.exit(
            f"refusing to use database {name!r}: the bench drops its tables, so its "
            "name must contain 'bench'"
        )
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    if config["ENGINE"] != "django.db.backends.postgresql":
        return
    import psycopg
    from psycopg import sql

    server = {
        "dbname": "postgres",
        "host": config.get("HOST") or None,
        "port": config.get("PORT") or None,
        "user": config.get("USER") or None,
        "password": config.get("PASSWORD") or None,
    }
    with psycopg.connect(**server, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    prepare_database(args.database_url or URLS[args.database])

    import django

    django.setup()
    from django.db import connection

    from bench import report, systems, workloads

    available = systems.available()
    unknown = set(args.systems) - set(available)
    if unknown:
        sys.exit(f"unknown system(s) {', '.join(sorted(unknown))}; known: {', '.join(available)}")
    info = report.machine()  # before the runs load the machine
    started = time.monotonic()
    under_test = [available[name]() for name in args.systems]
    for system in under_test:
        info.update(system.versions())
        progress(f"setting up {system.name}: dropping and recreating its tables")
        system.setup()

    measured: list[report.Measured] = []
    for workload in workloads.throughput(args.jobs, args.concurrency):
        if workload.key not in args.only:
            continue
        result = report.Measured(workload)
        for run in range(1, args.repeat + 1):
            for system in under_test:  # interleaved, so a noisy moment hits every system
                value = workload.measure(system)
                result.samples.setdefault(system.name, []).append(value)
                progress(
                    f"{workload.key} {workload.title} [{system.name}] run {run}: "
                    f"{report.number(value, workload.unit)} {workload.unit}"
                )
        measured.append(result)

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

    for system in under_test:
        system.reset()
    info["bench wall time"] = f"{time.monotonic() - started:.0f} s"
    host = socket.gethostname()
    today = dt.date.today().isoformat()
    text = report.markdown(
        title=f"Benchmark {today} on {host} ({connection.vendor})",
        command=" ".join(["python bench/run.py", *(argv or sys.argv[1:])]),
        info=info,
        repeat=args.repeat,
        measured=measured,
        counted=counted,
        systems=args.systems,
        notes=[f"{s.name}: {note}" for s in under_test for note in s.notes()],
    )
    print(text)
    if not args.no_write:
        suffix = "" if connection.vendor == "postgresql" else f"-{connection.vendor}"
        output = args.output or REPO / "bench" / "results" / f"{today}-{host}{suffix}.md"
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
        progress(f"wrote {output}")
