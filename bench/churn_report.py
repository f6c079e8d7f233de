"""W8's record and tables: what each sample interval measured, one table per system with a
row per interval, and the summaries: the last window against the first, each relation's
size over the last half of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.report import Table, number, ratio

WINDOW = 300.0  # s: the summary's first and last windows, on runs of 10 of them or more
GOAL = 0.15  # the last window within 15% of the first


@dataclass
class Interval:
    """What one sample interval measured; ``end`` is wall-clock time."""

    end: float
    finished: int
    pending: int
    dead: int
    autovacuums: int
    sizes: dict[str, int]
    waits: list[float] = field(default_factory=list)  # s from enqueue to claim
    wait_quantiles: tuple[float, float] | None = None  # from the rows (jobqueue)
    claims: list[float] = field(default_factory=list)  # s each
    prune_seconds: float = 0.0  # the bench's prune (and VACUUM) after the sample
    scan: tuple[int, float] | None = None  # the claim's index scan: buffers, ms (jobqueue)


@dataclass
class Run:
    system: str
    probe_rate: float
    rate: float
    interval: float
    enqueuer: dict[str, Any]
    start_sizes: dict[str, int]
    relations: list[str]  # the jobs table, its indexes, the history tables
    table: str  # the jobs table
    history: tuple[str, ...]  # the history tables
    intervals: list[Interval]
    pruned: int
    settings: str
    fixed: bool = False  # the rate was --churn-rate's, not a share of the drain rate


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _mib(size: int) -> str:
    return f"{size / 2**20:,.2f}"


def _short(relation: str, run: Run) -> str:
    """``jobqueue_job_claim`` -> ``claim``: the index names without their table's (the
    history tables keep theirs)."""
    if relation == run.table or relation in run.history:
        return relation
    return relation.removeprefix(run.table + "_")


def _claim_quantiles(interval: Interval) -> tuple[float, float] | None:
    return (
        (quantile(interval.claims, 0.5), quantile(interval.claims, 0.99))
        if interval.claims
        else None
    )


def _wait_quantiles(interval: Interval) -> tuple[float, float] | None:
    if interval.wait_quantiles is not None:
        return interval.wait_quantiles
    if interval.waits:
        return quantile(interval.waits, 0.5), quantile(interval.waits, 0.99)
    return None


def _ms(value: float | None) -> str:
    return "n/a" if value is None else number(value * 1000, "ms")


def _label(run: Run, k: int) -> str:
    return f"{(k + 1) * run.interval / 60:g}"


def _minute_table(run: Run) -> Table:
    headings = [
        "minute",
        "jobs/s",
        "pending",
        "claim p50, ms",
        "claim p99, ms",
        "claims",
        "wait p50, ms",
        "wait p99, ms",
        "dead rows",
        "autovacuums",
        "prune, s",
        *(["claim scan, buffers", "claim scan, ms"] if run.intervals[0].scan else []),
        *[f"{_short(r, run)}, MiB" for r in run.relations],
    ]
    rows = []
    for k, interval in enumerate(run.intervals):
        claim = _claim_quantiles(interval)
        wait = _wait_quantiles(interval)
        rows.append(
            [
                _label(run, k),
                number(interval.finished / run.interval, "jobs/s"),
                f"{interval.pending:,}",
                _ms(claim and claim[0]),
                _ms(claim and claim[1]),
                f"{len(interval.claims):,}",
                _ms(wait and wait[0]),
                _ms(wait and wait[1]),
                f"{interval.dead:,}",
                str(interval.autovacuums),
                number(interval.prune_seconds, "s"),
                *([f"{interval.scan[0]:,}", f"{interval.scan[1]:.2f}"] if interval.scan else []),
                *[_mib(interval.sizes.get(r, 0)) for r in run.relations],
            ]
        )
    sent = run.enqueuer
    achieved = float(sent["enqueued"]) / max(float(sent["seconds"]), 1e-3)
    return Table(
        key="W8",
        title=f"sustained churn, {run.system}: one row per {run.interval:g} s",
        intro=(
            f"{run.settings}. Its drain rate, measured first: {run.probe_rate:,.0f} jobs/s; "
            f"the enqueuer's target {run.rate:,.0f} jobs/s"
            f"{' (fixed by --churn-rate)' if run.fixed else ''}, achieved "
            f"{achieved:,.0f} jobs/s ({int(sent['enqueued']):,} jobs, its latest batch "
            f"{float(sent['late']) * 1000:,.0f} ms behind the clock). Each row is the "
            f"interval ending at that minute: jobs finished per second, jobs pending at its "
            f"end, the claim's time, the wait from enqueue to claim, the table's dead rows "
            f"and autovacuum count, how long the bench's prune after the sample took, "
            + (
                "the buffers and ms of the claim's scan of its index (`EXPLAIN (ANALYZE, "
                "BUFFERS)` of the claim's `due` query, 68 rows, without FOR UPDATE), "
                if run.intervals[0].scan
                else ""
            )
            + "and the relations' `pg_relation_size` (at the start: "
            + ", ".join(
                f"{_short(r, run)} {_mib(run.start_sizes.get(r, 0))}" for r in run.relations
            )
            + f" MiB). {run.pruned:,} finished jobs were pruned while it ran."
        ),
        headings=headings,
        rows=rows,
    )


def _windows(run: Run) -> tuple[int, str]:
    """The intervals in each summary window, and what the window is called."""
    count = len(run.intervals)
    per_window = round(WINDOW / run.interval)
    if count >= 2 * per_window:
        return per_window, f"{WINDOW / 60:g} minutes"
    return max(1, count // 3), "third"


def _summary(runs: list[Run], vacuum: bool) -> list[Table]:
    rows, growth = [], []
    named = ""
    for run in runs:
        size, named = _windows(run)
        first, last = run.intervals[:size], run.intervals[-size:]
        pooled = []
        for part in (first, last):
            claims = [c for i in part for c in i.claims]
            waits = [q for i in part if (q := _wait_quantiles(i))]
            pooled.append(
                {
                    "drain, jobs/s": sum(i.finished for i in part) / (len(part) * run.interval),
                    "claim p50, ms": quantile(claims, 0.5) * 1000 if claims else None,
                    "claim p99, ms": quantile(claims, 0.99) * 1000 if claims else None,
                    "wait p50, ms (median of the intervals')": (
                        _median([w[0] for w in waits]) * 1000 if waits else None
                    ),
                    "wait p99, ms (median of the intervals')": (
                        _median([w[1] for w in waits]) * 1000 if waits else None
                    ),
                }
            )
        for figure, before in pooled[0].items():
            after = pooled[1][figure]
            unit = "jobs/s" if "jobs/s" in figure else "ms"
            share = after / before if before and after is not None else None
            rows.append(
                [
                    run.system,
                    figure,
                    "n/a" if before is None else number(before, unit),
                    "n/a" if after is None else number(after, unit),
                    "n/a" if share is None else ratio(share),
                    _verdict(share, higher_is_better=unit == "jobs/s"),
                ]
            )
        half = run.intervals[len(run.intervals) // 2 - 1] if len(run.intervals) > 1 else None
        half_sizes = half.sizes if half else run.start_sizes
        half_at = f"{len(run.intervals) // 2 * run.interval / 60:g}"
        end = run.intervals[-1].sizes
        for relation in run.relations:
            was, now = half_sizes.get(relation, 0), end.get(relation, 0)
            growth.append(
                [
                    run.system,
                    relation,
                    _mib(run.start_sizes.get(relation, 0)),
                    f"{_mib(was)} (min {half_at})",
                    _mib(now),
                    f"{(now - was) / was:+.0%}" if was else "n/a",
                ]
            )
    window = "each third of the run" if named == "third" else f"the {named}"
    cleaned = (
        "the bench ran VACUUM on the tables after each prune (--churn-vacuum)"
        if vacuum
        else "nothing but autovacuum vacuumed the tables"
    )
    return [
        Table(
            key="W8",
            title="sustained churn: the last window against the first",
            intro=(
                f"Windows of {window} (runs of 10 minutes or more: 5 minutes; shorter ones, "
                f"--quick's 3 minutes among them: thirds). The drain is the jobs finished in "
                f"the window per second; the claim's p50 and p99 pool every claim of the "
                f"window; the wait's are the median of its intervals' figures. Goal: the last "
                f"window within {GOAL:.0%} of the first (met; beyond it, better or worse)."
            ),
            headings=["system", "figure", "first", "last", "last / first", "goal"],
            rows=rows,
            left=2,
        ),
        Table(
            key="W8",
            title="sustained churn: each relation's size over the last half of the run",
            intro=(
                f"`pg_relation_size` in MiB at the start, at the middle (the sample at half the "
                f"run's intervals, rounded down: the first of --quick's three) and at the end; "
                f"{cleaned}, {_autovacuum()}. Goal: sizes that stop growing."
            ),
            headings=["system", "relation", "start", "middle", "end", "growth, middle to end"],
            rows=growth,
            left=2,
        ),
    ]


def _verdict(share: float | None, higher_is_better: bool) -> str:
    """ "met" within the goal; beyond it, "better" or "worse"."""
    if share is None:
        return "n/a"
    if abs(share - 1) <= GOAL:
        return "met"
    return "better" if (share > 1) == higher_is_better else "worse"


def _median(values: list[float]) -> float:
    return quantile(values, 0.5)


def _autovacuum() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum', "
            "'autovacuum_naptime', 'autovacuum_vacuum_scale_factor', "
            "'autovacuum_vacuum_threshold') ORDER BY name"
        )
        settings = dict(cursor.fetchall())
    if settings.get("autovacuum") != "on":
        return "and autovacuum is OFF on this server (`autovacuum = off`)"
    return "autovacuum on this server: " + ", ".join(
        f"{k} = {v}" for k, v in settings.items() if k != "autovacuum"
    )


def tables(runs: list[Run], vacuum: bool) -> list[Table]:
    """A table per run, then the summaries."""
    if not runs:
        return []
    return [*(_minute_table(run) for run in runs), *_summary(runs, vacuum)]
