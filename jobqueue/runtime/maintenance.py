"""A worker's chores between claims: recovery of expired leases, retention pruning, and the
warning about jobs no live worker will claim. Each runs on its own timer. The worker adds
one more, the schedules' :class:`jobqueue.runtime.ticker.Ticker`, which lives in its own
module.

Every chore runs on the loop's thread, between its looks for work, and never on the claim
path. A chore is any object with ``run(now) -> float``: it does its work and returns the
monotonic time at which it wants to run next. Each one meets its own database errors: an
outage is reported through the process's ``Health`` (one line for the whole process), any
other error is logged, and either way its connection is closed and it tries again at its
next time. A chore never raises into the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from jobqueue.runtime.outage import Health
from jobqueue.runtime.service import Control
from jobqueue.store.jobs import Store
from jobqueue.tasks import unregistered

logger = logging.getLogger("jobqueue.worker")

PRUNE_INTERVAL = 3600.0
# A backlog of expired rows is pruned a slice at a time, so that a worker started on a big
# table claims work at once instead of deleting for minutes first.
PRUNE_SLICE = 20  # statements of PRUNE_BATCH rows
PRUNE_SLICE_PAUSE = 1.0
# Pending jobs of tasks no live worker has registered are named in the log at start, then
# at most this often, from the maintenance timer: never a statement on the claim path.
UNREGISTERED_INTERVAL = 600.0


class Chore(Protocol):
    def run(self, now: float) -> float:
        """Do the chore; return the monotonic time at which it wants to run again."""
        ...


class Maintenance:
    """The chores and when each is due; every one is due at ``start()``."""

    def __init__(self, chores: Sequence[Chore]) -> None:
        self._due = [(chore, 0.0) for chore in chores]

    def start(self, now: float) -> None:
        self._due = [(chore, now) for chore, _ in self._due]

    def run_due(self, now: float) -> None:
        """Run every chore whose time has come."""
        self._due = [(chore, chore.run(now) if now >= at else at) for chore, at in self._due]

    def next_at(self) -> float:
        """When the next chore is due (monotonic); infinity without any chore."""
        return min((at for _, at in self._due), default=float("inf"))


class Rescue:
    """Apply the crash policy to jobs whose lease expired, and remove dead workers' rows;
    wake the loop if that made jobs pending again."""

    def __init__(
        self, *, store: Store, worker: str, health: Health, control: Control, interval: float
    ) -> None:
        self._store = store
        self._worker = worker
        self._health = health
        self._control = control
        self._interval = interval

    def run(self, now: float) -> float:
        with self._health.trying(
            "recovering expired leases",
            self._store.queries.using,
            "worker %s: crash recovery failed; trying again later",
            self._worker,
        ):
            # One statement when nothing has expired (Store.rescue_pass): an idle worker
            # runs this every heartbeat interval.
            recovered = self._store.rescue_pass()
            if any(status == "pending" for _, _, status in recovered):
                self._control.wake()
        return now + self._interval


class Prune:
    """Delete finished jobs past their retention, a slice at a time."""

    def __init__(self, *, store: Store, worker: str, health: Health) -> None:
        self._store = store
        self._worker = worker
        self._health = health

    def run(self, now: float) -> float:
        more = False
        with self._health.trying(
            "pruning",
            self._store.queries.using,
            "worker %s: retention pruning failed; trying again later",
            self._worker,
        ):
            self._store.prune(max_batches=PRUNE_SLICE)
            more = self._store.more_to_prune
        return now + (PRUNE_SLICE_PAUSE if more else PRUNE_INTERVAL)


class UnregisteredWarning:
    """Name the pending jobs no live worker will claim: their task is registered nowhere."""

    def __init__(self, *, store: Store, worker: str, health: Health) -> None:
        self._store = store
        self._worker = worker
        self._health = health

    def run(self, now: float) -> float:
        with self._health.trying(
            "looking for jobs of unregistered tasks",
            self._store.queries.using,
            "worker %s: could not look for jobs of unregistered tasks; trying again later",
            self._worker,
        ):
            counts = unregistered.by_task(self._store.unregistered_pending())
            if counts:
                logger.warning("worker %s: %s", self._worker, unregistered.warning(counts))
        return now + UNREGISTERED_INTERVAL
