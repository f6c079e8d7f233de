"""Medians with min-max, the machine, the markdown report, and progress lines on stderr.

Every table in the report, the systems side by side and each workload's own (W6, W9-W14),
is drawn by :func:`table`, and every median by :func:`spread`: ``median (min-max)``, or the
one value when every run agreed once rounded as its unit is (see :func:`number`).
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import django
from django.db import connection

from bench.systems.base import KINDS

if TYPE_CHECKING:
    from bench.systems.base import System

# Kinds whose statements the report also lists one by one, with their count per run.
PER_RUN = ("heartbeat/", "other/")


# What the report says about each workload: notes on the workloads of a run, in this order.
NOTES: list[tuple[tuple[str, ...], str]] = [
    (
        ("W1", "W2", "W3", "W4", "W5", "W7"),
        "Each run starts from empty tables; emptying them and preloading the jobs a drain "
        "needs is not timed. Runs of the systems are interleaved, so a noisy moment on the "
        "machine hits all of them.",
    ),
    (
        ("W1", "W2"),
        "W1 and W2 time the enqueue calls on one open connection in autocommit: jobqueue in "
        "the bench process, a peer inside its driver process (interpreter start-up, imports "
        "and connecting not timed).",
    ),
    (
        ("W3",),
        "W3 times ONE worker process (burst mode, so it exits when the queue is empty) from "
        "spawn to exit, start-up included and nothing subtracted; the start-up row times the "
        "same command on an empty queue. All jobs are checked succeeded afterwards. The slow "
        "systems (marked below) drain --slow-jobs instead of --jobs, so that a run stays short.",
    ),
    (
        ("W4",),
        "W4 runs ONE worker with its default settings, not in burst mode; after one warm-up "
        "job and a pause, the bench enqueues stamp jobs one by one, each committed on its own; "
        "the handler appends the wall-clock time when it starts to a file, and a job's latency "
        "is that time minus the time its enqueue's commit returned to the enqueuer.",
    ),
    (
        ("W5", "W7"),
        "W5 and the server-counted W7 rows count statements on the PostgreSQL server: "
        "`ALTER DATABASE <system's bench database> SET log_statement = 'all'` (new connections "
        "to that database only; no restart; `pg_stat_statements` is not loaded on this server), "
        "then the `statement:` and `execute ...:` lines of the server log for that database, "
        "BEGIN and COMMIT included. W5 runs every system's idle worker at the same time, each "
        "on its own database, warms each up with one job, waits, then counts consecutive "
        "windows and multiplies by 86,400 s / window.",
    ),
    (
        ("W7",),
        "W7 in-process (jobqueue only) counts, by statement text, every statement run through "
        "Django's connections by every thread (an execute wrapper on each connection); the "
        "drain uses the worker class in the bench process, with the concurrency shown.",
    ),
    (
        ("W6", "W11", "W12"),
        "W6, W11 and W12 (PostgreSQL) measure jobqueue alone, in the bench process, each in a "
        "table of its own: the claim, a drain and `jobs queues` with and without many "
        "finished rows; how fast the database alone drains, 100 jobs per statement, against "
        "jobqueue's statement and worker; the admin's pages on a large table.",
    ),
    (
        ("W8",),
        "W8 (PostgreSQL) runs jobqueue and pgqueuer one after the other, each on its own "
        "database, as subprocesses of the bench: one worker serving for --churn-minutes, fed "
        "by a paced enqueuer at --churn-share of the drain rate measured first, finished "
        "jobs pruned by the bench once an interval (bench/churn.py says how, and why).",
    ),
    (
        ("W9",),
        "W9 (PostgreSQL) runs jobqueue's `runjobs` as subprocesses of the bench: one "
        "supervisor whose default pool has N processes, beside N pgqueuer worker processes "
        "when pgqueuer is in --systems.",
    ),
    (
        ("W13",),
        "W13 (PostgreSQL) runs one worker of each system in --systems but the raw baselines "
        "as a subprocess of the bench, at its W3 default settings, not in burst mode "
        "(jobqueue's `runjobs --pool default`, a peer's through its driver), and reads its "
        "resident set, with any child process's, from /proc.",
    ),
    (
        ("W14",),
        "W14 (PostgreSQL) measures jobqueue alone, its `runjobs` as subprocesses of the bench: "
        "the same jobs over many keys drained without limits, with a per-key Concurrency and "
        "with a per-key RateLimit that does not bind, and the head-of-line case, a key B "
        "behind a long backlog of a key A limited to one at a time. The peers have no per-key "
        "limit above one at a time, and no per-key rate limit, in their free versions.",
    ),
]


@dataclass(frozen=True)
class Row:
    """One line of the systems' table."""

    key: str  # W1..W7: a system's ``skips`` names these
    title: str
    unit: str  # "jobs/s", "s", "ms", "stmt/day" or "stmt/job"
    higher_is_better: bool


@dataclass(frozen=True)
class Counting:
    """One scenario of W7's in-process count: one repetition on one system gives the
    statements it ran, by kind."""

    title: str
    count: Callable[[System], Counter[str]]


@dataclass
class Measured:
    row: Row
    samples: dict[str, list[float]] = field(default_factory=dict)  # system -> one per run


@dataclass
class Table:
    """A workload's own table, for the workloads that compare something other than the
    systems (W6: a table with and without finished rows; W8: minutes of churn; W9: numbers of
    processes; W11: drains; W12: admin pages; W13: memory; W14: flow control)."""

    key: str
    title: str
    intro: str  # what the figures are: sizes, repetitions
    headings: list[str]
    rows: list[list[str]]
    left: int = 1  # columns of labels; the rest are figures, aligned right
    after: list[str] = field(default_factory=list)  # lines under the table


@dataclass
class Counted:
    counting: Counting
    jobs: int
    samples: dict[str, list[Counter[str]]] = field(default_factory=dict)


# On MariaDB the server's count comes from its general query log instead (bench.serverlog).
MARIADB_COUNT = (
    "W5 and the server-counted W7 rows count statements on the MariaDB server: `SET GLOBAL "
    "general_log = ON` while counting (no restart), then the `Query` and `Execute` lines of "
    "the connections whose `Connect` line names the system's database, connection set-up "
    "(`SET autocommit`, `SET NAMES`, the isolation level) and BEGIN and COMMIT included. W5 "
    "runs every system's idle worker at the same time, each on its own database, warms each "
    "up with one job, waits, then counts consecutive windows and multiplies by 86,400 s / "
    "window. Without LISTEN, an idle worker's statements are its polls."
)


def notes_on(workloads: set[str], vendor: str = "postgresql") -> list[str]:
    """The notes on any of ``workloads``, the workloads that ran on ``vendor``."""
    notes = [note for keys, note in NOTES if set(keys) & workloads]
    if vendor == "mysql":
        return [MARIADB_COUNT if "pg_stat_statements" in note else note for note in notes]
    return notes


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def number(value: float, unit: str) -> str:
    if unit in ("jobs/s", "stmt/day"):
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:.2f}"
    if unit == "us/job":
        return f"{value:.1f}"
    if unit == "ms":
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"
    return f"{value:.3f}"


def ratio(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def spread(values: list[float], unit: str) -> str:
    """``median (min-max)``, or just the value when every run agreed."""
    low, mid, high = min(values), statistics.median(values), max(values)
    if number(low, unit) == number(high, unit):
        return number(mid, unit)
    return f"{number(mid, unit)} ({number(low, unit)}-{number(high, unit)})"


def table(headings: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A markdown table: the first ``left`` columns are labels, the others right-aligned."""
    rule = "|".join(["---"] * left + ["---:"] * (len(headings) - left))
    return [f"| {' | '.join(headings)} |", f"|{rule}|", *[f"| {' | '.join(r)} |" for r in rows]]


def kind_totals(counts: Counter[str]) -> Counter[str]:
    """``{"claim/claim": 3, "other/prune": 1}`` -> ``{"claim": 3, "other": 1}``."""
    totals: Counter[str] = Counter()
    for label, count in counts.items():
        totals[label.split("/", 1)[0]] += count
    return totals


def machine() -> dict[str, str]:
    info = {
        "host": socket.gethostname(),
        "cpus": str(os.cpu_count()),
        "cpu model": cpu_model(),
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "os": platform.platform(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "database": database_version(),
    }
    if connection.vendor == "postgresql":
        info["psycopg"] = metadata.version("psycopg")
        info["server settings"] = server_settings()
    if connection.vendor == "mysql":
        info["mysqlclient"] = metadata.version("mysqlclient")
        info["isolation level"] = str(connection.settings_dict["OPTIONS"]["isolation_level"])
    return info


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# The PostgreSQL settings that move the figures most: whether anything vacuums the tables
# (W8 and W10 depend on it), the buffer cache, and how a commit waits for the disk.
SETTINGS = ("autovacuum", "shared_buffers", "synchronous_commit", "fsync", "data_directory")


def server_settings() -> str:
    with connection.cursor() as cursor:
        shown = []
        for name in SETTINGS:
            cursor.execute(f"SHOW {name}")
            shown.append(f"{name} {cursor.fetchone()[0]}")
    return ", ".join(shown)


def autovacuum_off() -> bool:
    """Whether the PostgreSQL server under the bench has autovacuum turned off."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return str(cursor.fetchone()[0]) == "off"


def database_version() -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            return f"PostgreSQL {cursor.fetchone()[0]}"
        if connection.vendor == "mysql":
            cursor.execute("SELECT VERSION()")
            return f"MariaDB {cursor.fetchone()[0]}"
        cursor.execute("SELECT sqlite_version()")
        return f"SQLite {cursor.fetchone()[0]}"


def markdown(
    *,
    title: str,
    command: str,
    info: dict[str, str],
    repeat: int,
    measured: list[Measured],
    counted: list[Counted],
    tables: list[Table],
    systems: list[str],
    notes: list[str],
) -> str:
    lines = [f"# {title}", "", f"Command: `{command}`", "", "## Machine", ""]
    lines += [f"- {key}: {value}" for key, value in info.items()]
    measured = sorted(measured, key=lambda m: m.row.key)  # W5 is measured last
    if measured:
        lines += ["", f"## Results: median of {repeat} runs (min-max)", ""]
        lines += table(
            ["", "workload", "unit", *systems],
            [
                [
                    m.row.key,
                    m.row.title,
                    m.row.unit,
                    *[
                        spread(m.samples[s], m.row.unit) if m.samples.get(s) else "n/a"
                        for s in systems
                    ],
                ]
                for m in measured
            ],
            left=3,
        )

    peers = [s for s in systems if s != "jobqueue"]
    if measured and "jobqueue" in systems and peers:
        lines += [
            "",
            "## jobqueue as a ratio to each peer: jobqueue's median / the peer's median",
            "",
            "Above 1 is better for jobqueue where higher is better, worse where lower is.",
            "",
        ]
        lines += table(
            ["", "workload", "better", *[f"vs {p}" for p in peers]],
            [
                [
                    m.row.key,
                    m.row.title,
                    "higher" if m.row.higher_is_better else "lower",
                    *[ratio_of(m.samples.get("jobqueue"), m.samples.get(p)) for p in peers],
                ]
                for m in measured
            ],
            left=3,
        )

    if counted:
        lines += ["", f"## W7: SQL statements per job, counted: median of {repeat} runs", ""]
        rows, others = [], []
        for c in counted:
            for system, samples in c.samples.items():
                per_job = [kind_totals(s) for s in samples]
                cells = [spread([t[kind] / c.jobs for t in per_job], "per job") for kind in KINDS]
                total = spread([s.total() / c.jobs for s in samples], "per job")
                rows.append([system, c.counting.title, *cells, total])
                per_run = Counter[str]()
                for s in samples:
                    per_run.update({k: v for k, v in s.items() if k.startswith(PER_RUN)})
                if per_run:
                    detail = ", ".join(
                        f"{label} x{count / len(samples):g}"
                        for label, count in sorted(per_run.items())
                    )
                    others.append(f"- {system}, {c.counting.title}: {detail}")
        lines += table(["system", "scenario", *KINDS, "total"], rows, left=2)
        if others:
            lines += ["", "Heartbeat and other statements, mean count per run:", ""]
            lines += others

    for t in sorted(tables, key=lambda t: int(t.key[1:])):  # W9 before W10
        lines += ["", f"## {t.key}: {t.title}", "", t.intro, ""]
        lines += table(t.headings, t.rows, t.left)
        if t.after:
            lines += ["", *t.after]
    lines += ["", "## Notes", "", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def ratio_of(ours: list[float] | None, theirs: list[float] | None) -> str:
    """jobqueue's median over a peer's, or n/a where either is missing."""
    if not ours or not theirs or statistics.median(theirs) <= 0:
        return "n/a"
    return ratio(statistics.median(ours) / statistics.median(theirs))
