"""When a worker process should retire, to be started again clean, or leave for being idle.

A retiring worker claims nothing more, lets its jobs finish however long they take, and
exits with status 0: the supervisor (or systemd, or Kubernetes) starts a fresh one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field


@dataclass
class Limits:
    max_jobs: int | None = None  # jobs claimed
    max_memory: int | None = None  # bytes of resident memory, checked between jobs
    time_limit: float | None = None  # s since start
    idle_timeout: float | None = None  # s with nothing running and nothing claimed
    started: float = field(default_factory=time.monotonic)
    last_busy: float = field(default_factory=time.monotonic)
    _completed_seen: int = 0

    def start(self) -> None:
        self.started = self.last_busy = time.monotonic()

    def claim_limit(self, free: int, claimed_total: int) -> int:
        """How many jobs the next claim may take: never past ``max_jobs``."""
        if self.max_jobs is None:
            return free
        return max(0, min(free, self.max_jobs - claimed_total))

    def retire_reason(self, now: float, claimed_total: int, completed: int) -> str | None:
        """Why the worker should retire now, or ``None``."""
        if self.max_jobs is not None and claimed_total >= self.max_jobs:
            return f"claimed {self.max_jobs} job(s) (max_jobs)"
        if self.time_limit is not None and now - self.started >= self.time_limit:
            return f"lived {self.time_limit:g} s (time_limit)"
        if self.max_memory is not None and completed > self._completed_seen:
            # Between jobs only: a job's own peak must not cut it short.
            self._completed_seen = completed
            rss = resident_memory()
            if rss > self.max_memory:
                return (
                    f"uses {rss / 2**20:.0f} MiB, over max_memory {self.max_memory / 2**20:.0f} MiB"
                )
        return None

    def idle_for_too_long(self, now: float, busy: bool) -> bool:
        if busy:
            self.last_busy = now
        return self.idle_timeout is not None and now - self.last_busy >= self.idle_timeout

    def timers(self) -> list[float]:
        """Monotonic times at which a limit may trip without any event."""
        timers = []
        if self.idle_timeout is not None:
            timers.append(self.last_busy + self.idle_timeout)
        if self.time_limit is not None:
            timers.append(self.started + self.time_limit)
        return timers


def resident_memory() -> int:
    """This process's resident set size in bytes (Linux), else its peak."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
