"""Signals a project can connect to. Each is sent after the database change it reports."""

import logging
from collections.abc import Iterable
from typing import Any, NamedTuple

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger("jobqueue")

# New jobs became visible to workers (the enqueueing transaction committed), or jobs an
# operator retried did (its transaction committed). Arguments: queue, database.
jobs_committed = Signal()

# A worker started an attempt: a job claimed for a free slot once its claim committed, a job
# claimed ahead when a slot takes it from the line. Arguments: job_id, task_name, queue,
# attempt, worker, wait (seconds from the job falling due, its run_at, to this start).
job_started = Signal()

# An attempt ended and its outcome was written. Arguments: job_id, task_name, queue, status
# (the job's new status), outcome (OUTCOMES: "retried" and "snoozed" both leave the job
# pending), attempt, worker, duration (seconds its handler ran; None if it never began).
job_finished = Signal()

# An attempt ended and the fence refused its outcome: the job was discarded by an operator,
# or recovered, while it ran, and nothing was written. Arguments: job_id, task_name, queue,
# attempt, worker, duration.
job_aborted = Signal()

# What job_finished's ``outcome`` may be.
OUTCOMES = ("succeeded", "failed", "retried", "snoozed", "discarded")

# An operator (admin, ``manage.py jobs``, a script) sent jobs back to pending. Arguments:
# job_ids (the ids retried), using (the database alias).
jobs_retried = Signal()

# An operator discarded jobs; a running one's worker has lost its fence. Arguments: job_ids,
# using.
jobs_discarded = Signal()

# One recovery statement applied the crash policy to running jobs whose worker is gone (lease
# expiry, a supervisor that saw its child die, a worker stopping with jobs unfinished).
# Arguments: jobs (a list of RecoveredJob), reason, worker (None for lease expiry: the jobs
# of any worker), using. Sent once the statement commits; see send_at_commit.
jobs_recovered = Signal()

# A worker handed back jobs it had claimed ahead and never started. Arguments: job_ids,
# worker, reason, using.
jobs_handed_back = Signal()

# Retention pruning deleted finished jobs. Arguments: deleted (status -> count, only the
# statuses with rows deleted), using.
jobs_pruned = Signal()

# An operator paused queues: no worker claims their jobs until they are resumed. Arguments:
# queues (the names newly paused; one already paused is left out), paused_by, using. Sent
# once the pause commits.
queue_paused = Signal()

# An operator resumed paused queues. Arguments: queues (the names that were paused), using.
# Sent once the resume commits.
queue_resumed = Signal()


class RecoveredJob(NamedTuple):
    """One job in ``jobs_recovered``."""

    id: int
    task_name: str
    queue: str
    status: str  # its new status: "pending" or "abandoned"
    # Its handler had started, so a crash was counted (and an error entry written). A job
    # claimed ahead and never started goes back to pending with crashed False.
    crashed: bool


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


def send_at_commit(signal: Signal, sender: Any, using: str, **kwargs: Any) -> None:
    """Send ``signal`` with ``using`` and ``kwargs`` once the transaction open on ``using``
    commits: at once in autocommit, as a worker runs its statements; never if it rolls
    back. A receiver that counts or reacts sees only what happened.

    Each receiver runs even if another raises; a failure is logged, not raised: the change
    is written, and the worker's maintenance, its shutdown or the supervisor that made it
    must not fail because a receiver did.
    """

    def send() -> None:
        for receiver, result in signal.send_robust(sender=sender, using=using, **kwargs):
            if isinstance(result, Exception):
                logger.error(
                    "signal receiver %r raised; what it was told of is written all the same",
                    receiver,
                    exc_info=result,
                )

    transaction.on_commit(send, using=using)
