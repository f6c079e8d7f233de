"""When the jobs this process put back (a retry's backoff, a snooze) fall due again.

The slot that puts a job back adds its delay here; the worker's loop sleeps no longer than
until the earliest one, and looks for work when one has fallen due, without waiting for a
poll. Slots add from their own threads, the loop pops from its own: one lock guards the heap.
"""

from __future__ import annotations

import heapq
import threading
import time


class Due:
    """A heap of monotonic times, safe to use from any thread."""

    def __init__(self) -> None:
        self._times: list[float] = []
        self._lock = threading.Lock()

    def add(self, delay: float) -> None:
        """A job this process put back falls due in ``delay`` seconds."""
        with self._lock:
            heapq.heappush(self._times, time.monotonic() + delay)
        # No wake-up here: the slot that called this frees itself next, and that wakes the
        # loop, which then sleeps until this job is due.

    def pop_due(self, now: float) -> bool:
        """True if a job has fallen due by ``now``; forgets every one that has."""
        due = False
        with self._lock:
            while self._times and self._times[0] <= now:
                heapq.heappop(self._times)
                due = True
        return due

    def earliest(self) -> float | None:
        """When the next job falls due (monotonic), None if none will."""
        with self._lock:
            return self._times[0] if self._times else None
