"""Signals a project can connect to. Each is sent after the database change it reports."""

from collections.abc import Iterable

from django.db import transaction
from django.dispatch import Signal

# New jobs became visible to workers (the enqueueing transaction committed), or jobs an
# operator retried did (its transaction committed). Arguments: queue, database.
jobs_committed = Signal()

# A worker started an attempt. Arguments: job_id, task_name, attempt, worker.
job_started = Signal()

# An attempt ended and its outcome was written. Arguments: job_id, task_name, status
# (the job's new status), attempt, worker.
job_finished = Signal()

# An operator (admin, ``manage.py jobs``, a script) sent jobs back to pending. Arguments:
# job_ids (the ids retried), using (the database alias).
jobs_retried = Signal()

# An operator discarded jobs; a running one's worker has lost its fence. Arguments: job_ids,
# using.
jobs_discarded = Signal()


def send_jobs_committed_at_commit(queues: Iterable[str], database: str) -> None:
    """Send ``jobs_committed`` for each of ``queues`` once the transaction open on
    ``database`` commits (at once in autocommit): jobs the caller made due are visible to
    workers then, and not before. A rollback drops it along with the rows.

    Workers in other processes hear of such jobs through NOTIFY, sent by the statement that
    made them due; a worker in this process hears through this signal.
    """
    names = sorted(set(queues))

    def send() -> None:
        for queue in names:
            jobs_committed.send(sender=None, queue=queue, database=database)

    if names:
        transaction.on_commit(send, using=database)
