"""The writer: one thread records a worker's successes and claims the jobs that come next.

A slot that finishes a job hands its success to the writer and goes on to a held job, if
there is one, without waiting for the write. The writer sends everything that came in while
its last statement was out as one statement, which also claims what the slots need next:
on PostgreSQL one statement, on SQLite one transaction. A slow disk then costs one commit
per batch of jobs, not per job, and the slots keep running while it is paid.

Handing a success over does not make it any less durable than writing it from the slot: in
both cases the job is recorded only once the statement commits, and a crash before then
leaves it running, for recovery. A success is logged and signalled only once it is in the
database, and a stopping worker waits for every success it handed over to be written.
All claims of a busy worker go through here, so they never race each other for the slots.

A job claimed ahead is held with no recorded start. When a slot takes it, its start is
handed over too, and goes out with the next statement (which that wakes, if none is out):
recovery counts a crash only for a job whose start is recorded.
"""

from __future__ import annotations

import logging
import threading
from typing import NamedTuple, Protocol

from django.db import connections

from jobqueue.exceptions import JobRunAborted
from jobqueue.runtime.outage import HEALTH
from jobqueue.store.jobs import (
    LAST_ERROR_LIMIT,
    Claimed,
    ClaimedJob,
    ClaimScope,
    Store,
    Success,
    exception_text,
    refused_value,
    storable_text,
)

logger = logging.getLogger("jobqueue.worker")

# After a failed write (the database is away), wait this long before the next one.
RETRY_PAUSE = 1.0


class Look(NamedTuple):
    """What one claim for the free slots found."""

    asked: int  # jobs asked for: none if the slots had filled before it went out
    claimed: int
    # When it claimed nothing: seconds until the next job of the worker's selection is due
    # (0 or less if one is due already), None if none is pending.
    next_due: float | None


NOTHING_ASKED = Look(0, 0, None)


class ClaimDemand(Protocol):
    """What the writer asks before each statement (the worker's ``demand.Demand``)."""

    def sizes(self) -> tuple[int, int]:
        """How many jobs to claim for the free slots, and how many ahead of them."""
        ...


class ClaimIntake(Protocol):
    """Who takes what a statement claimed (the worker's ``intake.Intake``)."""

    def take(self, jobs: list[ClaimedJob], asked: int, recorded: int) -> None:
        """Take ``jobs``, claimed by a statement that asked ``asked`` for the free slots and
        recorded ``recorded`` successes; called on the thread that ran it."""
        ...


class Writer:
    def __init__(
        self,
        *,
        store: Store,
        demand: ClaimDemand,
        intake: ClaimIntake,
        name: str = "jobqueue-writer",
    ) -> None:
        """``demand`` says, when a statement is about to go out, how many jobs to claim;
        ``intake`` takes what came back."""
        self._store = store
        self._demand = demand
        self._intake = intake
        self._scope: ClaimScope | None = None
        self._cond = threading.Condition()
        self._pending: list[Success] = []
        # Held jobs a slot has taken out of the line: their starts go out with the next
        # statement, so that recovery counts a crash for them (and only for them).
        self._started: list[ClaimedJob] = []
        self._asked = 0  # writes started, counted so that claim() can wait for its own
        self._answered = 0
        self._answer: tuple[Look, BaseException | None] = (NOTHING_ASKED, None)
        self._wanted = 0  # the latest write a claim() waits for
        self._writing = False
        self._stopping = False
        self._stopped = threading.Event()  # cuts short the pause after a failed write
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.error: BaseException | None = None

    def start(self, scope: ClaimScope) -> None:
        self._scope = scope
        self._thread.start()

    def add(self, done: Success) -> None:
        """Hand over a success, to be written with the next statement; returns at once."""
        with self._cond:
            self._pending.append(done)
            self._cond.notify_all()

    def started(self, job: ClaimedJob) -> None:
        """Hand over the start of a held job, to be recorded with the next statement, which
        goes out at once if none is out; returns at once. Until it is recorded, the job
        counts as never started if this process dies."""
        with self._cond:
            self._started.append(job)
            self._cond.notify_all()

    def claim(self) -> tuple[int, int]:
        """Claim for the free slots now (see :meth:`look`); how many jobs it asked for and
        how many it claimed."""
        asked, claimed, _ = self.look()
        return asked, claimed

    def look(self) -> Look:
        """Claim for the free slots now, in a statement that starts after this call.

        Returns how many jobs it asked for (none if the slots had filled meanwhile), how
        many it claimed and, if none, when the next one is due, which the same statement
        read; raises the statement's error if it failed. When the writer is idle, the
        statement goes out from the calling thread, on its connection: an idle worker's
        look then costs no hand-off between threads, which is most of a job's start latency.
        """
        with self._cond:
            inline = (
                not self._writing
                and not self._pending
                and not self._started
                and self._thread.is_alive()
            )
            if inline:
                self._writing = True  # the writer thread waits until this claim is done
        if inline:
            return self._claim_here()
        with self._cond:
            self._wanted = ticket = self._asked + 1
            self._cond.notify_all()
            while self._answered < ticket and self._thread.is_alive():
                self._cond.wait(1.0)
            look, error = self._answer
        if error is not None:
            raise error
        return look

    def _claim_here(self) -> Look:
        try:
            limit, ahead = self._demand.sizes()
            claimed = self._record([], limit, ahead)
            self._intake.take(claimed, limit, 0)
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()
        return Look(limit + ahead, len(claimed), claimed.next_due)

    @property
    def pending(self) -> int:
        """Successes handed over and not yet written."""
        with self._cond:
            return len(self._pending) + self._writing

    def stop(self, timeout: float) -> bool:
        """Write what was handed over, then end the thread; False if it did not in time."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        with self._cond:
            left = len(self._pending)
        if left:
            logger.error(
                "%s success(es) could not be written before the worker stopped; their jobs "
                "are recovered when their leases expire",
                left,
            )
        return not left and not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() or self._stopping

    def _run(self) -> None:
        try:
            while self._write_next():
                pass
        except BaseException as exc:  # the worker's loop sees it, and stops
            self.error = exc
            logger.exception("the writer thread failed")
        finally:
            connections.close_all()

    def _write_next(self) -> bool:
        with self._cond:
            while self._writing or (
                not self._pending
                and not self._started
                and self._wanted <= self._asked
                and not self._stopping
            ):
                self._cond.wait()
            if self._stopping and not self._pending and not self._started:
                self._answer_claims(0)
                return False
            done, self._pending = self._pending, []
            started, self._started = self._started, []
            self._asked = self._wanted if self._wanted > self._asked else self._asked
            ticket = self._asked
            self._writing = True
        limit, ahead = self._demand.sizes()
        try:
            claimed = self._record(done, limit, ahead, started)
        except Exception as exc:
            if done and refused_value(exc):
                # One success holds a value the database refuses (a safety net: a slot checks
                # its result before handing it over). Retrying the batch would fail forever
                # and claim nothing: record the successes apart, failing the refused one.
                handled = len(done)
                logger.warning(
                    "the database refused the statement recording %s success(es) (%s: %s); "
                    "recording them one by one",
                    handled,
                    type(exc).__name__,
                    storable_text(exception_text(exc), LAST_ERROR_LIMIT),
                )
                try:
                    claimed = self._record_apart(done, limit, ahead, started)
                except Exception as again:
                    exc = again  # the database went away meanwhile: what is left waits
                else:
                    self._intake.take(claimed, limit, handled)
                    with self._cond:
                        self._writing = False
                        self._answer_claims(
                            ticket, Look(limit + ahead, len(claimed), claimed.next_due)
                        )
                    return True
            # An outage is one line for the whole process (jobqueue.runtime.outage).
            if not HEALTH.failed(exc, f"recording {len(done)} success(es)"):
                logger.error(
                    "could not record %s success(es); retrying in %g s",
                    len(done),
                    RETRY_PAUSE,
                    exc_info=exc,
                )
            connections[self._store.queries.using].close()
            with self._cond:
                # Kept for the next statement: their fence still guards the write.
                self._pending[:0] = done
                self._started[:0] = started
                self._writing = False
                answered = ticket > self._answered
                self._answer_claims(ticket, error=exc)
                stopping = self._stopping
            if stopping:
                return False  # a stopping worker does not wait for the database to come back
            if not answered:
                # Else the loop that asked for this claim chooses its own wait. A stop cuts
                # the pause short, for one more try.
                self._stopped.wait(RETRY_PAUSE)
            return True
        self._intake.take(claimed, limit, len(done))
        with self._cond:
            self._writing = False
            self._answer_claims(ticket, Look(limit + ahead, len(claimed), claimed.next_due))
        return True

    def _record(
        self, done: list[Success], limit: int, ahead: int, started: list[ClaimedJob] | None = None
    ) -> Claimed:
        # One statement, unless there is nothing to record and nothing to claim.
        assert self._scope is not None, "start() sets the scope"
        if not done and not started and not limit + ahead:
            return Claimed()
        return self._store.record(
            done, scope=self._scope, limit=limit, ahead=ahead, started=started or ()
        )

    def _record_apart(
        self, done: list[Success], limit: int, ahead: int, started: list[ClaimedJob]
    ) -> Claimed:
        """Record each success of ``done`` in a statement of its own, claiming nothing, and
        fail through the store each one the database refuses; then record ``started`` and
        claim, as the failed statement would have. Each success leaves ``done`` once it is
        dealt with, so that after an outage on the way only the rest is kept for later.

        The failed statement changed nothing (on PostgreSQL one statement, on SQLite one
        transaction), so nothing is recorded or claimed twice.
        """
        assert self._scope is not None, "start() sets the scope"
        while done:
            one = done[0]
            try:
                self._store.record([one], scope=self._scope, limit=0)
            except Exception as exc:
                if not refused_value(exc):
                    raise
                try:
                    self._store.fail_unstorable(
                        one.job, "the result", exc, worker=self._scope.worker
                    )
                except JobRunAborted as lost:
                    logger.warning("outcome discarded: %s", lost)
            del done[0]
        return self._record([], limit, ahead, started)

    def _answer_claims(
        self, ticket: int, look: Look = NOTHING_ASKED, error: BaseException | None = None
    ) -> None:
        # Called with the lock held: the look() waiting for ``ticket`` (if any) is answered.
        self._answered = max(self._answered, ticket)
        self._answer = (look, error)
        self._cond.notify_all()
