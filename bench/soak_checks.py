"""What the soak found: the promises checked against the rows and the side table of
fenced records, each with a line of evidence, and the one table it prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.chaos import Cluster
from bench.soak_chaos import Chaos
from bench.soak_jobs import OPEN, fetch


def checks(ids: list[int]) -> dict[str, tuple[bool, str]]:
    """The promises, each with a line of evidence: name -> (held, detail)."""
    from bench.soakapp import records

    table = records.TABLE
    found = fetch("SELECT count(*) FROM jobqueue_job WHERE id = ANY(%s)", [ids])[0][0]
    retry_left = fetch(
        "SELECT status, count(*) FROM jobqueue_job WHERE task_name = 'soak.retry' "
        "AND status <> 'succeeded' GROUP BY status ORDER BY status"
    )
    park_twice = fetch(
        f"SELECT count(*) FROM (SELECT r.job_id FROM {table} AS r "
        "JOIN jobqueue_job AS j ON j.id = r.job_id "
        "WHERE j.task_name = 'soak.park' AND r.kind = 'start' "
        "GROUP BY r.job_id HAVING count(*) > 1) AS twice"
    )[0][0]
    # A run is a token: its first row (the fenced start) to its last fenced row. Sorted by
    # start, each run of a job must begin after every earlier run's last row.
    overlaps, bad_tokens = fetch(
        f"""
        WITH runs AS (
            SELECT job_id, token, min(at) FILTER (WHERE kind = 'start') AS began,
                   max(at) AS last, count(*) FILTER (WHERE kind = 'start') AS starts
            FROM {table} GROUP BY job_id, token
        ), ordered AS (
            SELECT began, starts, max(last) OVER (
                PARTITION BY job_id ORDER BY began, token
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
            FROM runs
        )
        SELECT count(*) FILTER (WHERE began <= before), count(*) FILTER (WHERE starts <> 1)
        FROM ordered
        """
    )[0]
    # A stored step names the run that executed it: that run's execution must be recorded,
    # and no run may have executed the step after it.
    steps_again, steps_unrecorded = fetch(
        f"""
        WITH stored AS (
            SELECT j.id AS job_id, s.name, s.token
            FROM jobqueue_job AS j CROSS JOIN LATERAL jsonb_each_text(j.steps) AS s(name, token)
        )
        SELECT
            (SELECT count(*) FROM stored
             JOIN {table} AS done ON done.job_id = stored.job_id AND done.kind = 'step'
                  AND done.step = stored.name AND done.token = stored.token
             JOIN {table} AS again ON again.job_id = stored.job_id AND again.kind = 'step'
                  AND again.step = stored.name AND again.at > done.at),
            (SELECT count(*) FROM stored WHERE NOT EXISTS (
                SELECT 1 FROM {table} AS done WHERE done.job_id = stored.job_id
                AND done.kind = 'step' AND done.step = stored.name
                AND done.token = stored.token))
        """
    )[0]
    open_jobs = fetch(f"SELECT count(*) FROM jobqueue_job WHERE status IN {OPEN}")[0][0]
    total = fetch("SELECT count(*) FROM jobqueue_job")[0][0]
    return {
        "no job lost": (
            found == len(ids) and total == len(ids),
            f"{found} of {len(ids)} enqueued ids found, {total} rows",
        ),
        'every "retry" job succeeded': (
            not retry_left,
            ", ".join(f"{n} {status}" for status, n in retry_left) or "all succeeded",
        ),
        'no "park" job started twice': (park_twice == 0, f"{park_twice} started twice"),
        "no two runs of one job overlapped": (
            overlaps == 0 and bad_tokens == 0,
            f"{overlaps} overlaps, {bad_tokens} claims started other than once",
        ),
        "no finished step ran twice": (
            steps_again == 0 and steps_unrecorded == 0,
            f"{steps_again} ran again after being stored, {steps_unrecorded} stored by no run",
        ),
        "every job is terminal": (open_jobs == 0, f"{open_jobs} pending or running"),
    }


def counts() -> dict[str, Any]:
    from bench.soakapp import records

    by_status = dict(
        fetch("SELECT task_name || ' ' || status, count(*) FROM jobqueue_job GROUP BY 1")
    )
    status = dict(fetch("SELECT status, count(*) FROM jobqueue_job GROUP BY 1"))
    runs, ended, jobs_rerun = fetch(
        f"SELECT count(*) FILTER (WHERE kind = 'start'), count(*) FILTER (WHERE kind = 'end'), "
        f"(SELECT count(*) FROM (SELECT job_id FROM {records.TABLE} WHERE kind = 'start' "
        "GROUP BY job_id HAVING count(*) > 1) AS again) "
        f"FROM {records.TABLE}"
    )[0]
    crashes = fetch("SELECT coalesce(sum(crashes), 0) FROM jobqueue_job")[0][0]
    # A crash mostly stands for a run cut short: a recorded start without a recorded end.
    # Beyond that: a kill between a job's claim and its run's first row, or between the
    # run's last row and the write of its success, or a crash counted for a job held
    # unstarted (claimed ahead of the slots), which the worker never marked started.
    unexplained, parked_unstarted, parked_never_started = fetch(
        f"""
        WITH per_job AS (
            SELECT j.id, j.crashes, j.task_name, j.status, j.started_at,
                   count(r.id) FILTER (WHERE r.kind = 'start') AS starts,
                   count(r.id) FILTER (WHERE r.kind = 'end') AS ends
            FROM jobqueue_job AS j LEFT JOIN {records.TABLE} AS r ON r.job_id = j.id
            GROUP BY j.id
        ), parked AS (
            SELECT * FROM per_job
            WHERE task_name = 'soak.park' AND status = 'abandoned' AND starts = 0
        )
        SELECT (SELECT coalesce(sum(greatest(crashes - (starts - ends), 0)), 0) FROM per_job),
               (SELECT count(*) FROM parked),
               (SELECT count(*) FROM parked WHERE started_at IS NULL)
        """
    )[0]
    return {
        "by_status": by_status,
        "status": status,
        "runs": runs,
        "ended": ended,
        "rerun": jobs_rerun,
        "crashes": crashes,
        "unexplained": unexplained,
        "parked_unstarted": parked_unstarted,
        "parked_never_started": parked_never_started,
    }


def stopped_runs(log: Path, offset: int) -> tuple[int, int]:
    """Runs the soak's fence stopped, as the workers logged them past ``offset`` (the
    chaos's part of the log): (refused because the run no longer owned its job, stopped by
    a database error)."""
    try:
        with log.open("rb") as file:
            file.seek(offset)
            text = file.read().decode(errors="replace")
    except OSError:
        return 0, 0
    refused = text.count("no longer owns it")
    return refused, text.count("outcome discarded: soak: job ") - refused


def table(
    args: argparse.Namespace,
    cluster: Cluster,
    chaos: Chaos,
    ids: list[int],
    seconds: float,
    chaos_rate: float,
    baseline: float | None,
    held: dict[str, tuple[bool, str]],
) -> str:
    numbers = counts()
    status, by = numbers["status"], numbers["by_status"]
    orphans = chaos.orphans
    exited = [s for s in orphans.values() if s is not None]
    chaos_seconds = chaos.seconds
    rows: list[tuple[str, str]] = [
        (
            "jobs",
            f"{len(ids)} ({by_total(by, 'soak.retry')} retry, {by_total(by, 'soak.park')} park)",
        ),
        (
            "pool",
            f"{args.processes} processes x {args.concurrency} threads, LEASE {args.lease:g} s, "
            f"SAFETY_BUFFER {args.safety_buffer:g} s",
        ),
        (
            "runs (fenced starts)",
            f"{numbers['runs']} ({numbers['ended']} ended, "
            f"{numbers['rerun']} jobs ran more than once)",
        ),
        (
            "crashes counted",
            f"{numbers['crashes']} ({numbers['unexplained']} beyond the runs cut short: "
            "killed between claim and first record or last record and success, or held)",
        ),
        (
            "worker SIGKILLs",
            f"{chaos.kills} ({chaos.kills / max(chaos_seconds, 1e-9):.2f}/s; "
            f"{chaos.kills_missed} ticks found no ready worker)",
        ),
        ("SIGSTOP pauses", f"{chaos.pauses} of {args.pause_for:g} s"),
        (
            "runs stopped by the soak's fence",
            "{} no longer owned their job, {} met a database error (workers' log)".format(
                *stopped_runs(args.log, chaos.log_offset)
            ),
        ),
        (
            "PostgreSQL restarts",
            f"{cluster.restarts} ({cluster}"
            f"{'; failed: ' + '; '.join(cluster.failures) if cluster.failures else ''})",
        ),
        (
            "supervisor SIGKILLs",
            f"{chaos.supervisor_kills} ({len(exited)} of {len(orphans)} "
            "orphaned workers exited by themselves"
            + (f", the last after {max(exited):.1f} s)" if exited else ")"),
        ),
        ("succeeded", f"{status.get('succeeded', 0)} ({by.get('soak.park succeeded', 0)} park)"),
        ("failed", f"{status.get('failed', 0)} ({by.get('soak.park failed', 0)} park)"),
        (
            "abandoned",
            f"{status.get('abandoned', 0)} ({by.get('soak.park abandoned', 0)} park, "
            f"{numbers['parked_unstarted']} never recorded a start, "
            f"{numbers['parked_never_started']} never marked started by the worker)",
        ),
        ("pending or running", str(status.get("pending", 0) + status.get("running", 0))),
        ("time", f"{seconds:.0f} s ({chaos_seconds:.0f} s of chaos)"),
        ("throughput under chaos", f"{chaos_rate:.1f} jobs/s"),
    ]
    if baseline:
        rows.append(
            (
                "throughput without chaos",
                f"{baseline:.1f} jobs/s (--baseline-jobs {args.baseline_jobs})",
            )
        )
        rows.append(("under chaos / without", f"{100 * chaos_rate / baseline:.0f} %"))
    for name, (ok, detail) in held.items():
        rows.append((name, f"{'ok' if ok else 'FAILED'}: {detail}"))
    width = max(len(name) for name, _ in rows)
    lines = [f"| {'':{width}} | value |", f"|{'-' * (width + 2)}|-------|"]
    lines += [f"| {name:{width}} | {value} |" for name, value in rows]
    return "\n".join(lines)


def by_total(by_status: dict[str, int], task_name: str) -> int:
    return sum(n for key, n in by_status.items() if key.startswith(task_name + " "))
