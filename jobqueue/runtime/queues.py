"""Which queues one worker serves, from its pool, ``ROUTING`` and command-line options.

Which pool a queue belongs to is :meth:`jobqueue.conf.Settings.pool_for`'s rule; this module
turns it into the list (or the exclusions) one worker claims with, and ``QueueSelection``
is that answer as a value: the worker asks it whether a notification's queue is its own,
the health probe whether any live worker serves a queue (from the workers' rows), and the
workers' tables how to show it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobqueue.conf import PoolSpec, Settings


def select(
    settings: Settings,
    pool: PoolSpec,
    only: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """Return ``(queues, excluded)``; ``queues=None`` means every queue but ``excluded``.

    ``only`` (``--queue``) replaces the pool's own queues and may name a queue the pool would
    otherwise leave to another pool; ``exclude`` (``--exclude-queue``) adds to what the pool
    already leaves out.
    """
    # Which pool serves a queue is Settings.pool_for's to say.
    named = set(settings.named_queues)
    mine = {q for q in named if (owner := settings.pool_for(q)) and owner.name == pool.name}
    others = named - mine
    if only:
        queues: tuple[str, ...] | None = tuple(dict.fromkeys(only))
        excluded = set(exclude)
    elif pool.is_catch_all:
        queues = None
        excluded = others | set(exclude)
    else:
        queues = tuple(sorted(mine))
        excluded = set(exclude)
    if queues is not None:
        queues = tuple(q for q in queues if q not in excluded)
    return queues, tuple(sorted(excluded))


@dataclass(frozen=True)
class QueueSelection:
    """The queues one worker claims: ``queues`` (``None``: every queue) but ``excluded``."""

    queues: tuple[str, ...] | None
    excluded: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, stored: Any) -> QueueSelection | None:
        """The selection a worker's row stores (``Worker.queues``); None if it is no
        selection (a row written by hand, or by a version that stored none)."""
        if not isinstance(stored, dict):
            return None
        queues = stored.get("queues")
        return cls(None if queues is None else tuple(queues), tuple(stored.get("excluded") or ()))

    def as_row(self) -> dict[str, Any]:
        """As ``Worker.queues`` stores it."""
        return {"queues": self.queues, "excluded": self.excluded}

    def serves(self, queue: str) -> bool:
        """Whether this worker claims the jobs of ``queue``."""
        if queue in self.excluded:
            return False
        return self.queues is None or queue in self.queues

    def describe(
        self, *, every: str = "*", sep: str = ",", none: str = "", but: str = "except"
    ) -> str:
        """``"*"``, ``"a,b"``, ``"* except c"``, in the words and separator asked for."""
        served = every if self.queues is None else sep.join(self.queues) or none
        if self.excluded:
            served += f" {but} {sep.join(self.excluded)}"
        return served
