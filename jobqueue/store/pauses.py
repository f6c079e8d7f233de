"""Pause and resume queues: the one place that writes ``QueuePause`` rows, for the admin,
``manage.py jobs pause|resume`` and scripts alike.

A paused queue is a row in ``jobqueue_queuepause``. The claim statements leave its jobs out
(see ``claim`` in :mod:`jobqueue.sql`), so a pause holds on every worker and host from its
commit on, and across restarts, with no state in any worker; enqueuing to a paused queue
goes on as before. A job already running runs on, and one a worker had claimed ahead of a
free slot just before the pause (only short jobs are, for at most ``HOLD_LIMIT``, a
second) may still start.

A resume deletes the row and wakes the workers that serve the queue: on PostgreSQL by a
NOTIFY on the workers' channel, delivered at commit; on SQLite the commit itself wakes
each worker's watcher of the database file; in this process through ``jobs_committed``,
as an operator's Retry does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, transaction
from django.utils import timezone

from jobqueue import signals
from jobqueue.models import QueuePause
from jobqueue.sql import Queries
from jobqueue.store.channel import NOTIFY_CHANNEL

logger = logging.getLogger("jobqueue")

# What ``paused_by`` says of a pause made by the command.
BY_COMMAND = "manage.py jobs pause"
# Job.queue and QueuePause.queue are this long at most.
MAX_QUEUE_LENGTH = 100


@dataclass(frozen=True)
class Change:
    """What a pause or resume did: the queues it changed, and those already as asked."""

    changed: list[str]
    unchanged: list[str]


def paused(using: str = DEFAULT_DB_ALIAS) -> dict[str, QueuePause]:
    """The paused queues, by name (one small table: a row per paused queue)."""
    return {row.queue: row for row in QueuePause.objects.using(using).order_by("queue")}


def is_paused(queue: str, using: str = DEFAULT_DB_ALIAS) -> bool:
    return QueuePause.objects.using(using).filter(queue=queue).exists()


def _names(queues: Iterable[str]) -> list[str]:
    names = list(dict.fromkeys(queues))
    for name in names:
        if not name or len(name) > MAX_QUEUE_LENGTH:
            raise ValueError(f"not a queue name: {name!r} (1 to {MAX_QUEUE_LENGTH} characters)")
    return names


def pause(queues: Iterable[str], *, by: str = "", using: str = DEFAULT_DB_ALIAS) -> Change:
    """Pause ``queues``; one already paused keeps its row (who paused it, and when)."""
    names = _names(queues)
    with transaction.atomic(using=using):
        before = set(
            QueuePause.objects.using(using).filter(queue__in=names).values_list("queue", flat=True)
        )
        new = [q for q in names if q not in before]
        now = timezone.now()
        # ignore_conflicts: a concurrent pause of the same queue wins, and this one is a no-op.
        QueuePause.objects.using(using).bulk_create(
            [QueuePause(queue=q, paused_at=now, paused_by=by) for q in new],
            ignore_conflicts=True,
        )
        if new:
            logger.warning(
                "queue(s) paused by %s: %s; no worker claims their jobs until resumed",
                by or "an operator",
                ", ".join(new),
            )
            signals.send_at_commit(
                signals.queue_paused, sender=None, using=using, queues=new, paused_by=by
            )
    return Change(changed=new, unchanged=[q for q in names if q in before])


def resume(queues: Iterable[str], *, using: str = DEFAULT_DB_ALIAS) -> Change:
    """Resume ``queues`` and wake the workers that serve them; one not paused is left as it is."""
    names = _names(queues)
    with transaction.atomic(using=using):
        # Locked before they are deleted: a concurrent resume of the same queue waits, then
        # finds no row, so one resume reports it and wakes the workers, not both.
        deleted = sorted(
            QueuePause.objects.using(using)
            .filter(queue__in=names)
            .select_for_update()
            .values_list("queue", flat=True)
        )
        QueuePause.objects.using(using).filter(queue__in=deleted).delete()
        if deleted:
            Queries(using).notify(NOTIFY_CHANNEL, deleted)
            logger.info("queue(s) resumed: %s", ", ".join(deleted))
            signals.send_jobs_committed_at_commit(deleted, using)
            signals.send_at_commit(signals.queue_resumed, sender=None, using=using, queues=deleted)
    return Change(changed=deleted, unchanged=[q for q in names if q not in deleted])
