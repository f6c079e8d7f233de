"""What every peer driver shares: its options, the stamp file, and the one-line JSON reply.

A driver runs in its peer's own virtualenv (``bench/.venvs/<peer>``), never in the bench
process: ``python bench/peers/<driver>.py COMMAND [options]``. It reads its database from
``BENCH_DSN`` and prints ONE JSON object on its last stdout line; the worker command prints
nothing and exits when the queue is empty (``--burst``) or on SIGTERM. Every driver has
two tasks: ``noop``, and ``ten_kb`` (W13), which builds 10 KB and returns it where the peer
keeps results, else drops it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

DSN = os.environ.get("BENCH_DSN", "")
# Django's OPTIONS for MariaDB, the same for jobqueue's project (bench/settings.py) and
# django-tasks-db's (dtdb_settings.py): READ COMMITTED, so that a claim sees what other
# transactions committed and takes no gap locks (MariaDB's default is REPEATABLE READ), and
# utf8mb4 for every character.
MYSQL_OPTIONS = {"isolation_level": "read committed", "charset": "utf8mb4"}
Command = Callable[[argparse.Namespace], dict[str, Any] | None]
TASKS = ("noop", "ten_kb")  # what ``enqueue --task`` can name
TEN_KB = 10_240  # bytes a ten_kb job builds
WAIT_POLL = 0.2  # s between two counts of ``wait``


def stamp(n: int) -> None:
    """The W4 handler's body: record the moment it runs, as ``n wall-clock-time``."""
    with open(os.environ["BENCH_STAMP_FILE"], "a") as file:
        file.write(f"{n} {time.time()!r}\n")


def ten_kb(n: int) -> str:
    """The W13 handler's body: a fresh 10 KB string (built at run time, never a constant)."""
    return "x" * TEN_KB


def paced(start: int, jobs: int, interval: float, enqueue: Callable[[int], object]) -> list[float]:
    """Enqueue stamp jobs ``start..`` one every ``interval`` s; the time each commit returned."""
    committed = []
    t0 = time.time()
    for i in range(jobs):
        delay = t0 + i * interval - time.time()
        if delay > 0:
            time.sleep(delay)
        enqueue(start + i)
        committed.append(time.time())
    return committed


def paced_batches(
    rate: float, seconds: float, start_at: float, tick: float, enqueue: Callable[[int], object]
) -> dict[str, Any]:
    """W8's enqueuer: ``rate`` jobs a second for ``seconds`` from the wall-clock time
    ``start_at``, one batch every ``tick`` s paced on the clock. Each batch brings the count
    up to what the clock says is due, so a slow call is caught up by the next batch.
    ``enqueue(k)`` enqueues ``k`` jobs in one call. Returns the jobs enqueued, the seconds
    from ``start_at`` to the last commit, and how late the latest batch started."""
    total = round(rate * seconds)
    sent, late, i = 0, 0.0, 0
    while sent < total:
        at = start_at + i * tick
        delay = at - time.time()
        if delay > 0:
            time.sleep(delay)
        else:
            late = max(late, -delay)
        i += 1
        due = min(total, round(rate * tick * i))
        if due > sent:
            enqueue(due - sent)
            sent = due
    return {"enqueued": sent, "seconds": time.time() - start_at, "late": late}


def timed(block: Callable[[], object]) -> dict[str, Any]:
    start = time.perf_counter()
    block()
    return {"seconds": time.perf_counter() - start}


def stop_on_sigterm() -> None:
    """For workers without a clean stop of their own: SIGTERM exits at once."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))


def worker_processes(args: argparse.Namespace) -> None:
    """``workers``: ``--processes`` processes of this driver's ``work`` command, started at
    once and waited for (so that their CPU time is in this process's count of its children,
    as a supervisor's is), for peers without a supervisor of their own. SIGTERM is passed on
    to each; the command fails if any of them did."""
    command = [sys.executable, sys.argv[0], "work", "--setting", args.setting]
    children = [
        subprocess.Popen([*command, *(["--burst"] if args.burst else [])])
        for _ in range(args.processes)
    ]

    def stop(*_: object) -> None:
        for child in children:
            child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    codes = [child.wait() for child in children]
    failed = [code for code in codes if code not in (0, -signal.SIGTERM)]
    if failed:
        sys.exit(f"{len(failed)} of {len(children)} worker processes failed: {failed}")


def claim_logger(path: str | None) -> Callable[[float, float, int], None] | None:
    """W9 and W10's claim timer: a function that appends ``<pid> <seconds> <wall-clock start>
    <jobs>`` for one claim to the file at ``path`` (one short append per claim, as
    ``bench/backlog_settings.py`` writes jobqueue's), or None without a path."""
    if not path:
        return None
    pid = os.getpid()

    def log(started: float, seconds: float, jobs: int) -> None:
        with open(path, "a") as file:
            file.write(f"{pid} {seconds:.6f} {started:.6f} {jobs}\n")

    return log


def waited(succeeded: Command, args: argparse.Namespace) -> dict[str, Any]:
    """``wait``: count the succeeded jobs until there are ``--jobs`` or ``--within`` s have
    passed, on one process's connection (W13 waits for a drain without starting a driver
    process for every count); the last count."""
    deadline = time.monotonic() + args.within
    while True:
        reply = succeeded(args) or {}
        done = int(reply["succeeded"])
        if done >= args.jobs or time.monotonic() >= deadline:
            return {"succeeded": done}
        time.sleep(WAIT_POLL)


# Each driver defines one function per command; "stamp" is the function named ``stamps``.
# ``workers`` and ``drained`` are for W9 and W10 (pgqueuer's driver has them).
COMMANDS = {
    "setup": "setup",
    "reset": "reset",
    "enqueue": "enqueue",
    "stamp": "stamps",
    "work": "work",
    "workers": "workers",
    "drained": "drained",
    "succeeded": "succeeded",
    "versions": "versions",
    "churn-enqueue": "churn_enqueue",  # W8's paced enqueuer; only drivers with W8 have it
}


def main(driver: dict[str, Any]) -> None:
    """Run the command named on the command line: ``main(globals())`` in a driver."""
    commands: dict[str, Command] = {
        cmd: driver[func] for cmd, func in COMMANDS.items() if func in driver
    }
    commands["wait"] = lambda args: waited(driver["succeeded"], args)
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=sorted(commands))
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--bulk", action="store_true", help="enqueue: one bulk call")
    parser.add_argument("--task", choices=TASKS, default="noop", help="enqueue: which task")
    parser.add_argument(
        "--batch", type=int, default=0, help="enqueue --bulk: calls of this many (0: one call)"
    )
    parser.add_argument("--analyze", action="store_true", help="enqueue: ANALYZE after, untimed")
    parser.add_argument("--processes", type=int, default=1, help="workers: worker processes")
    parser.add_argument("--since", type=float, default=0.0, help="drained: from this epoch")
    parser.add_argument("--window", type=float, default=0.0, help="drained: for s (0: all)")
    parser.add_argument("--setting", default="default", help="work: default or tuned")
    parser.add_argument("--burst", action="store_true", help="work: exit when the queue is empty")
    parser.add_argument("--start", type=int, default=0, help="stamp: the first job's number")
    parser.add_argument("--interval", type=float, default=0.0, help="stamp: seconds apart")
    parser.add_argument("--within", type=float, default=5.0, help="wait: at most seconds")
    parser.add_argument("--rate", type=float, default=0.0, help="churn-enqueue: jobs/s")
    parser.add_argument("--seconds", type=float, default=0.0, help="churn-enqueue: for how long")
    parser.add_argument("--start-at", type=float, default=0.0, help="churn-enqueue: wall clock")
    parser.add_argument("--tick", type=float, default=0.05, help="churn-enqueue: s per batch")
    args = parser.parse_args()
    reply = commands[args.command](args)
    if reply is not None:
        print(json.dumps(reply), flush=True)
    sys.stdout.flush()
