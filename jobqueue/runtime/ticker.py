"""The part of a worker that evaluates the schedules; it runs on the worker loop's thread.

Every worker process evaluates every schedule whose task it has registered, on its own
timer: the next tick is one more timer of the loop's sleep, so an idle worker sends no
statement between ticks. When a tick falls due, :func:`jobqueue.schedules.state.tick`
lets the database decide which worker wins it (a compare-and-set on the schedule's row);
the others read the row's next tick and sleep again. No leader, no extra process.

A database error is reported through the process's ``Health`` (one line per outage) and
retried with backoff; it never stops the worker, and a tick missed meanwhile runs on the
next try, once.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable

from django.db import connections
from django.utils import timezone

from jobqueue import conf
from jobqueue.runtime.outage import Backoff, Health
from jobqueue.schedules import spec as schedule_spec
from jobqueue.schedules import state
from jobqueue.schedules.spec import ScheduleSpec
from jobqueue.tasks import base as tasks

logger = logging.getLogger("jobqueue.schedules")

NOT_OUTAGE_RETRY = 60.0
# How long a worker whose settings disagree with a schedule's row waits before it looks again.
DEFER = 60.0


class Ticker:
    """Evaluates the due schedules of one worker; ``run`` is one of the loop's chores."""

    def __init__(
        self,
        settings: conf.Settings,
        using: str,
        health: Health,
        *,
        clock: Callable[[], dt.datetime] = timezone.now,
    ) -> None:
        # Raises ImproperlyConfigured, naming the schedule and the key, for a bad entry: a
        # worker refuses to start rather than leave a schedule silently unevaluated.
        self.specs = schedule_spec.load(settings)
        self.using = using
        self.health = health
        self.clock = clock  # wall time, which ticks are in; tests pass their own
        # Each schedule's next tick as this worker last read it from its row. A schedule
        # not yet in here (its row could not be read) is due for a sync at once.
        self._next: dict[str, dt.datetime] = {}
        self._unsynced: list[ScheduleSpec] = []
        self._deferred: set[str] = set()  # named in the log as left to other settings
        # After a failed statement, nothing is tried again before this monotonic time.
        self._hold_until = 0.0
        self._backoff = Backoff()

    def start(self) -> None:
        """Read (or create) each schedule's row once and remember its next tick."""
        registered = set(tasks.discover())  # imported already by the worker: a lookup
        for spec in self.specs:
            if spec.task_name not in registered:
                # The system check refuses an unknown task; this is a worker started with
                # other settings or modules than the check saw. Other workers may run it.
                logger.warning(
                    "schedule %s: task %s is not registered in this worker; "
                    "this worker does not evaluate it",
                    spec.name,
                    spec.task_name,
                )
        self._unsynced = [s for s in self.specs if s.task_name in registered]
        self._sync(time.monotonic())

    def next_at(self) -> float:
        """The monotonic time of the earliest next tick; ``inf`` if there is none."""
        if self._unsynced:
            at = time.monotonic()
        elif self._next:
            ahead = (min(self._next.values()) - self.clock()).total_seconds()
            at = time.monotonic() + ahead
        else:
            return math.inf
        return max(at, self._hold_until)

    def run(self, now: float) -> float:
        """Evaluate every due schedule; return :meth:`next_at`."""
        if now < self._hold_until:
            return self.next_at()
        if self._unsynced and not self._sync(now):
            return self.next_at()
        by_name = {s.name: s for s in self.specs}
        wall = self.clock()
        for name, read in sorted(self._next.items(), key=lambda item: item[1]):
            if read > wall:
                break
            spec = by_name[name]
            try:
                outcome = state.tick(spec, read, wall, using=self.using)
            except Exception as exc:
                self._failed(exc, f"evaluating schedule {name}", now)
                break
            self._backoff.reset()
            if outcome.next_tick is None:
                # The row is gone (deleted by hand): create it afresh.
                del self._next[name]
                self._unsynced.append(spec)
            elif outcome.kind == "lost" and outcome.definition != spec.definition:
                self._next[name] = self._defer(spec, outcome.definition, outcome.next_tick, wall)
            else:
                self._deferred.discard(name)
                self._next[name] = outcome.next_tick
        return self.next_at()

    def _defer(
        self, spec: ScheduleSpec, stored: str | None, next_tick: dt.datetime, wall: dt.datetime
    ) -> dt.datetime:
        """When to look again at a schedule whose row has another definition than ours.

        Workers with other settings (the other half of a rolling deploy) recomputed it at
        their start. Recomputing it back would make the two halves undo each other's ticks;
        this worker leaves the schedule to them instead (its compare-and-set, which matches
        the definition too, cannot win) and looks again at the row's next tick, or in a
        minute if that has passed already, until its own restart syncs the row.
        """
        if spec.name not in self._deferred:
            self._deferred.add(spec.name)
            logger.warning(
                "schedule %s: the database has it as %r, this worker's settings as %r; "
                "leaving it to the workers with those settings (a rolling deploy?)",
                spec.name,
                stored,
                spec.definition,
            )
        return next_tick if next_tick > wall else wall + dt.timedelta(seconds=DEFER)

    def _sync(self, now: float) -> bool:
        try:
            rows = state.sync(self._unsynced, self.clock(), using=self.using)
        except Exception as exc:
            self._failed(exc, "reading the schedules", now)
            return False
        self._backoff.reset()
        for spec in self._unsynced:
            self._next[spec.name] = rows[spec.name].next_tick
        self._unsynced = []
        return True

    def _failed(self, exc: Exception, doing: str, now: float) -> None:
        wait = self._backoff.next()
        if not self.health.failed(exc, doing):
            # Not an outage (a value refused, a bug): no sooner than a minute, not one
            # traceback per backoff step.
            wait = max(wait, NOT_OUTAGE_RETRY)
            logger.exception("%s: failed %s; trying again in %g s", self.health.name, doing, wait)
        connections[self.using].close()
        self._hold_until = now + wait
