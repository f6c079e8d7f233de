"""Group commit: writes that arrive together from several threads go out as one statement.

Threads that arrive while a write is in flight queue up, and the next of them writes the
whole queue: under load N finishing jobs cost one statement instead of N. A thread that
finds no write in flight writes at once, unless ``expected()`` says other threads are about
to arrive (slots still running jobs): then it waits for them, at most ``linger`` seconds,
since on a disk where each commit waits for a flush, one commit of four costs about what
one of one does. Every thread waits for its own write, so nothing is reported done before
it is in the database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Entry(Generic[T]):
    item: T
    done: bool = False
    matched: bool = False
    error: BaseException | None = field(default=None, repr=False)


class GroupCommit(Generic[T]):
    def __init__(
        self,
        write: Callable[[list[T]], set[Hashable]],
        key: Callable[[T], Hashable],
        *,
        linger: float = 0.0,
    ):
        """``write`` writes a batch and returns the keys of the items its fence matched."""
        self._write = write
        self._key = key
        self.linger = linger
        # How many submissions a batch may wait for, the one waiting included.
        self.expected: Callable[[], int] = lambda: 1
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        # The thread gathering a batch waits on a condition of its own (on the same lock), so
        # that an arrival wakes it alone, not every thread waiting for its write as well.
        self._arrival = threading.Condition(lock)
        self._queue: list[_Entry[T]] = []
        self._writing = False  # a thread is gathering a batch or writing one
        self._gathering = False

    def submit(self, item: T) -> bool:
        """Write ``item`` (with whatever else is waiting); True if its row was matched."""
        entry = _Entry(item)
        with self._cond:
            self._queue.append(entry)
            if self._gathering:
                self._arrival.notify()
            while not entry.done and self._writing:
                self._cond.wait()
            if entry.done:
                return self._outcome(entry)
            self._writing = True
            self._gather()
            batch, self._queue = self._queue, []
        try:
            matched = self._write([e.item for e in batch])
            error = None
        except BaseException as exc:  # every waiter must hear of it, then it is re-raised
            matched, error = set(), exc
        with self._cond:
            for e in batch:
                e.done, e.error = True, error
                e.matched = self._key(e.item) in matched
            self._writing = False
            self._cond.notify_all()
        return self._outcome(entry)

    def _gather(self) -> None:
        # Called with the lock held and no write in flight.
        if not self.linger or len(self._queue) >= self.expected():
            return
        deadline = time.monotonic() + self.linger
        self._gathering = True
        try:
            while len(self._queue) < self.expected():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._arrival.wait(remaining)
        finally:
            self._gathering = False

    @staticmethod
    def _outcome(entry: _Entry[T]) -> bool:
        if entry.error is not None:
            raise entry.error
        return entry.matched
