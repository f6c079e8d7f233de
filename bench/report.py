"""Medians with min-max, the machine, and the markdown report."""

from __future__ import annotations

import os
import platform
import socket
import statistics
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import django
from django.db import connection

from bench.systems.base import KINDS
from bench.workloads import Counting, Row

# Kinds whose statements the report also lists one by one, with their count per run.
PER_RUN = ("heartbeat/", "other/")


NOTES = [
    "Each run starts from empty tables; emptying them and preloading the jobs a drain "
    "needs is not timed. Runs of the systems are interleaved, so a noisy moment on the "
    "machine hits all of them.",
    "W1 and W2 time the enqueue calls on one open connection in autocommit: jobqueue in "
    "the bench process, a peer inside its driver process (interpreter start-up, imports "
    "and connecting not timed).",
    "W3 times ONE worker process (burst mode, so it exits when the queue is empty) from "
    "spawn to exit, start-up included and nothing subtracted; the start-up row times the "
    "same command on an empty queue. All jobs are checked succeeded afterwards. The slow "
    "systems (marked below) drain --slow-jobs instead of --jobs, so that a run stays short.",
    "W4 runs ONE worker with its default settings, not in burst mode; after one warm-up "
    "job and a pause, the bench enqueues stamp jobs one by one, each committed on its own; "
    "the handler appends the wall-clock time when it starts to a file, and a job's latency "
    "is that time minus the time its enqueue's commit returned to the enqueuer.",
    "W5 and the server-counted W7 rows count statements on the PostgreSQL server: "
    "`ALTER DATABASE <system's bench database> SET log_statement = 'all'` (new connections "
    "to that database only; no restart; `pg_stat_statements` is not loaded on this server), "
    "then the `statement:` and `execute ...:` lines of the server log for that database, "
    "BEGIN and COMMIT included. W5 runs every system's idle worker at the same time, each "
    "on its own database, warms each up with one job, waits, then counts consecutive "
    "windows and multiplies by 86,400 s / window.",
    "W7 in-process (jobqueue only) counts, by statement text, every statement run through "
    "Django's connections by every thread (an execute wrapper on each connection); the "
    "drain uses the worker class in the bench process, with the concurrency shown.",
]


@dataclass
class Measured:
    row: Row
    samples: dict[str, list[float]] = field(default_factory=dict)  # system -> one per run


@dataclass
class Counted:
    counting: Counting
    jobs: int
    samples: dict[str, list[Counter[str]]] = field(default_factory=dict)


def number(value: float, unit: str) -> str:
    if unit in ("jobs/s", "stmt/day"):
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:.2f}"
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
    return info


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def database_version() -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            return f"PostgreSQL {cursor.fetchone()[0]}"
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
    systems: list[str],
    notes: list[str],
) -> str:
    lines = [f"# {title}", "", f"Command: `{command}`", "", "## Machine", ""]
    lines += [f"- {key}: {value}" for key, value in info.items()]

    lines += ["", f"## Results: median of {repeat} runs (min-max)", ""]
    lines += [
        "| | workload | unit | " + " | ".join(systems) + " |",
        "|---|---|---|" + "---:|" * len(systems),
    ]
    measured = sorted(measured, key=lambda m: m.row.key)  # W5 is measured last
    for m in measured:
        row = m.row
        cells = [spread(m.samples[s], row.unit) if m.samples.get(s) else "n/a" for s in systems]
        lines.append(f"| {row.key} | {row.title} | {row.unit} | " + " | ".join(cells) + " |")

    peers = [s for s in systems if s != "jobqueue"]
    if "jobqueue" in systems and peers:
        lines += [
            "",
            "## jobqueue as a ratio to each peer: jobqueue's median / the peer's median",
            "",
            "Above 1 is better for jobqueue where higher is better, worse where lower is.",
            "",
            "| | workload | better | " + " | ".join(f"vs {p}" for p in peers) + " |",
            "|---|---|---|" + "---:|" * len(peers),
        ]
        for m in measured:
            row = m.row
            ours = m.samples.get("jobqueue")
            cells = []
            for peer in peers:
                theirs = m.samples.get(peer)
                if not ours or not theirs or statistics.median(theirs) <= 0:
                    cells.append("n/a")
                else:
                    cells.append(ratio(statistics.median(ours) / statistics.median(theirs)))
            better = "higher" if row.higher_is_better else "lower"
            lines.append(f"| {row.key} | {row.title} | {better} | " + " | ".join(cells) + " |")

    if counted:
        lines += ["", f"## W7: SQL statements per job, counted: median of {repeat} runs", ""]
        lines += [
            "| system | scenario | " + " | ".join(KINDS) + " | total |",
            "|---|---|" + "---:|" * (len(KINDS) + 1),
        ]
        others: list[str] = []
        for c in counted:
            for system, samples in c.samples.items():
                per_job = [kind_totals(s) for s in samples]
                cells = [spread([t[kind] / c.jobs for t in per_job], "per job") for kind in KINDS]
                total = spread([s.total() / c.jobs for s in samples], "per job")
                lines.append(
                    f"| {system} | {c.counting.title} | " + " | ".join(cells) + f" | {total} |"
                )
                per_run = Counter[str]()
                for s in samples:
                    per_run.update({k: v for k, v in s.items() if k.startswith(PER_RUN)})
                if per_run:
                    detail = ", ".join(
                        f"{label} x{count / len(samples):g}"
                        for label, count in sorted(per_run.items())
                    )
                    others.append(f"- {system}, {c.counting.title}: {detail}")
        if others:
            lines += ["", "Heartbeat and other statements, mean count per run:", ""]
            lines += others
    lines += ["", "## Notes", "", *[f"- {note}" for note in [*NOTES, *notes]]]
    return "\n".join(lines) + "\n"
