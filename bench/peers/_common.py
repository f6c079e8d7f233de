"""What every peer driver shares: its options, the stamp file, and the one-line JSON reply.

A driver runs in its peer's own virtualenv (``bench/.venvs/<peer>``), never in the bench
process: ``python bench/peers/<driver>.py COMMAND [options]``. It reads its database from
``BENCH_DSN`` and prints ONE JSON object on its last stdout line; the worker command prints
nothing and exits when the queue is empty (``--burst``) or on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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


def stamp(n: int) -> None:
    """The W4 handler's body: record the moment it runs, as ``n wall-clock-time``."""
    with open(os.environ["BENCH_STAMP_FILE"], "a") as file:
        file.write(f"{n} {time.time()!r}\n")


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


# Each driver defines one function per command; "stamp" is the function named ``stamps``.
COMMANDS = {
    "setup": "setup",
    "reset": "reset",
    "enqueue": "enqueue",
    "stamp": "stamps",
    "work": "work",
    "succeeded": "succeeded",
    "versions": "versions",
    "churn-enqueue": "churn_enqueue",  # W8's paced enqueuer; only drivers with W8 have it
}


def main(driver: dict[str, Any]) -> None:
    """Run the command named on the command line: ``main(globals())`` in a driver."""
    commands: dict[str, Command] = {
        cmd: driver[func] for cmd, func in COMMANDS.items() if func in driver
    }
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=sorted(commands))
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--bulk", action="store_true", help="enqueue: one bulk call")
    parser.add_argument("--setting", default="default", help="work: default or tuned")
    parser.add_argument("--burst", action="store_true", help="work: exit when the queue is empty")
    parser.add_argument("--start", type=int, default=0, help="stamp: the first job's number")
    parser.add_argument("--interval", type=float, default=0.0, help="stamp: seconds apart")
    parser.add_argument("--rate", type=float, default=0.0, help="churn-enqueue: jobs/s")
    parser.add_argument("--seconds", type=float, default=0.0, help="churn-enqueue: for how long")
    parser.add_argument("--start-at", type=float, default=0.0, help="churn-enqueue: wall clock")
    parser.add_argument("--tick", type=float, default=0.05, help="churn-enqueue: s per batch")
    args = parser.parse_args()
    reply = commands[args.command](args)
    if reply is not None:
        print(json.dumps(reply), flush=True)
    sys.stdout.flush()
