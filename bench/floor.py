"""W11: how fast can the database alone drain? ``python bench/run.py --only W11``.

W3 compares jobqueue's drain with raw-100, a loop that locks 100 jobs, runs them and marks
them succeeded in one transaction. That loop never records that a job started, so a crash
mid-batch simply rolls the batch back: no lease, no token, no fence, no parking. W11
measures, with no worker and no job code, how fast the database drains ``--floor-jobs``
no-op jobs, 100 per statement, on each of ``--floor-connections`` connections:

- raw-100: the bench's own raw driver (``bench/peers/peer_raw.py``);
- a durable claim on a minimal table: the claim commits (status, token, lease) before the
  job runs, and the next statement records the successes, fenced by token, with the next
  claim, as jobqueue's does, on a table with nothing else;
- jobqueue's own claim statement on jobqueue's table, sent through Django's cursor;
- and, for the distance from that floor, jobqueue's worker, in-process, default pool.

Each is repeated ``--repeat`` times: median (min-max) jobs/s, and the CPU it cost per job
on the server (every local ``postgres`` process, read from /proc; "n/a" if the server is
not on this host) and in this process. A drain that leaves any job unfinished is an error.
PostgreSQL only; the drains' own tables (``raw_job``, ``floor_job``) are dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from bench import procfs
from bench.report import Table, number, progress, ratio, spread
from bench.systems.base import REPO
from bench.workload import BenchError

PEERS = REPO / "bench" / "peers"
BATCH = 100
# A backend's CPU time moves into the postmaster's count of its children once the postmaster
# has reaped it, a moment after its connection closes.
SETTLE = 0.2

DURABLE_SCHEMA = """
DROP TABLE IF EXISTS floor_job;
CREATE TABLE floor_job (
    id bigserial PRIMARY KEY,
    task text NOT NULL,
    args jsonb NOT NULL,
    status text NOT NULL DEFAULT 'pending',
    token text,
    lease_until timestamptz,
    started_at timestamptz,
    finished_at timestamptz
);
CREATE INDEX floor_job_pending ON floor_job (id) WHERE status = 'pending';
CREATE INDEX floor_job_lease ON floor_job (lease_until) WHERE status = 'running';
"""
DURABLE_LOAD = """
INSERT INTO floor_job (task, args)
SELECT 'noop', jsonb_build_array(i) FROM generate_series(1, %(jobs)s) AS i
"""
# The least a durable claim can write: successes fenced by token, and the next jobs marked
# running with a token and a lease, in one statement (one commit) as jobqueue's writer does.
DURABLE_CLAIM = """
WITH done AS (
    UPDATE floor_job AS job
    SET status = 'succeeded', lease_until = NULL, finished_at = now()
    FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS done(id, token)
    WHERE job.id = ANY(%(ids)s::bigint[])
      AND job.id = done.id AND job.token = done.token AND job.lease_until > now()
    RETURNING job.id
),
picked AS MATERIALIZED (
    -- The reference to done makes the successes go first. With the claim's locks taken
    -- first, four connections deadlocked within a few thousand statements here.
    SELECT id FROM floor_job
    WHERE status = 'pending' AND (SELECT count(*) FROM done) >= 0
    ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE floor_job AS job
    SET status = 'running', token = md5(random()::text),
        lease_until = now() + interval '30 seconds', started_at = now()
    FROM picked WHERE job.id = picked.id
    RETURNING job.id, job.token, job.task, job.args
)
SELECT (SELECT count(*) FROM done), claimed.id, claimed.token
FROM (SELECT) AS one LEFT JOIN claimed ON true
"""


class Drain:
    """One way of draining: ``load()`` fills ``table``, ``drain()`` runs on each connection
    until nothing is left, ``finished()`` counts the jobs marked succeeded."""

    label: str
    table: str

    def load(self, jobs: int) -> None:
        raise NotImplementedError

    def drain(self) -> None:
        raise NotImplementedError

    def finished(self) -> int:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {self.table} WHERE status = 'succeeded'")
            return int(cursor.fetchone()[0])


class RawDrain(Drain):
    label = "raw-100: lock, run and mark succeeded in one transaction"
    table = "raw_job"

    def __init__(self) -> None:
        # The driver reads its database and its batch when it is imported. The peers' own
        # processes are unaffected: each gets both from the peer's settings.
        os.environ["BENCH_DSN"] = os.environ["DATABASE_URL"]
        os.environ["BENCH_RAW_BATCH"] = str(BATCH)
        if str(PEERS) not in sys.path:
            sys.path.append(str(PEERS))  # the driver imports its _common as a top module
        import peer_raw  # the very driver the W3 raw-100 row runs

        self.peer = peer_raw
        self.peer.setup(None)

    def load(self, jobs: int) -> None:
        self.peer.reset(None)
        self.peer.enqueue(argparse.Namespace(bulk=True, jobs=jobs))
        _analyze("raw_job")

    def drain(self) -> None:
        self.peer.drain(burst=True)


class DurableDrain(Drain):
    label = "durable claim, minimal table: claim committed, then success fenced by token"
    table = "floor_job"

    def __init__(self) -> None:
        _execute(DURABLE_SCHEMA)

    def load(self, jobs: int) -> None:
        _execute("TRUNCATE floor_job RESTART IDENTITY")
        _execute(DURABLE_LOAD, {"jobs": jobs})
        _analyze("floor_job")

    def drain(self) -> None:
        from django.db import connection

        done: list[tuple[int, str]] = []
        with connection.cursor() as cursor:
            while True:
                ids, tokens = [d[0] for d in done], [d[1] for d in done]
                cursor.execute(DURABLE_CLAIM, {"ids": ids, "tokens": tokens, "limit": BATCH})
                done = [(row[1], row[2]) for row in cursor.fetchall() if row[1] is not None]
                if not done:
                    return


class ClaimStatementDrain(Drain):
    label = "jobqueue's claim statement on its table, through Django's cursor, no worker"
    table = "jobqueue_job"

    def load(self, jobs: int) -> None:
        _load_jobqueue(jobs)

    def drain(self) -> None:
        from bench.benchapp.tasks import noop
        from jobqueue.sql import Queries

        queries = Queries("default")
        selection = {
            "task_names": queries.names([noop.name]),
            "all_queues": True,
            "queues": queries.names([]),
            "excluded": queries.names([]),
        }
        done: list[tuple[int, str]] = []
        while True:
            # Through the vendor wrapper the worker's writer uses (one statement on
            # PostgreSQL), not the statement's raw rows, whose leading columns carry the
            # matched successes and the next due time.
            _, claimed, _ = queries.record_and_claim(
                {
                    **selection,
                    "done": json.dumps([{"id": i, "token": t, "result": None} for i, t in done]),
                    "done_ids": queries.ids([i for i, _ in done]),
                    "started": "[]",
                    "started_ids": queries.ids([]),
                    "buffer": 5,
                    "worker": "floor",
                    "limit": BATCH,
                    "ahead": 0,
                    "max_crashes": 3,
                    "lease": 300,
                },
                done=bool(done),
                started=False,
                claiming=True,
            )
            # (id, task_name, queue, ..., token, steps, held), as Store reads a claimed job
            done = [(row[0], row[9]) for row in claimed]
            if not done:
                return


class WorkerDrain(ClaimStatementDrain):
    label = "jobqueue's worker, in-process, default pool (one writer connection)"

    def drain(self) -> None:
        from jobqueue.runtime.worker import Worker

        if Worker(burst=True).run():
            raise BenchError("the worker failed")


def floor(jobs: int, connections: list[int], repeat: int) -> Table:
    """Every drain on each number of connections, then the worker; the W11 table."""
    results = []
    try:
        drains: list[Drain] = [RawDrain(), DurableDrain(), ClaimStatementDrain()]
        runs_of = [(kind, conns, str(conns)) for kind in drains for conns in connections]
        for kind, conns, shown in [*runs_of, (WorkerDrain(), 1, "1 + slots")]:
            runs = []
            for run in range(1, repeat + 1):
                runs.append(_measure(kind, jobs, conns))
                rate = runs[-1]["jobs/s"] or 0
                progress(f"W11 {kind.label} [connections: {shown}] run {run}: {rate:,.0f} jobs/s")
            results.append((kind.label, shown, runs))
    finally:
        _execute("DROP TABLE IF EXISTS raw_job, floor_job")
    return table(results, jobs, repeat)


def _measure(kind: Drain, jobs: int, connections: int) -> dict[str, float | None]:
    kind.load(jobs)
    threads = [threading.Thread(target=_on_own_connection(kind.drain)) for _ in range(connections)]
    server_before, client_before = _server_cpu(), _client_cpu()
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    client_after = _client_cpu()
    time.sleep(SETTLE)
    server_after = _server_cpu()
    finished = kind.finished()
    if finished != jobs:
        raise BenchError(f"{kind.label}: {finished} of {jobs} jobs succeeded")
    server = (
        None
        if server_before is None or server_after is None
        else (server_after - server_before) / jobs * 1e6
    )
    return {
        "jobs/s": jobs / seconds,
        "server us/job": server,
        "client us/job": (client_after - client_before) / jobs * 1e6,
    }


def _on_own_connection(block: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        from django.db import connections

        try:
            block()
        finally:
            connections.close_all()  # this thread's

    return run


def _server_cpu() -> float | None:
    return procfs.postgres_cpu()


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _load_jobqueue(jobs: int) -> None:
    from bench.benchapp.tasks import noop

    _execute("TRUNCATE jobqueue_job, jobqueue_worker")
    noop.enqueue_many([(i,) for i in range(jobs)])
    _analyze("jobqueue_job")


def _execute(sql: str, params: dict[str, Any] | None = None) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _analyze(table: str) -> None:
    _execute(f"VACUUM ANALYZE {table}")


def table(
    results: list[tuple[str, str, list[dict[str, float | None]]]], jobs: int, repeat: int
) -> Table:
    """The W11 table: each drain's median rate as a share of raw-100's and of the durable
    floor's on as many connections (the worker's: on one), its CPU per job, and that CPU
    (server and client) as a multiple of the durable floor's."""
    raw = {conns: runs for label, conns, runs in results if label == RawDrain.label}
    durable = {conns: runs for label, conns, runs in results if label == DurableDrain.label}
    rows = []
    for label, conns, runs in results:
        rates = [float(run["jobs/s"] or 0) for run in runs]
        server = _medians(runs, "server us/job")
        client = _medians(runs, "client us/job")
        floor_runs = durable.get(conns) or durable.get("1")
        floor_cpu = _cpu(floor_runs) if floor_runs else None
        cpu = _cpu(runs)
        rows.append(
            [
                label,
                conns,
                spread(rates, "jobs/s"),
                _share(rates, raw.get(conns) or raw.get("1")),
                _share(rates, floor_runs),
                number(server, "us/job") if server is not None else "n/a",
                number(client, "us/job") if client is not None else "n/a",
                ratio(cpu / floor_cpu) if cpu is not None and floor_cpu else "n/a",
            ]
        )
    return Table(
        key="W11",
        title="the drain floor: the database alone, no job code",
        intro=f"Drain of {jobs:,} no-op jobs, {BATCH} per statement; medians of {repeat} "
        "(min-max). CPU per job: median. The durable floor is the durable claim on the "
        "minimal table, on as many connections (the worker's row: on one); its CPU is the "
        "server's and the client's together.",
        headings=[
            "drain",
            "connections",
            "jobs/s",
            "share of raw-100",
            "share of the durable floor",
            "server CPU us/job",
            "client CPU us/job",
            "CPU per job, x the floor's",
        ],
        rows=rows,
        after=[f"Every drain finished all {jobs:,} jobs."],
    )


def _medians(runs: list[dict[str, float | None]], key: str) -> float | None:
    values = [float(run[key] or 0) for run in runs if run[key] is not None]
    return statistics.median(values) if values else None


def _cpu(runs: list[dict[str, float | None]]) -> float | None:
    """The median CPU per job, server and client together; None without the server's."""
    server, client = _medians(runs, "server us/job"), _medians(runs, "client us/job")
    return None if server is None or client is None else server + client


def _share(rates: list[float], baseline: list[dict[str, float | None]] | None) -> str:
    if not baseline:
        return "n/a"
    base = statistics.median(float(r["jobs/s"] or 0) for r in baseline)
    return ratio(statistics.median(rates) / base) if base else "n/a"
