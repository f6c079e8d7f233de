"""The chaos soak: ``python bench/soak.py --help`` (see bench/README.md).

N jobs of two tasks, ``on_crash="retry"`` and ``on_crash="park"``, each with two
``ctx.step``s, drain under ONE supervisor (``manage.py runjobs``) while the soak SIGKILLs
its busy workers, pauses one with SIGSTOP for longer than LEASE, restarts PostgreSQL three
times and SIGKILLs the supervisor itself once (then starts a fresh one). Every handler run
records, fenced by its claim token and lease, its start, its steps and its end in a side
table. At the end one table, and a non-zero exit status unless: no job was lost, every
"retry" job succeeded, no "park" job started twice, no two runs of one job overlapped, no
stored step ran again, every job is terminal, and all of the chaos happened.

A calm drain of the same tasks first (``--baseline-jobs``) gives the throughput without
chaos, so that the table can give the chaos throughput as a share of it.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# jobqueue and the bench from the repository, and the example project the bench settings
# extend; the supervisor and its workers get the same through PYTHONPATH.
sys.path[:0] = [str(REPO), str(REPO / "testproject")]

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any, TypeVar  # noqa: E402

from bench import database  # noqa: E402
from bench.chaos import (  # noqa: E402
    Cluster,
    Process,
    SupervisorProcess,
    signal_process,
)

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/jobqueue_soak"
T = TypeVar("T")
OPEN = "('pending', 'running')"  # the statuses of a job that is not finished
TICK = 0.05
POLL = 0.5  # s between looks at the queue's progress
RESTART_MARKS = (0.25, 0.5, 0.75)  # PostgreSQL restarts, as shares of the chaos
SUPERVISOR_MARK = 0.62  # the supervisor's SIGKILL, between the second and third restart
QUIET_AFTER_RESTART = 3.0  # s after a restart before the next one or the supervisor's kill
ORPHAN_GRACE = 15.0  # s an orphaned worker may take to stop: SHUTDOWN_TIMEOUT and a margin


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/soak.py",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--database-url",
        default=DEFAULT_URL,
        help="PostgreSQL; the database is dropped and created, so its name must contain "
        "'soak'; the soak restarts the server that serves it",
    )
    parser.add_argument(
        "--pg-cluster",
        default=os.environ.get("JOBQUEUE_PG_CLUSTER"),
        help="the pg_ctlcluster cluster to restart, e.g. '15 chaos' (default: "
        "JOBQUEUE_PG_CLUSTER, else the local cluster listening on the database's port)",
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs under chaos")
    parser.add_argument("--park-share", type=float, default=0.5, help='share of "park" jobs')
    parser.add_argument(
        "--duration",
        type=float,
        help="s of chaos (default: until drained); jobs left when it ends drain calmly",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="s from the start of the chaos after which the soak gives up waiting for the "
        "drain (and fails: jobs not terminal)",
    )
    parser.add_argument("--kill-every", type=float, default=1.0, help="s between SIGKILLs")
    parser.add_argument(
        "--pause-every", type=float, default=20.0, help="s between SIGSTOP pauses' starts"
    )
    parser.add_argument(
        "--pause-for", type=float, help="s a paused worker stays stopped (default: LEASE + 3)"
    )
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=4, help="threads per process")
    parser.add_argument("--lease", type=float, default=6.0, help="JOBQUEUE['LEASE'], s")
    parser.add_argument(
        "--safety-buffer", type=float, default=2.0, help="JOBQUEUE['SAFETY_BUFFER'], s"
    )
    parser.add_argument(
        "--baseline-jobs",
        type=int,
        default=3_000,
        help="jobs of the calm drain before the chaos (at most --jobs; 0: none)",
    )
    parser.add_argument("--seed", type=int, help="random seed of the chaos (default: random)")
    parser.add_argument("--log", type=Path, help="the supervisors' output (default: a temp file)")
    parser.add_argument(
        "--keep-database", action="store_true", help="leave the soak database for inspection"
    )
    args = parser.parse_args(argv)
    if args.pause_for is None:
        args.pause_for = args.lease + 3.0
    if args.pause_for <= args.lease:
        parser.error("--pause-for must be longer than --lease, or no lease runs out")
    args.baseline_jobs = min(args.baseline_jobs, args.jobs)
    return args


def progress(message: str) -> None:
    stamp = dt.datetime.now().strftime("%H:%M:%S")
    print(f"{stamp} soak: {message}", file=sys.stderr, flush=True)


# -- the database ---------------------------------------------------------------------


def drop_database(config: dict[str, Any]) -> None:
    import psycopg
    from psycopg import sql

    name = sql.Identifier(str(config["NAME"]))
    for _ in range(30):  # the server may be coming back from the last restart
        try:
            with psycopg.connect(**database.server(config), autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
            return
        except psycopg.OperationalError:
            time.sleep(1)
    progress(f"could not drop database {config['NAME']}")


def db(block: Callable[[], T]) -> T | None:
    """Run ``block`` on the soak's own connection; None while the server is away."""
    from django.db import InterfaceError, OperationalError, connection

    try:
        return block()
    except (OperationalError, InterfaceError):
        connection.close()  # reconnect on the next call
        return None


def fetch(sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def wait_for_database(timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while db(lambda: fetch("SELECT 1")) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"PostgreSQL did not come back within {timeout:g} s")
        time.sleep(0.2)


def set_up_tables() -> None:
    from django.core.management import call_command

    from bench.soakapp import records

    call_command("migrate", verbosity=0)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(records.SCHEMA)


def empty_tables() -> None:
    from django.db import connection

    from bench.soakapp import records

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE jobqueue_job, jobqueue_worker, {records.TABLE} RESTART IDENTITY")


def enqueue(jobs: int, park_share: float) -> list[int]:
    """Enqueue ``jobs`` jobs in bulk, the two policies interleaved in the claim order."""
    from django.db import connection

    from bench.soakapp.tasks import soak_park, soak_retry

    ids: list[int] = []
    chunk = 500
    for start in range(0, jobs, chunk):
        size = min(chunk, jobs - start)
        parks = round(size * park_share)
        for bound, count, first in (
            (soak_retry, size - parks, start),
            (soak_park, parks, start + size - parks),
        ):
            if count:
                made = bound.enqueue_many([(n,) for n in range(first, first + count)])
                ids.extend(job.pk for job in made if job is not None)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")  # a stable plan for the claim
    return ids


def unfinished() -> int | None:
    rows = db(lambda: fetch(f"SELECT count(*) FROM jobqueue_job WHERE status IN {OPEN}"))
    return None if rows is None else int(rows[0][0])


def ready_pids() -> set[int] | None:
    """Pids of workers that registered and hold a running job (busy), or else registered."""
    rows = db(
        lambda: fetch(
            "SELECT w.pid, bool_or(j.id IS NOT NULL) FROM jobqueue_worker AS w "
            "LEFT JOIN jobqueue_job AS j ON j.worker = w.id AND j.status = 'running' "
            "GROUP BY w.pid"
        )
    )
    if rows is None:
        return None
    busy = {int(pid) for pid, running in rows if running}
    return busy or {int(pid) for pid, _ in rows}


# -- the runs -------------------------------------------------------------------------


def worker_env(settings: dict[str, Any]) -> dict[str, str]:
    return {
        **os.environ,
        "JOBQUEUE_SOAK_SETTINGS": json.dumps(settings),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "testproject")]),
        "PYTHONUNBUFFERED": "1",
    }


def calm_drain(args: argparse.Namespace, env: dict[str, str]) -> float:
    """Drain ``--baseline-jobs`` jobs with no chaos: jobs/s from first start to last finish."""
    empty_tables()
    ids = enqueue(args.baseline_jobs, args.park_share)
    progress(f"baseline: {len(ids)} jobs, no chaos")
    supervisor = SupervisorProcess(env, args.log)
    deadline = time.monotonic() + args.timeout
    try:
        while (left := unfinished()) != 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"soak: the calm drain did not finish ({left} jobs left)")
            time.sleep(0.2)
    finally:
        supervisor.stop()
    rate = throughput(None)
    progress(f"baseline: {rate:.0f} jobs/s")
    return rate


def throughput(until: dt.datetime | None) -> float:
    """Jobs finished per second from the first recorded start (to ``until``, if given)."""
    from bench.soakapp import records

    rows = fetch(
        f"SELECT count(*), extract(epoch FROM coalesce(%(until)s, max(finished_at)) "
        f"  - (SELECT min(at) FROM {records.TABLE})) "
        "FROM jobqueue_job WHERE finished_at IS NOT NULL "
        "AND (%(until)s::timestamptz IS NULL OR finished_at <= %(until)s)",
        {"until": until},
    )
    count, seconds = rows[0]
    return float(count) / float(seconds) if seconds else 0.0


@dataclass
class Pause:
    process: Process
    until: float


@dataclass
class Chaos:
    """What was done, and when; the soak's loop drives it one tick at a time."""

    args: argparse.Namespace
    cluster: Cluster
    env: dict[str, str]
    supervisor: SupervisorProcess
    rng: random.Random
    started: float = field(default_factory=time.monotonic)
    kills: int = 0
    kills_missed: int = 0  # ticks with no ready worker to kill (the pool was down)
    pauses: int = 0
    supervisor_kills: int = 0
    orphans: dict[Process, float | None] = field(default_factory=dict)  # -> s until exit
    orphaned_at: float = 0.0
    pause: Pause | None = None
    next_kill: float = 0.0
    next_pause: float = 0.0
    restart_ended: float = 0.0
    ready: set[int] = field(default_factory=set)
    seconds: float = 0.0  # how long the chaos lasted, once it is over
    log_offset: int = 0  # where the chaos's part of the supervisors' output begins

    def __post_init__(self) -> None:
        self.next_kill = self.started + self.args.kill_every
        self.next_pause = self.started + min(3.0, self.args.pause_every)

    def elapsed(self, now: float) -> float:
        return now - self.started

    def tick(self, now: float, share_done: float) -> None:
        """One step of chaos; ``share_done`` is how far the chaos is, 0 to 1."""
        restarting = self.cluster.restarting()
        if not restarting and self.cluster.restarts and not self.restart_ended:
            self.restart_ended = now
        quiet = not restarting and now - self.restart_ended >= QUIET_AFTER_RESTART
        if self.pause is not None and now >= self.pause.until:
            self._resume()
        if now >= self.next_kill:
            self.next_kill += self.args.kill_every
            self._kill_a_worker()
        if self.pause is None and now >= self.next_pause:
            self.next_pause = now + self.args.pause_every
            self._pause_a_worker(now)
        restarts = self.cluster.restarts
        # The order is fixed: two restarts, the supervisor's kill, the third restart.
        if (
            quiet
            and restarts < len(RESTART_MARKS)
            and share_done >= RESTART_MARKS[restarts]
            and (restarts < 2 or self.supervisor_kills)
        ):
            progress(f"restarting PostgreSQL ({self.cluster}), {restarts + 1}")
            self.cluster.start_restart()
            self.restart_ended = 0.0
        elif (
            quiet and not self.supervisor_kills and restarts >= 2 and share_done >= SUPERVISOR_MARK
        ):
            self._kill_the_supervisor(now)
        self._watch_orphans(now)

    def done(self) -> bool:
        """Has every kind of chaos happened at least once?"""
        return bool(
            self.cluster.restarts == len(RESTART_MARKS)
            and not self.cluster.restarting()
            and self.supervisor_kills
            and self.pauses
            and self.kills
        )

    def end(self) -> None:
        if self.pause is not None:
            self._resume()

    def _candidates(self) -> list[Process]:
        ready = ready_pids()
        if ready is not None:  # else PostgreSQL is away: the last known ready workers
            self.ready = ready
        paused = self.pause.process if self.pause else None
        return [p for p in self.supervisor.workers() if p.pid in self.ready and p != paused]

    def _kill_a_worker(self) -> None:
        candidates = self._candidates()
        if not candidates:
            self.kills_missed += 1
            return
        victim = self.rng.choice(candidates)
        if signal_process(victim, signal.SIGKILL):
            self.kills += 1

    def _pause_a_worker(self, now: float) -> None:
        candidates = self._candidates()
        if not candidates:
            self.next_pause = now + 1.0  # try again soon
            return
        victim = self.rng.choice(candidates)
        if signal_process(victim, signal.SIGSTOP):
            self.pause = Pause(victim, now + self.args.pause_for)
            self.pauses += 1
            progress(f"paused worker {victim.pid} for {self.args.pause_for:g} s")

    def _resume(self) -> None:
        assert self.pause is not None
        signal_process(self.pause.process, signal.SIGCONT)
        self.pause = None

    def _kill_the_supervisor(self, now: float) -> None:
        if self.pause is not None:
            # A stopped orphan could not notice its parent's death: end the pause first.
            self._resume()
        orphans = self.supervisor.kill()
        self.supervisor_kills += 1
        self.orphaned_at = now
        self.restart_ended = now  # the fresh supervisor gets the quiet a restart gets
        self.orphans = dict.fromkeys(orphans)
        progress(
            f"killed the supervisor {self.supervisor.pid}; its workers "
            f"{', '.join(str(p.pid) for p in orphans) or '(none)'} must stop by themselves"
        )
        self.supervisor = SupervisorProcess(self.env, self.args.log)
        progress(f"started a fresh supervisor {self.supervisor.pid}")

    def _watch_orphans(self, now: float) -> None:
        for process, ended in self.orphans.items():
            if ended is None and not process.alive():
                self.orphans[process] = now - self.orphaned_at


def chaos_drain(
    args: argparse.Namespace, cluster: Cluster, env: dict[str, str]
) -> tuple[Chaos, list[int], float, dt.datetime]:
    """Enqueue ``--jobs`` and drain them under chaos; return what was done and when."""
    empty_tables()
    ids = enqueue(args.jobs, args.park_share)
    progress(
        f"chaos: {len(ids)} jobs, a SIGKILL every {args.kill_every:g} s, "
        f"{'until drained' if args.duration is None else f'for {args.duration:g} s'}"
    )
    began = dt.datetime.now(dt.UTC)
    log_offset = args.log.stat().st_size if args.log.exists() else 0
    chaos = Chaos(args, cluster, env, SupervisorProcess(env, args.log), random.Random(args.seed))
    chaos.log_offset = log_offset
    deadline = chaos.started + args.timeout
    left: int | None = len(ids)
    chaos_over = None
    next_look = last_report = 0.0
    try:
        while True:
            now = time.monotonic()
            if now >= next_look:
                next_look = now + POLL
                looked = unfinished()
                left = looked if looked is not None else left
                if left == 0:
                    break
            if now > deadline:
                progress(f"gave up after {args.timeout:g} s: {left} jobs not terminal")
                break
            over_time = args.duration is not None and chaos.elapsed(now) >= args.duration
            if chaos_over is None and over_time:
                chaos.end()
                chaos_over = dt.datetime.now(dt.UTC)
                progress(f"chaos over after {args.duration:g} s; {left} jobs left drain calmly")
            if chaos_over is None:
                share = 1 - (left or 0) / max(len(ids), 1)
                if args.duration is not None:
                    share = max(share, chaos.elapsed(now) / args.duration)
                chaos.tick(now, share)
            if now - last_report >= 10:
                last_report = now
                progress(
                    f"{chaos.elapsed(now):.0f} s: {left} left, {chaos.kills} kills "
                    f"({chaos.kills_missed} ticks with no ready worker), {chaos.pauses} "
                    f"pauses, {cluster.restarts} restarts, {chaos.supervisor_kills} "
                    "supervisor kill(s)"
                )
            time.sleep(TICK)
    finally:
        chaos.end()
        cluster.wait()
    if chaos_over is None:
        chaos_over = dt.datetime.now(dt.UTC)
    chaos.seconds = (chaos_over - began).total_seconds()
    # Orphans get SHUTDOWN_TIMEOUT to hand their jobs back; give them that and a margin.
    limit = time.monotonic() + ORPHAN_GRACE
    while any(e is None for e in chaos.orphans.values()) and time.monotonic() < limit:
        chaos._watch_orphans(time.monotonic())
        time.sleep(0.1)
    for process, ended in chaos.orphans.items():
        if ended is None:  # a leaked worker would go on claiming jobs after the soak
            progress(f"orphaned worker {process.pid} is still running; killing it")
            signal_process(process, signal.SIGKILL)
    code = chaos.supervisor.stop()
    progress(f"the supervisor stopped with exit status {code}")
    wait_for_database()
    return chaos, ids, chaos.elapsed(time.monotonic()), chaos_over


# -- the checks and the table ---------------------------------------------------------


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


# -- main -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    config = database.checked(args.database_url, "soak", "the soak drops it")
    if config["ENGINE"] != database.POSTGRESQL:
        sys.exit("soak: PostgreSQL only (it restarts the server)")
    cluster = (
        Cluster(args.pg_cluster)
        if args.pg_cluster
        else Cluster.serving(int(config.get("PORT") or 5432))
    )
    if args.log is None:
        args.log = Path(tempfile.mkstemp(prefix="jobqueue-soak-", suffix=".log")[1])
    settings = {
        "LEASE": args.lease,
        "SAFETY_BUFFER": args.safety_buffer,
        "MAX_CRASHES": 1000,  # every "retry" job must get through whatever the soak does
        "TIMEOUT": 60,  # far above a run's few milliseconds, even on a loaded machine
        "SHUTDOWN_TIMEOUT": 3,
        "POOLS": {
            "default": {
                "queues": "*",
                "processes": args.processes,
                "concurrency": args.concurrency,
            }
        },
    }
    database.use(args.database_url, "bench.soak_settings")
    os.environ["JOBQUEUE_SOAK_SETTINGS"] = json.dumps(settings)
    # A `timeout` or Ctrl-C ends the soak through the finally blocks: the paused worker is
    # continued, the supervisor stopped and the database dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("soak: terminated"))
    progress(
        f"database {config['NAME']} on {config.get('HOST')}:{config.get('PORT')}, "
        f"cluster {cluster}; supervisors' output in {args.log}"
    )
    database.create(config, replace=True, wait=120)
    try:
        import django

        django.setup()
        set_up_tables()
        env = worker_env(settings)
        baseline = calm_drain(args, env) if args.baseline_jobs else None
        chaos, ids, seconds, over = chaos_drain(args, cluster, env)
        chaos_rate = throughput(over)
        held = checks(ids)
        complete = chaos.done()
        held["all of the chaos happened"] = (
            complete,
            "kills, a pause, 3 restarts and the supervisor's kill"
            if complete
            else "too few jobs or too short a --duration for all of it",
        )
        orphans_gone = all(s is not None for s in chaos.orphans.values())
        held["orphaned workers stopped by themselves"] = (
            orphans_gone,
            f"{sum(s is not None for s in chaos.orphans.values())} of {len(chaos.orphans)}",
        )
        print(table(args, cluster, chaos, ids, seconds, chaos_rate, baseline, held))
        passed = all(ok for ok, _ in held.values())
        print(f"result: {'PASS' if passed else 'FAIL'}")
        return 0 if passed else 1
    finally:
        from django.db import connections

        connections.close_all()
        for supervisor in SupervisorProcess.started:  # nothing of ours outlives the soak
            supervisor.stop()
        if not args.keep_database:
            drop_database(config)


if __name__ == "__main__":
    sys.exit(main())
