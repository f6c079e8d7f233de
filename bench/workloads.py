"""Every workload of ``python bench/run.py``, W1-W14, in the order they run: the rows of the
systems' table first, then the workloads with a table of their own, W8, the longest, last.

Each is one :class:`bench.workload.Workload`: what it takes from the options, the databases
it runs on and the systems that take part. Its measuring code is in its own module.
"""

from __future__ import annotations

from functools import partial

from bench import (
    admin_changelist,
    backlog,
    churn,
    floor,
    flow,
    idle,
    large_table,
    memory,
    processes,
    throughput,
)
from bench.report import Measured, progress
from bench.workload import POSTGRESQL, Context, Part, Run, TakesPart, Workload, measured

PGQUEUER = ("pgqueuer",)  # the peer W8, W9 and W10 measure beside jobqueue


def jobqueue_and(*peers: str) -> TakesPart:
    """The ``takes_part`` of a workload of jobqueue, and ``peers`` beside it."""
    names = {"jobqueue", *peers}
    return lambda system: system.name in names


def enqueue(bulk: bool) -> Run:
    return lambda c: [*measured(c, throughput.enqueuing(c.args.jobs, bulk))]


def start_and_drain(c: Context) -> list[Part]:
    return [
        row
        for measure in throughput.start_and_drain(c.args.jobs, c.args.slow_jobs)
        for row in measured(c, measure)
    ]


def latency(c: Context) -> list[Part]:
    return [*measured(c, idle.latency(c.args.latency_jobs, c.args.latency_interval, settle=1.0))]


def idle_cost(c: Context) -> list[Part]:
    a, log = c.args, c.log
    if log is None:  # no W5 (the run said so when it looked for the log)
        return []
    windows = a.idle_windows or a.repeat
    progress(f"W5: every idle worker at once, {windows} x {a.idle_seconds:g} s")
    per_day = idle.idle_cost(c.systems, log, a.idle_seconds, windows, a.idle_settle)
    progress(f"W5 {per_day}")
    return [Measured(idle.IDLE_ROW, per_day)]


def statements(c: Context) -> list[Part]:
    """W7: counted on the server (where its log can be read), then in the bench process."""
    a = c.args
    parts: list[Part] = []
    if c.log is not None:
        for measure in throughput.server_counted(a.count_jobs, c.log):
            parts += measured(c, measure)
    for counting in throughput.statements(a.count_jobs, a.concurrency):
        parts.append(throughput.count_runs(c, counting, a.count_jobs))
    return parts


def large(c: Context) -> list[Part]:
    a = c.args
    return [large_table.large_table(a.large_finished, a.large_jobs, a.large_concurrency, a.repeat)]


def more_processes(c: Context) -> list[Part]:
    a = c.args
    return [processes.processes(a.processes_jobs, a.processes, a.repeat, c.peers(PGQUEUER))]


def big_backlog(c: Context) -> list[Part]:
    a = c.args
    return [backlog.backlog(a.backlog_sizes, a.backlog_batch, a.backlog_window, c.peers(PGQUEUER))]


def drain_floor(c: Context) -> list[Part]:
    return [floor.floor(c.args.floor_jobs, c.args.floor_connections, c.args.repeat)]


def admin_pages(c: Context) -> list[Part]:
    a = c.args
    return [admin_changelist.admin_pages(a.admin_jobs, a.admin_renders, a.admin_minutes)]


def worker_memory(c: Context) -> list[Part]:
    return [memory.memory(c.systems, c.args.memory_jobs, c.args.memory_slow_jobs, c.again)]


def flow_control(c: Context) -> list[Part]:
    a = c.args
    return [*flow.flow(a.flow_jobs, a.flow_keys, a.flow_head, a.repeat)]


def sustained_churn(c: Context) -> list[Part]:
    a = c.args
    plan = churn.Plan(
        a.churn_minutes,
        a.churn_share,
        a.churn_rate,
        a.churn_interval,
        a.churn_probe_jobs,
        a.churn_vacuum,
    )
    return [*churn.churn(c.systems, plan)]


# A workload with a table of its own, on PostgreSQL only, measured again whole after an error.
own_table = partial(Workload, databases=POSTGRESQL, own_table=True, again=True)

WORKLOADS = (
    Workload("W1", enqueue(bulk=False)),
    Workload("W2", enqueue(bulk=True)),
    Workload("W3", start_and_drain, notes=throughput.drain_settings),
    Workload("W4", latency),
    # Counted on the server, from its log: none on SQLite.
    Workload("W5", idle_cost, frozenset({"postgresql", "mysql"}), again=True),
    Workload("W7", statements),
    own_table("W6", large, takes_part=jobqueue_and(), needs_jobqueue=True),
    own_table("W9", more_processes, takes_part=jobqueue_and(*PGQUEUER), needs_jobqueue=True),
    own_table(
        "W10", big_backlog, takes_part=jobqueue_and(*PGQUEUER), needs_jobqueue=True, churns=True
    ),
    own_table("W11", drain_floor, takes_part=jobqueue_and(), needs_jobqueue=True),
    own_table("W12", admin_pages, takes_part=jobqueue_and(), needs_jobqueue=True),
    # Each system's worker is measured again on its own.
    own_table("W13", worker_memory, takes_part=memory.takes_part, peer_notes=True, again=False),
    own_table("W14", flow_control, takes_part=jobqueue_and(), needs_jobqueue=True),
    own_table("W8", sustained_churn, takes_part=jobqueue_and(*PGQUEUER), churns=True),
)
KEYS = tuple(sorted((w.key for w in WORKLOADS), key=lambda key: int(key[1:])))
