"""Group commit: writes that arrive together from several threads go out as one statement.

The first thread to arrive writes at once, alone; threads that arrive while a write is in
flight queue up, and the next of them writes the whole queue. A lone write is never
delayed, and under load N finishing jobs cost one statement instead of N. Every thread
waits for its own write, so nothing is reported done before it is in the database.
"""

from __future__ import annotations

import threading
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
    def __init__(self, write: Callable[[list[T]], set[Hashable]], key: Callable[[T], Hashable]):
        """``write`` writes a batch and returns the keys of the items its fence matched."""
        self._write = write
        self._key = key
        self._cond = threading.Condition()
        self._queue: list[_Entry[T]] = []
        self._writing = False

    def submit(self, item: T) -> bool:
        """Write ``item`` (with whatever else is waiting); True if its row was matched."""
        entry = _Entry(item)
        with self._cond:
            self._queue.append(entry)
            while not entry.done and self._writing:
                self._cond.wait()
            if entry.done:
                return self._outcome(entry)
            self._writing = True
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

    @staticmethod
    def _outcome(entry: _Entry[T]) -> bool:
        if entry.error is not None:
            raise entry.error
        return entry.matched
