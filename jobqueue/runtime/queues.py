"""Which queues one worker serves, from its pool, ``ROUTING`` and command-line options.

Which pool a queue belongs to is :meth:`jobqueue.conf.Settings.pool_for`'s rule; this module
turns it into the list (or the exclusions) one worker claims with.
"""

from __future__ import annotations

from collections.abc import Sequence

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
