"""The only writer of ``Job.status``: one method per transition.

The worker, the admin, the management commands and the ``django.tasks`` backend all change a
job through these methods, so each transition is written once, fenced once, logged once and
signalled once. Worker writes about a running job are fenced: they match the job's id, its
claim token and a lease with at least ``SAFETY_BUFFER`` left, and raise
:class:`~jobqueue.exceptions.JobRunAborted` when that matches no row.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.utils import timezone

from jobqueue import conf, signals, states
from jobqueue.exceptions import JobRunAborted
from jobqueue.sql import ClaimedRow, Queries, loads
from jobqueue.store import explain
from jobqueue.store.channel import CANCEL_PREFIX, NOTIFY_CHANNEL
from jobqueue.store.errors import (
    LAST_ERROR_LIMIT,
    MESSAGE_LIMIT,
    UnstorableOutcome,
    error_params,
    exception_text,
    refused_value,
    storable_text,
    summary,
    type_name,
)
from jobqueue.store.operations import Action, Outcome, Selection, SelectionSQL, compile_selection

logger = logging.getLogger("jobqueue")

PRUNE_BATCH = 1000

# What an error entry keeps of a handler's exception, per attempt: the head and the tail of
# its message and traceback, and how much was cut between them. A 5 MB message is then not
# stored (nor logged) whole on every attempt.


@dataclass
class ClaimedJob:
    """What a worker needs to run one attempt, read back from the claim statement."""

    id: int
    task_name: str
    queue: str
    priority: int
    args: list[Any]
    kwargs: dict[str, Any]
    attempt: int
    max_attempts: int
    crashes: int
    token: str
    steps: dict[str, Any] = field(default_factory=dict)
    # Claimed ahead of the free slots, to wait in line: its row's started_at stays NULL
    # until a slot takes it and the worker's writer records the start (Store.record).
    held: bool = False
    # Seconds from due (run_at) to the claim, and time.monotonic() at the claim: with the
    # time a held job waited in line, the wait that job_started reports.
    waited: float = 0.0
    claimed: float = field(default_factory=time.monotonic)
    # time.monotonic() when its handler began and when it returned or raised, for the
    # duration that job_finished reports; set by the attempt.
    began: float | None = None
    ended: float | None = None

    @property
    def duration(self) -> float | None:
        """Seconds its handler ran, once it has begun (until now while it runs)."""
        if self.began is None:
            return None
        return (self.ended if self.ended is not None else time.monotonic()) - self.began

    # The W3C carrier its enqueue stored (jobqueue.tracing), None if enqueued outside a trace.
    trace_context: dict[str, str] | None = None

    @property
    def attempts_left(self) -> bool:
        return self.attempt < self.max_attempts


@dataclass(frozen=True)
class ClaimScope:
    """What one worker may claim: its id, the tasks it knows, the queues it serves."""

    worker: str
    task_names: tuple[str, ...]
    queues: tuple[str, ...] | None
    excluded: tuple[str, ...] = ()


class Claimed(list[ClaimedJob]):
    """The jobs a claim took, in order, and, when it took none, ``next_due``: the seconds
    until the next job of its selection is due (0 or less if one is due already), None if
    none is pending. The claim reads it in the same statement on PostgreSQL, so that an
    idle worker's look costs one statement. There, a claim that took fewer jobs than it
    asked for sets it too when a rate limit held jobs back: the seconds until the next
    start it allows (None otherwise)."""

    def __init__(self, jobs: Iterable[ClaimedJob] = (), next_due: float | None = None) -> None:
        super().__init__(jobs)
        self.next_due = next_due


# The scope of a write that records successes and claims nothing.
_NO_CLAIM = ClaimScope(worker="", task_names=(), queues=())


@dataclass
class Success:
    job: ClaimedJob
    result: str  # JSON text


class Store:
    """Transitions of jobs in one database."""

    def __init__(self, using: str = DEFAULT_DB_ALIAS, settings: conf.Settings | None = None):
        self.queries = Queries(using)
        self.settings = settings or conf.get()
        self.more_to_prune = False

    # -- worker side ------------------------------------------------------------------

    def claim(
        self,
        *,
        worker: str,
        task_names: list[str],
        queues: tuple[str, ...] | None,
        excluded: tuple[str, ...] = (),
        limit: int,
        ahead: int = 0,
    ) -> list[ClaimedJob]:
        """pending -> running for up to ``limit`` due jobs, highest priority first.

        ``queues=None`` serves every queue but ``excluded``. Only ``task_names`` are
        claimed, so a job for a task this worker does not know stays pending, untouched.
        Up to ``ahead`` more are claimed to be held until a slot frees, in order and only
        while a crash would return them to pending (on_crash "retry", crashes left). Those
        come last, with ``held`` set and no ``started_at`` on their rows: recovery hands
        them back without a crash until :meth:`record` records their start.
        """
        if limit + ahead < 1 or not task_names:
            return []
        scope = ClaimScope(worker, tuple(task_names), queues, tuple(excluded))
        return self._write(done=[], scope=scope, limit=limit, ahead=ahead)[1]

    def next_due(
        self,
        *,
        task_names: list[str],
        queues: tuple[str, ...] | None,
        excluded: tuple[str, ...] = (),
    ) -> float | None:
        """Seconds until the earliest pending job of this selection is due, or ``None``."""
        if not task_names:
            return None
        [(seconds,)] = self.queries.fetchall(
            "next_due",
            {**self._selection(task_names, queues, excluded), **self.queries.clock()},
        )
        return None if seconds is None else float(seconds)

    def count_due(
        self,
        *,
        task_names: list[str],
        queues: tuple[str, ...] | None,
        excluded: tuple[str, ...] = (),
        limit: int,
        grace: float = 0.0,
    ) -> int:
        """How many jobs of this selection have been due for ``grace`` s, up to ``limit``."""
        if not task_names:
            return 0
        [(count,)] = self.queries.fetchall(
            "count_due",
            {
                **self._selection(task_names, queues, excluded),
                "limit": limit,
                "grace": grace,
                **self.queries.clock(cutoff=-grace),
            },
        )
        return int(count)

    def _selection(
        self, task_names: list[str], queues: tuple[str, ...] | None, excluded: tuple[str, ...]
    ) -> dict[str, Any]:
        q = self.queries
        return {
            "task_names": q.names(task_names),
            "all_queues": queues is None,
            "queues": q.names(queues or ()),
            "excluded": q.names(excluded),
        }

    def succeed(self, job: ClaimedJob, result: Any, *, worker: str) -> None:
        """running -> succeeded, storing the JSON ``result``; fenced like every worker write.

        A worker records its successes through :meth:`record` instead, many to a statement.
        A result that cannot be stored (json.dumps raises, or the database refuses it) fails
        the job instead, saying so; an outage raises, for the lease to take over.
        """
        try:
            matched, _ = self._write(done=[success(job, result)], scope=_NO_CLAIM, limit=0)
        except Exception as exc:
            if not refused_value(exc):
                raise
            self.fail_unstorable(job, "the result", exc, worker=worker)
            return
        if not matched:
            raise JobRunAborted(_refused(job, "succeed"))
        self._succeeded(job, worker)

    def record(
        self,
        done: list[Success],
        *,
        scope: ClaimScope,
        limit: int,
        ahead: int = 0,
        started: Sequence[ClaimedJob] = (),
    ) -> Claimed:
        """Record the successes ``done`` and the starts of the held jobs ``started``, and
        claim up to ``limit`` + ``ahead`` jobs of ``scope`` (as :meth:`claim` does), in one
        statement on PostgreSQL. A claim that asked for jobs and found none says when the
        next one is due (``Claimed.next_due``).

        A success the fence refuses is logged and dropped: its attempt no longer owns the
        job, so its result must not be written. A start the fence refuses is dropped
        silently: its attempt's outcome, whatever it is, meets the fence too.
        """
        matched, claimed = self._write(
            done=done, scope=scope, limit=limit, ahead=ahead, started=started
        )
        recorded = set(matched)
        for d in done:
            if d.job.id in recorded:
                self._succeeded(d.job, scope.worker)
            else:
                logger.warning("outcome discarded: %s", _refused(d.job, "succeed"))
                self.aborted(d.job, scope.worker)
        return claimed

    def _succeeded(self, job: ClaimedJob, worker: str) -> None:
        logger.info("job %s (%s) succeeded on attempt %s", job.id, job.task_name, job.attempt)
        self._finished(job, states.SUCCEEDED, "succeeded", worker)

    def retry(self, job: ClaimedJob, error: dict[str, Any], delay: float, *, worker: str) -> None:
        """running -> pending after ``delay`` seconds; the failed attempt stays counted.

        The delay is clamped to ``conf.MAX_DELAY``. An outcome the database refuses fails
        the job instead (:meth:`fail_unstorable`).
        """
        delay = self._clamped(job, delay, "retry")
        written = self._outcome(
            "retry",
            job,
            lambda: {
                "delay": delay,
                **error_params(error),
                **self.queries.clock(run_at=delay),
            },
            "the error entry",
            worker,
        )
        if not written:
            return
        logger.warning(
            "job %s (%s) failed attempt %s of %s, retrying in %.3g s: %s",
            job.id,
            job.task_name,
            job.attempt,
            job.max_attempts,
            delay,
            summary(error),
        )
        self._finished(job, states.PENDING, "retried", worker)

    def fail(self, job: ClaimedJob, error: dict[str, Any], *, worker: str) -> None:
        """running -> failed; the row and its error history stay for an operator."""
        if not self._outcome("fail", job, lambda: error_params(error), "the error entry", worker):
            return
        logger.error(
            "job %s (%s) failed for good on attempt %s of %s: %s",
            job.id,
            job.task_name,
            job.attempt,
            job.max_attempts,
            summary(error),
        )
        self._finished(job, states.FAILED, "failed", worker)

    def discard(self, job: ClaimedJob, error: dict[str, Any], *, worker: str) -> None:
        """running -> discarded: the handler raised ``Discard``, its work has no purpose left.

        The attempt's entry goes into ``errors`` and its reason into ``last_error``, as for
        a failure, so an operator sees why; Retry takes it back like any discarded job.
        """
        if not self._outcome("discard", job, lambda: error_params(error), "the reason", worker):
            return
        logger.info(
            "job %s (%s) discarded itself on attempt %s: %s",
            job.id,
            job.task_name,
            job.attempt,
            summary(error),
        )
        self._finished(job, states.DISCARDED, "discarded", worker)

    def snooze(self, job: ClaimedJob, seconds: float, *, worker: str) -> None:
        """running -> pending after ``seconds`` (clamped to ``conf.MAX_DELAY``), giving the
        attempt back."""
        seconds = self._clamped(job, seconds, "snooze")
        written = self._outcome(
            "snooze",
            job,
            lambda: {"delay": seconds, **self.queries.clock(run_at=seconds)},
            "the snooze",
            worker,
        )
        if not written:
            return
        logger.info("job %s (%s) snoozed for %.3g s", job.id, job.task_name, seconds)
        self._finished(job, states.PENDING, "snoozed", worker)

    def fail_unstorable(
        self, job: ClaimedJob, what: str, exc: BaseException, *, worker: str
    ) -> None:
        """running -> failed, fenced, with an entry that every database stores, when
        ``what`` of this attempt (``"the result"``, ``"the error entry"``, ...) could not be
        written as it is: the database refused it, or it could not be encoded. Without this
        the job would stay running until its lease ran out, and run again as a crash."""
        entry = {
            "type": type_name(UnstorableOutcome),
            "message": storable_text(
                f"{what} of attempt {job.attempt} could not be stored "
                f"({type(exc).__name__}: {exception_text(exc)}); the job is failed instead",
                MESSAGE_LIMIT,
            ),
            "traceback": "",
            "attempt": job.attempt,
            "at": timezone.now().isoformat(),
            "worker": storable_text(worker, MESSAGE_LIMIT),
        }
        # No fallback behind this one: if even this write fails, it raises, and the lease
        # running out returns the job (a crash) for another attempt to record.
        self._fenced("fail", job, error_params(entry))
        logger.error(
            "job %s (%s) failed on attempt %s: %s",
            job.id,
            job.task_name,
            job.attempt,
            summary(entry),
        )
        self._finished(job, states.FAILED, "failed", worker)

    def _outcome(
        self,
        statement: str,
        job: ClaimedJob,
        params: Callable[[], dict[str, Any]],
        what: str,
        worker: str,
    ) -> bool:
        """Write an attempt's outcome, fenced; False if it was refused as a value and the
        job failed instead. Outages and a lost fence raise as from any write."""
        try:
            # The parameters are built inside: encoding the error entry may raise too.
            self._fenced(statement, job, params())
        except JobRunAborted:
            raise
        except Exception as exc:
            if not refused_value(exc):
                raise  # the database is away: the lease and recovery take over
            logger.warning(
                "job %s: %s of attempt %s was refused (%s); failing the job instead",
                job.id,
                what,
                job.attempt,
                storable_text(exception_text(exc), LAST_ERROR_LIMIT),
            )
            self.fail_unstorable(job, what, exc, worker=worker)
            return False
        return True

    def _clamped(self, job: ClaimedJob, seconds: float, why: str) -> float:
        delay = clamp_delay(seconds)
        if delay != seconds:
            logger.warning(
                "job %s (%s): the %s delay %r s is outside 0 .. %s s (MAX_DELAY, ten years); "
                "using %s s",
                job.id,
                job.task_name,
                why,
                seconds,
                conf.MAX_DELAY,
                delay,
            )
        return delay

    def save_step(self, job: ClaimedJob, name: str, value: Any) -> None:
        """Record a finished step's JSON result on a running job."""
        self._fenced(
            "save_step",
            job,
            {**self.queries.step_key(name), "value": json.dumps(value)},
        )
        job.steps[name] = value

    def _fenced(self, statement: str, job: ClaimedJob, params: dict[str, Any]) -> None:
        q = self.queries
        matched = q.execute(
            statement,
            {
                "id": job.id,
                "token": job.token,
                "buffer": self.settings.safety_buffer,
                **q.clock(fence=self.settings.safety_buffer),
                **params,
            },
        )
        if matched != 1:
            raise JobRunAborted(_refused(job, statement))

    def _write(
        self,
        *,
        done: list[Success],
        scope: ClaimScope,
        limit: int,
        ahead: int = 0,
        started: Sequence[ClaimedJob] = (),
    ) -> tuple[list[int], Claimed]:
        """Record ``done`` and ``started`` (fenced) and claim up to ``limit`` + ``ahead``
        jobs of ``scope``.

        Returns the ids of the successes the fence matched and the jobs claimed, in one
        statement where the database allows it (:meth:`Queries.record_and_claim`).
        """
        q = self.queries
        # A job that started and succeeded since the last write is recorded as a success
        # only, which records its start too: PostgreSQL must not update one row from two
        # parts of one statement.
        done_ids = {d.job.id for d in done}
        started = [job for job in started if job.id not in done_ids]
        params = {
            "done": _done_rows(done),
            "done_ids": q.ids([d.job.id for d in done]),
            "started": json.dumps([{"id": job.id, "token": job.token} for job in started]),
            "started_ids": q.ids([job.id for job in started]),
            "buffer": self.settings.safety_buffer,
            "worker": scope.worker,
            **self._selection(list(scope.task_names), scope.queues, scope.excluded),
            "limit": limit,
            "ahead": ahead,
            "max_crashes": self.settings.max_crashes,
            "lease": self.settings.lease,
            **q.clock(fence=self.settings.safety_buffer, lease_until=self.settings.lease),
        }
        claiming = bool(limit + ahead) and bool(scope.task_names)
        matched, claimed_rows, next_due = q.record_and_claim(
            params, done=bool(done), started=bool(started), claiming=claiming
        )
        return matched, Claimed(self._claimed(claimed_rows, scope.worker), next_due)

    def _claimed(self, rows: list[ClaimedRow], worker: str) -> list[ClaimedJob]:
        jobs = [
            ClaimedJob(
                id=row.id,
                task_name=row.task_name,
                queue=row.queue,
                priority=row.priority,
                args=row.args,
                kwargs=row.kwargs,
                attempt=row.attempt,
                max_attempts=row.max_attempts,
                crashes=row.crashes,
                token=row.token,
                steps=row.steps,
                held=row.held,
                waited=row.waited,
                trace_context=row.trace_context,
            )
            for row in rows
        ]
        # The jobs for the free slots first, then the held ones, each by priority: the line
        # is first in first out, so a job recorded as started is one a slot takes at once.
        jobs.sort(key=lambda job: (job.held, -job.priority, job.id))
        for job in jobs:
            logger.debug(
                "claimed job %s (%s), attempt %s%s",
                job.id,
                job.task_name,
                job.attempt,
                ", held until a slot frees" if job.held else "",
            )
            if not job.held:
                self.started(job, worker)
        return jobs

    def started(self, job: ClaimedJob, worker: str) -> None:
        """Send ``job_started`` for ``job``: by the claim for a free slot's job, by the
        worker when a slot takes a held one (whose start its writer records next)."""
        signals.job_started.send(
            sender=Store,
            job_id=job.id,
            task_name=job.task_name,
            queue=job.queue,
            attempt=job.attempt,
            worker=worker,
            wait=job.waited + (time.monotonic() - job.claimed),
        )

    def _finished(self, job: ClaimedJob, status: str, outcome: str, worker: str) -> None:
        signals.job_finished.send(
            sender=Store,
            job_id=job.id,
            task_name=job.task_name,
            queue=job.queue,
            status=status,
            outcome=outcome,
            attempt=job.attempt,
            worker=worker,
            duration=job.duration,
        )

    def aborted(self, job: ClaimedJob, worker: str) -> None:
        """Send ``job_aborted``: the fence refused ``job``'s outcome, nothing was written."""
        signals.job_aborted.send(
            sender=Store,
            job_id=job.id,
            task_name=job.task_name,
            queue=job.queue,
            attempt=job.attempt,
            worker=worker,
            duration=job.duration,
        )

    # -- liveness ---------------------------------------------------------------------

    def register_worker(
        self,
        *,
        worker: str,
        hostname: str,
        pid: int,
        pool: str,
        queues: dict[str, Any],
        concurrency: int,
        tasks: Sequence[str] = (),
        memory: int | None = None,
    ) -> None:
        """Insert this worker's row, or refresh its heartbeat (and ``tasks``, the task names
        it registered, and ``memory``, its resident bytes) if it is there."""
        self.queries.execute(
            "register_worker",
            {
                "worker": worker,
                "hostname": hostname,
                "pid": pid,
                "pool": pool,
                "queues": json.dumps(queues),
                "tasks": json.dumps(list(tasks)),
                "concurrency": concurrency,
                "memory": memory,
                **self.queries.clock(),
            },
        )

    def deregister_worker(self, worker: str) -> None:
        self.queries.execute("deregister_worker", {"worker": worker})

    def renew_leases(self, worker: str, tokens: list[str]) -> set[int]:
        """Extend by ``LEASE`` every lease in ``tokens`` that this worker still holds.

        Returns the ids renewed; a held job missing from them has lost its lease.
        """
        return self._held("renew_leases", worker, tokens)

    def held_jobs(self, worker: str, jobs: list[ClaimedJob]) -> set[int]:
        """The ids of ``jobs`` this worker still holds: running, with the token it claimed.

        A read, by primary key: a job missing was discarded (or taken over) since.
        """
        if not jobs:
            return set()
        q = self.queries
        rows = q.fetchall(
            "held_jobs",
            {
                "worker": worker,
                "ids": q.ids([job.id for job in jobs]),
                "tokens": q.names([job.token for job in jobs]),
            },
        )
        return {row[0] for row in rows}

    def unclaim(self, worker: str, tokens: list[str], reason: str = "held unstarted") -> set[int]:
        """running -> pending for jobs claimed ahead and never started: no attempt spent, no
        crash counted. Returns the ids handed back; a job missing has lost its lease.

        ``reason`` says why, for ``jobs_handed_back``."""
        returned = self._held("unclaim", worker, tokens)
        if returned:
            signals.send_at_commit(
                signals.jobs_handed_back,
                sender=Store,
                using=self.queries.using,
                job_ids=sorted(returned),
                worker=worker,
                reason=reason,
            )
        return returned

    def _held(self, statement: str, worker: str, tokens: list[str]) -> set[int]:
        # A fenced write to the jobs of one worker, by token; the ids it matched.
        if not tokens:
            return set()
        q = self.queries
        rows = q.fetchall(
            statement,
            {
                "worker": worker,
                "tokens": q.names(tokens),
                "lease": self.settings.lease,
                "buffer": self.settings.safety_buffer,
                **q.clock(lease_until=self.settings.lease, fence=self.settings.safety_buffer),
            },
        )
        return {row[0] for row in rows}

    def rescue_expired(self) -> list[tuple[int, str, str]]:
        """Apply the crash policy to every running job whose lease has expired."""
        return self._recover(
            expired=True,
            worker=None,
            tokens=[],
            reason="The worker stopped renewing its lease (killed, out of memory, or lost).",
        )

    def release(self, worker: str, tokens: list[str], reason: str) -> list[tuple[int, str, str]]:
        """Apply the crash policy at once to jobs a stopping worker still holds."""
        if not tokens:
            return []
        return self._recover(expired=False, worker=worker, tokens=tokens, reason=reason)

    def release_worker(self, worker: str, reason: str) -> list[tuple[int, str, str]]:
        """Apply the crash policy at once to every job a worker known to be dead holds."""
        return self._recover(expired=False, worker=worker, tokens=[], reason=reason, any_token=True)

    def _recover(
        self,
        *,
        expired: bool,
        worker: str | None,
        tokens: list[str],
        reason: str,
        any_token: bool = False,
    ) -> list[tuple[int, str, str]]:
        # A job whose handler started gets the crash policy; one claimed ahead and never
        # started (its started_at still NULL) goes back to pending as unclaim hands it back,
        # with no crash counted and no error entry: the statement tells them apart.
        q = self.queries
        # recover stores a crash's facts in its entry; the words are rendered here, once
        # (jobqueue.explain), and a second statement writes them to the entry's message and
        # to last_error. Recovery is rare, so the second statement, only when a crash was
        # counted, costs nothing that matters; one transaction keeps a job from ever being
        # seen recovered without its words.
        with transaction.atomic(using=q.using):
            rows = q.fetchall(
                "recover",
                {
                    "expired": expired,
                    "worker": worker,
                    "any_token": any_token,
                    "tokens": q.names(tokens),
                    "reason": reason,
                    "max_crashes": self.settings.max_crashes,
                    **q.clock(),
                },
            )
            words = {
                job_id: explain.crash(loads(entry))
                for job_id, _, _, _, started, entry in rows
                if started
            }
            if words:
                q.execute(
                    "explain_recovered",
                    {"words": json.dumps([{"id": i, "message": m} for i, m in words.items()])},
                )
        jobs: list[signals.RecoveredJob] = []
        for job_id, task_name, queue, status, started, _ in rows:
            jobs.append(signals.RecoveredJob(job_id, task_name, queue, status, bool(started)))
            if started:
                log = logger.error if status == states.ABANDONED else logger.warning
                log("job %s (%s) recovered as %s: %s", job_id, task_name, status, words[job_id])
        unstarted = [str(job.id) for job in jobs if not job.crashed]
        if unstarted:
            logger.info(
                "%s %s job(s) claimed ahead and never started went back to pending, with no "
                "crash counted: %s",
                reason,
                len(unstarted),
                ", ".join(unstarted),
            )
        if jobs:
            signals.send_at_commit(
                signals.jobs_recovered,
                sender=Store,
                using=q.using,
                jobs=jobs,
                reason=reason,
                worker=worker,
            )
        return [(job.id, job.task_name, job.status) for job in jobs]

    def reap_workers(self) -> int:
        """Delete worker rows with no heartbeat for a whole ``LEASE``."""
        lease = self.settings.lease
        return self.queries.execute(
            "reap_workers", {"lease": lease, **self.queries.clock(cutoff=-lease)}
        )

    def rescue_pass(self) -> list[tuple[int, str, str]]:
        """A worker's recovery pass: :meth:`rescue_expired`, then :meth:`reap_workers`, and
        what the first returned. When no lease has expired, which is nearly always, that is
        one statement on PostgreSQL: the check, with the reap in it."""
        lease = self.settings.lease
        # Recovery first, then the reap, when a lease has expired: recover reads the dead
        # worker's row (host, pid, last heartbeat) into the crash's entry. A lease that
        # expires between the check and recover is recovered all the same, since recover
        # looks again.
        if not self.queries.rescue_check({"lease": lease, **self.queries.clock(cutoff=-lease)}):
            return []
        recovered = self.rescue_expired()
        self.reap_workers()
        return recovered

    def unregistered_pending(self) -> list[tuple[str, str, int]]:
        """``(queue, task_name, count)`` of the pending jobs whose task no live worker (one
        renewed within ``LEASE``) has registered, most jobs first: as things are, no worker
        will claim them."""
        lease = self.settings.lease
        rows = self.queries.fetchall(
            "unregistered_pending", {"lease": lease, **self.queries.clock(cutoff=-lease)}
        )
        return [(queue, task_name, int(count)) for queue, task_name, count in rows]

    # -- maintenance ------------------------------------------------------------------

    def prune(self, max_batches: int | None = None) -> dict[str, int]:
        """Delete finished rows older than ``RETENTION``, one batch per statement.

        With ``max_batches``, stop after that many statements (a worker prunes a backlog
        a slice at a time between looks for work); ``more_to_prune`` then says so.
        """
        deleted: dict[str, int] = {}
        budget = max_batches
        self.more_to_prune = False
        try:
            for status, age in self.settings.retention.items():
                if age is None:
                    continue
                deleted[status] = 0
                while True:
                    if budget is not None:
                        if budget == 0:
                            self.more_to_prune = True
                            break
                        budget -= 1
                    count = self.queries.execute(
                        "prune",
                        {
                            "status": status,
                            "age": age,
                            "batch": PRUNE_BATCH,
                            **self.queries.clock(cutoff=-age),
                        },
                    )
                    deleted[status] += count
                    if count < PRUNE_BATCH:
                        break
                if deleted[status]:
                    logger.info("pruned %s %s job(s) older than %g s", deleted[status], status, age)
        finally:
            # Also when a batch fails: each batch before it is its own committed statement.
            pruned = {status: count for status, count in deleted.items() if count}
            if pruned:
                signals.send_at_commit(
                    signals.jobs_pruned, sender=Store, using=self.queries.using, deleted=pruned
                )
        return deleted

    # -- operator side ----------------------------------------------------------------
    # Retry and Discard, for the admin, ``manage.py jobs`` and any script alike. Each is ONE
    # statement over the whole selection with every guard in its WHERE (never a read, then a
    # write), followed by one read that explains, for the report, why the rest was skipped.

    def retry_jobs(self, selection: Selection, *, dry_run: bool = False) -> Outcome:
        """failed | abandoned | discarded -> pending, due now, attempts and crashes at 0.

        Skipped: a job whose lease has not run out (its worker may be alive), a job whose
        idempotency key a newer unfinished job holds, and every other status. ``dry_run``
        runs the same statements and rolls them back.
        """
        for tries_left in (2, 1, 0):
            try:
                return self._operate("retry", selection, dry_run)
            except IntegrityError:
                # An enqueue of the same key committed between the statement's snapshot and
                # its write. Run it again: it sees that job now, and skips this one.
                if not tries_left:
                    raise
        raise AssertionError("unreachable")

    def discard_jobs(self, selection: Selection, *, dry_run: bool = False) -> Outcome:
        """Any status but succeeded -> discarded; a running job's worker loses its fence."""
        return self._operate("discard", selection, dry_run)

    def _operate(self, action: Action, selection: Selection, dry_run: bool) -> Outcome:
        q = self.queries
        scope = compile_selection(selection, q)
        # A savepoint: a key collision or a dry run rolls back this operation only, never the
        # caller's transaction.
        # operator_retry notifies each retried job's queue, as enqueue does, and
        # operator_discard each running job's worker (channel.CANCEL_PREFIX), where the
        # database has NOTIFY (the SQLite statements have no use for the channel).
        with transaction.atomic(using=q.using):
            rows = self._operator_rows(
                f"operator_{action}",
                scope,
                {"channel": NOTIFY_CHANNEL, "cancel_prefix": CANCEL_PREFIX},
            )
            done = sorted(row[0] for row in rows)
            counts = self._operator_rows(f"operator_{action}_skipped", scope, {"done": q.ids(done)})
            if dry_run:
                transaction.set_rollback(True, using=q.using)
        skipped: dict[str, int] = {}
        for reason, count in counts:
            # A discardable status among the skipped means the job was in another one
            # when the statement ran, and has changed since.
            if action == "discard" and reason in states.DISCARDABLE:
                reason = "changed"
            skipped[reason] = skipped.get(reason, 0) + count
        if scope.requested is not None:
            missing = scope.requested - len(done) - sum(skipped.values())
            if missing:
                skipped["missing"] = missing
        outcome = Outcome(
            action=action,
            done=done,
            skipped=skipped,
            running=sum(1 for row in rows if action == "discard" and row[1] is not None),
            dry_run=dry_run,
        )
        if not dry_run:
            self._operated(outcome)
            if action == "retry":
                # This process's workers wake at commit, as for an enqueue; other processes'
                # hear the NOTIFY, which PostgreSQL delivers at the same commit.
                signals.send_jobs_committed_at_commit((row[1] for row in rows), q.using)
        return outcome

    def _operator_rows(
        self, name: str, scope: SelectionSQL, params: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        q = self.queries
        return q.fetchall_selection(name, scope.sql, {**scope.params, **q.clock(), **params})

    def _operated(self, outcome: Outcome) -> None:
        ids = ", ".join(map(str, outcome.done[:20])) + (", ..." if len(outcome.done) > 20 else "")
        log = logger.warning if outcome.running or outcome.skipped_count else logger.info
        log("operator %s: %s Ids: %s", outcome.action, outcome.message(), ids or "none")
        if outcome.done:
            signal = signals.jobs_retried if outcome.action == "retry" else signals.jobs_discarded
            signal.send(sender=Store, job_ids=outcome.done, using=self.queries.using)


def success(job: ClaimedJob, result: Any) -> Success:
    """A finished job and its result, ready for :meth:`Store.record`."""
    return Success(job, json.dumps(result))


def _refused(job: ClaimedJob, statement: str) -> str:
    return (
        f"job {job.id} ({job.task_name}) attempt {job.attempt}: the {statement} write was "
        "refused because this attempt no longer owns the job (its claim token changed, or "
        "its lease has less than SAFETY_BUFFER left)"
    )


def _done_rows(done: list[Success]) -> str:
    # Each result is already JSON text: splice it in as a value rather than encode it twice.
    parts = [
        f'{{"id": {d.job.id}, "token": {json.dumps(d.job.token)}, "result": {d.result}}}'
        for d in done
    ]
    return "[" + ", ".join(parts) + "]"


def clamp_delay(seconds: float) -> float:
    """``seconds`` within 0 .. ``conf.MAX_DELAY``; NaN and infinity become the maximum.

    A longer delay would put ``run_at`` past what Python's datetime (year 9999) or the
    database can hold: an OverflowError on SQLite, and on PostgreSQL a row that breaks
    every page that reads it.
    """
    if not seconds <= conf.MAX_DELAY:  # also True for NaN
        return float(conf.MAX_DELAY)
    return max(0.0, float(seconds))
