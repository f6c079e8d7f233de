"""Which queues one worker serves, from its pool, ``ROUTING`` and command-line options."""

from __future__ import annotations

from collections.abc import Sequence

from jobqueue.conf import PoolSpec, Settings


def owner(settings: Settings, queue: str) -> str | None:
    """The pool that runs ``queue``: ROUTING first, then a pool listing it, else the catch-all."""
    if queue in settings.routing:
        return settings.routing[queue]
    for pool in settings.pools.values():
        if pool.queues and queue in pool.queues:
            return pool.name
    catch_all = settings.catch_all_pool()
    return catch_all.name if catch_all else None


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
    named = set(settings.routing) | {q for p in settings.pools.values() for q in p.queues or ()}
    mine = {q for q in named if owner(settings, q) == pool.name}
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
