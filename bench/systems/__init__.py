"""The systems under test, by name. A peer is one more :class:`System` subclass here."""

from __future__ import annotations

from bench.systems.base import KINDS, System


def available() -> dict[str, type[System]]:
    """Import lazily: a system's module needs Django set up first."""
    from bench.systems.jobqueue_system import JobqueueSystem
    from bench.systems.peers import (
        DjangoTasksDb,
        GraphileWorker,
        PgQueuer,
        Procrastinate,
        Raw,
        RawBatched,
    )

    systems = (
        JobqueueSystem,
        Procrastinate,
        PgQueuer,
        GraphileWorker,
        DjangoTasksDb,
        Raw,
        RawBatched,
    )
    return {cls.name: cls for cls in systems}


__all__ = ["KINDS", "System", "available"]
