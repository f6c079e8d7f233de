"""How many jobs a worker claims: for its free slots, ahead of them while jobs are short, and
no more than its limits allow.

Two threads ask: the writer's, just before each statement it sends (``sizes()``), and the
loop's, before it asks the writer for a claim and between its turns (``sizes()``,
``check_limits()``). Whichever thread ran a claim reports it (``claimed()``): the writer's,
or the loop's when its claim went out inline (``Writer.claim``). The count of jobs claimed
and the retire decision are kept under one lock, so both threads see the same ones.
"""

from __future__ import annotations

import threading
import time

from jobqueue.runtime.executor import Executor
from jobqueue.runtime.limits import Limits
from jobqueue.runtime.service import Control

# Jobs are claimed ahead of the slots only while they typically take less than this: then a
# round trip of their own would be a large share of each.
PREFETCH_BELOW = 0.02
# Unless the pool or the command line says otherwise, a worker claims up to this many jobs
# per slot ahead of its slots. A claim is one statement whatever its size, so bigger claims
# of very short jobs drain a queue faster; PREFETCH_WINDOW keeps the wait of longer ones short.
PREFETCH_PER_SLOT = 16
# No more jobs are held than the slots are expected to start within this many seconds, at
# the jobs' typical run time: a held job waits about this long for a slot, at most.
PREFETCH_WINDOW = 0.05
# A job held in line longer than this (every slot taken by longer jobs) is handed back, so
# that another worker may run it.
HOLD_LIMIT = 1.0


class Demand:
    """The claim sizes and the limits of one worker's slots."""

    def __init__(
        self,
        *,
        executor: Executor,
        limits: Limits,
        control: Control,
        prefetch: int | None = None,
    ) -> None:
        self._executor = executor
        self._limits = limits
        self._control = control
        self.concurrency = executor.concurrency
        # Jobs claimed ahead of the slots, at most.
        self.prefetch = PREFETCH_PER_SLOT * self.concurrency if prefetch is None else prefetch
        # The loop and the writer both check the limits, and a check between jobs happens
        # once per job: under the lock, the other waits for its outcome instead of skipping
        # it. The lock also guards the count of jobs claimed, which both threads write.
        self._lock = threading.Lock()
        self._claimed_total = 0
        self._retiring: str | None = None  # why this process stops claiming, if it does
        # After a hand-back, no claiming ahead until a slot has freed: the slots are taken
        # by long jobs, and what is held would only wait and go back again.
        self._ahead_after = -1  # a value of executor.completed
        self._open = False

    def start(self) -> None:
        """Claims may go out from now on (the worker has registered, its scope is known)."""
        self._open = True

    def sizes(self) -> tuple[int, int]:
        """How many jobs the next statement claims: for the free slots, and ahead of them."""
        if self._control.stopping or not self._open:
            return 0, 0
        # Between jobs, like the loop: a limit reached here means no more claims.
        if self.check_limits(time.monotonic()):
            self._control.wake()  # the loop sees whether it is done
            return 0, 0
        running, waiting = self._executor.load()
        free = max(0, self.concurrency - running - waiting)
        held = max(0, waiting - (self.concurrency - running))
        ahead = max(0, self.holdable() - held)
        with self._lock:
            total = self._limits.claim_limit(free + ahead, self._claimed_total)
        return min(free, total), total - min(free, total)

    def holdable(self) -> int:
        """How many jobs may wait in line now: none unless the jobs are short, and no more
        than the slots are expected to start within PREFETCH_WINDOW."""
        typical = self._executor.typical_run
        if typical is None or typical >= PREFETCH_BELOW:
            return 0
        if self._executor.completed <= self._ahead_after:
            return 0  # handed jobs back, and no slot has freed since
        in_window = int(self.concurrency * PREFETCH_WINDOW / max(typical, 1e-6))
        return min(self.prefetch, in_window)

    @property
    def hold_limit(self) -> float:
        """Seconds a held job may wait in line before it is handed back (HOLD_LIMIT)."""
        return HOLD_LIMIT

    def handed_back(self) -> None:
        """Held jobs went back: claim none ahead until a slot has freed."""
        self._ahead_after = self._executor.completed

    def claimed(self, count: int) -> None:
        """A statement claimed ``count`` jobs (they count toward ``max_jobs``)."""
        with self._lock:
            self._claimed_total += count
        if count:
            self._limits.last_busy = time.monotonic()

    def check_limits(self, now: float) -> str | None:
        """Why this worker retires, if a limit says it should; the first reason stays."""
        with self._lock:
            if not self._retiring:
                self._retiring = self._limits.retire_reason(
                    now, self._claimed_total, self._executor.completed
                )
            return self._retiring

    @property
    def retiring(self) -> str | None:
        """Why this worker retires, if a check found that it should."""
        return self._retiring
