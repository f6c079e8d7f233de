"""How jobs pass between the writer's claims, the executor's line and the slots.

``Intake`` takes in what a claim brought (on the thread that ran the claim: the writer's,
or the loop's for an inline claim). On the loop's thread, it hands back, unstarted, what
waited in line too long or was still in line at shutdown, and gives the jobs still running
when the shutdown ran out of time to the crash policy. One lock, held while claimed jobs
join the line and while the shutdown begins, makes sure that none joins it after that.

``Runner`` is the worker's side of each attempt. On the slot's thread that took it, it
records a held job's start, runs it, and hands a success to the writer, freeing the slot
first. On the loop's thread, it records the timeout of an attempt that outlived it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from jobqueue.runtime import attempt as attempts
from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.demand import Demand
from jobqueue.runtime.due import Due
from jobqueue.runtime.executor import Executor
from jobqueue.runtime.outage import Health
from jobqueue.runtime.service import Control
from jobqueue.runtime.writer import Writer
from jobqueue.store.jobs import ClaimedJob, Store, success
from jobqueue.tasks import base as tasks

logger = logging.getLogger("jobqueue.worker")


class Intake:
    """Claimed jobs into the line; held ones back to the database, unspent."""

    def __init__(
        self,
        *,
        store: Store,
        worker: str,
        executor: Executor,
        demand: Demand,
        due: Due,
        control: Control,
        health: Health,
    ) -> None:
        self._store = store
        self._worker = worker
        self._executor = executor
        self._demand = demand
        self._due = due
        self._control = control
        self._health = health
        # Held while claimed jobs join the line, and while the shutdown begins: after that,
        # none joins it.
        self._submitting = threading.Lock()

    def take(self, jobs: list[ClaimedJob], asked: int, recorded: int) -> None:
        """Take the jobs a statement claimed, having asked ``asked`` for the free slots and
        recorded ``recorded`` successes."""
        if jobs or asked or recorded:  # a statement went out, and through: no outage now
            self._health.ok()
        with self._submitting:
            stopped = self._control.stopping
            if not stopped:
                for job in jobs:
                    self._executor.submit(self._attempt(job))
        if jobs and stopped:
            # Claimed by a statement that was already out when the shutdown began: they go
            # back unstarted rather than into a line that nothing will serve.
            self._unclaim([job.token for job in jobs], "claimed as the worker stopped")
            return
        self._demand.claimed(len(jobs))
        logger.debug("recorded %s success(es), claimed %s job(s)", recorded, len(jobs))
        if recorded and (len(jobs) < asked or self._demand.retiring or self._control.stopping):
            # Slots freed by these successes stay empty: the loop looks (with --burst, it
            # leaves if nothing is due), or, if it is winding down, sees whether it is done.
            self._control.wake()

    def close(self) -> None:
        """Begin the shutdown: stop the loop and the claims; from here on a claimed job
        goes back instead of joining the line."""
        with self._submitting:
            self._control.stop()

    def next_hand_back(self) -> float | None:
        """When the job longest in line has waited too long (monotonic), None if none waits."""
        oldest = self._executor.oldest_held()
        return None if oldest is None else oldest + self._demand.hold_limit

    def hand_back_overdue(self, now: float) -> None:
        """Hand back the jobs held in line for over the hold limit."""
        limit = self._demand.hold_limit
        self._hand_back(self._executor.take_held(now - limit), f"held for over {limit:g} s")

    def hand_back_all(self) -> None:
        """Hand back every job still in line (the worker is stopping)."""
        self._hand_back(self._executor.take_held(), "held unstarted")

    def release_running(self, waited: float) -> None:
        """Apply the crash policy to the jobs still running after a shutdown waited
        ``waited`` seconds for them."""
        # The process is about to exit, so these attempts are certainly dead: apply the
        # crash policy now instead of letting the jobs wait out their leases.
        held = self._executor.running()
        for attempt in held:
            attempt.cancelled.set()
        reason = (
            f"The worker shut down before the job finished (waited SHUTDOWN_TIMEOUT {waited:g} s)."
        )
        released = self._store.release(self._worker, [a.job.token for a in held], reason)
        logger.warning(
            "worker %s: %s job(s) still running after %g s were handed back: %s",
            self._worker,
            len(released),
            waited,
            ", ".join(f"{job_id} -> {status}" for job_id, _, status in released) or "none",
        )

    def _hand_back(self, held: list[Attempt], why: str) -> None:
        # Pending again, with no attempt spent and no crash counted.
        if not held:
            return
        self._demand.handed_back()
        self._unclaim([a.job.token for a in held], why)

    def _unclaim(self, tokens: list[str], why: str) -> None:
        # On failure they are still this worker's: their leases run out and recovery
        # returns them.
        with self._health.trying(
            "handing back held jobs",
            self._store.queries.using,
            "worker %s: could not hand back %s job(s)",
            self._worker,
            len(tokens),
        ) as attempt:
            returned = self._store.unclaim(self._worker, tokens, why)
        if attempt.failed:
            return
        logger.info("worker %s: handed back %s job(s) %s", self._worker, len(returned), why)

    def _attempt(self, job: ClaimedJob) -> Attempt:
        task = tasks.get(job.task_name)
        assert task is not None, "the claim is restricted to registered task names"
        return Attempt(job=job, task=task, on_scheduled=self._due.add)


class Runner:
    """What becomes of each attempt: the executor's runner."""

    def __init__(self, *, store: Store, worker: str, executor: Executor, writer: Writer) -> None:
        self._store = store
        self._worker = worker
        self._executor = executor
        self._writer = writer

    def starting(self, attempt: Attempt) -> None:
        """A slot took ``attempt`` out of the line and is about to run it."""
        # One claimed for a free slot was recorded as started by its claim; a held one is
        # recorded by the writer's next statement, from when on a death of this process
        # counts a crash for it.
        if attempt.job.held:
            self._writer.started(attempt.job)
            self._store.started(attempt.job, self._worker)

    def run(self, attempt: Attempt) -> bool:
        """Run ``attempt``; True if its success went to the writer."""
        return attempts.run(attempt, self._store, self._worker, record_success=self.record_success)

    def record_success(self, attempt: Attempt, value: Any) -> None:
        """Hand the success of ``attempt`` to the writer."""
        # Encoded first: if json.dumps raises, the slot, still busy, fails the job (an idle
        # burst worker must not exit before that is written). Then the slot is freed, so
        # that the writer counts it free when it claims.
        done = success(attempt.job, value)
        self._executor.end(attempt)
        self._writer.add(done)

    def expire_timeouts(self) -> bool:
        """Take the attempts past their timeout out of their slots (on the loop's thread)
        and record their timeout; True if that freed a slot."""
        expired = self._executor.expire()
        for attempt in expired:
            logger.error(
                "job %s (%s): %s; its slot is freed and its late outcome will be discarded",
                attempt.job.id,
                attempt.job.task_name,
                attempts.timeout_message(attempt),
            )
            attempts.record_timeout(self._store, attempt, self._worker)
        return bool(expired)
