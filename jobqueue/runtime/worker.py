"""One worker process: claim up to the free slots, run, wait, and shut down within bounds."""

from __future__ import annotations

import heapq
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from jobqueue import conf, signals, tasks
from jobqueue.enqueue import NOTIFY_CHANNEL
from jobqueue.runtime import attempt as attempts
from jobqueue.runtime import queues as queue_selection
from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.executor import Executor
from jobqueue.runtime.lease import Heartbeat
from jobqueue.runtime.limits import Limits
from jobqueue.runtime.listener import Listener, connection_target
from jobqueue.runtime.polling import SAFETY_POLL, PollBackoff
from jobqueue.store import ClaimedJob, ClaimScope, NextClaim, Store

logger = logging.getLogger("jobqueue.worker")
T = TypeVar("T")

PRUNE_INTERVAL = 3600.0
# A backlog of expired rows is pruned a slice at a time, so that a worker started on a big
# table claims work at once instead of deleting for minutes first.
PRUNE_SLICE = 20  # statements of PRUNE_BATCH rows
PRUNE_SLICE_PAUSE = 1.0

# A success waits this long at most for those of the other busy slots: on a disk where each
# commit waits for a flush, one commit of four jobs costs about what one of one does.
SUCCESS_LINGER = 0.001

EXIT_OK = 0
EXIT_STUCK = 3  # handlers stuck past their timeout filled the slots: restart this process


class Worker:
    """Runs the jobs of one pool's queues on ``concurrency`` slots."""

    def __init__(
        self,
        *,
        pool: str | None = None,
        queues: Sequence[str] = (),
        exclude_queues: Sequence[str] = (),
        concurrency: int | None = None,
        burst: bool = False,
        max_jobs: int | None = None,
        max_memory: int | None = None,
        time_limit: float | None = None,
        idle_timeout: float | None = None,
        shutdown_timeout: float | None = None,
        worker_id: str | None = None,
        using: str = DEFAULT_DB_ALIAS,
        settings: conf.Settings | None = None,
    ) -> None:
        self.settings = settings or conf.get()
        self.pool = self.settings.pools[pool or default_pool(self.settings)]
        self.queues, self.excluded = queue_selection.select(
            self.settings, self.pool, queues, exclude_queues
        )
        self.concurrency = concurrency or self.pool.concurrency
        self.burst = burst
        # The pool's limits, unless the command line says otherwise.
        self.limits = Limits(
            max_jobs=max_jobs or self.pool.max_jobs,
            max_memory=max_memory or self.pool.max_memory,
            time_limit=time_limit or self.pool.time_limit,
            idle_timeout=idle_timeout or (None if self.pool.resident else self.pool.idle_timeout),
        )
        self.shutdown_timeout = (
            self.settings.shutdown_timeout if shutdown_timeout is None else shutdown_timeout
        )
        self.hostname = socket.gethostname()
        self.pid = os.getpid()
        self.id = worker_id or f"{self.hostname}:{self.pid}:{secrets.token_hex(3)}"
        self.store = Store(using, self.settings)
        self.exit_code = EXIT_OK
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.executor = Executor(
            concurrency=self.concurrency,
            run=self._run_attempt,
            on_slot_free=self._wake.set,
        )
        self.store.batch_successes(self.executor.busy, SUCCESS_LINGER)
        self.heartbeat = Heartbeat(
            store=self.store,
            worker=self.id,
            held=self.executor.running,
            register=self._register,
            interval=self.settings.heartbeat_interval,
        )
        self.listener: Listener | None = None
        if self.store.queries.is_postgresql:
            self.listener = Listener(
                target=connection_target(using, self.settings.listen_url),
                channel=NOTIFY_CHANNEL,
                on_notify=self._on_notify,
                on_connect=self._wake.set,
            )
        self._task_names: list[str] = []
        self._scope: ClaimScope | None = None
        self._claims_lock = threading.Lock()
        self._claimed_total = 0
        self._claims_in_flight = 0  # asked for by slots along with a success, not back yet
        self._retiring: str | None = None  # why this process stops claiming, if it does
        self._parent_pid: int | None = None
        # Monotonic times at which jobs this process put back (retry, snooze) fall due.
        self._due_times: list[float] = []
        self._due_lock = threading.Lock()

    # -- control ----------------------------------------------------------------------

    def watch_parent(self, pid: int) -> None:
        """Stop when the process ``pid`` (the supervisor) is no longer this one's parent."""
        self._parent_pid = pid

    def stop(self) -> None:
        """Ask the worker to stop claiming and shut down; safe from a signal handler."""
        self._stop.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> int:
        """Serve until stopped (or, with ``burst``, until nothing is due); return an exit code."""
        self._task_names = tasks.discover()
        self._scope = ClaimScope(self.id, tuple(self._task_names), self.queues, self.excluded)
        self.limits.start()
        self._log_start()
        self._register()
        signals.jobs_committed.connect(self._on_jobs_committed, weak=False)
        self.heartbeat.start()
        self.executor.start()
        if self.listener is not None:
            self.listener.start()
        try:
            self._rescue()
            self._loop()
        finally:
            signals.jobs_committed.disconnect(self._on_jobs_committed)
            self._shutdown()
        return self.exit_code

    # -- the loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        poll = PollBackoff(self.settings.poll_interval)
        now = time.monotonic()
        next_look = now  # look at once on start
        next_rescue = now + self.settings.heartbeat_interval
        next_prune = now  # prune (a slice) at start
        woken = False
        while not self._stop.is_set():
            self._expire_timeouts()
            if self._should_stop():
                break
            now = time.monotonic()
            if now >= next_rescue:
                self._rescue()
                next_rescue = now + self.settings.heartbeat_interval
            if now >= next_prune:
                more = self._prune()
                next_prune = now + (PRUNE_SLICE_PAUSE if more else PRUNE_INTERVAL)
            if self._parent_pid is not None and os.getppid() != self._parent_pid:
                logger.error("worker %s: its supervisor is gone; stopping", self.id)
                self.stop()
                break
            self._retiring = self._retiring or self.limits.retire_reason(
                now, self._claimed_total, self.executor.completed
            )
            if self._retiring:
                # Claim no more, let what runs finish (however long), then leave.
                if self.executor.idle():
                    logger.info("worker %s: %s; exiting to be restarted", self.id, self._retiring)
                    break
                next_look = now + SAFETY_POLL
            elif self.limits.idle_for_too_long(now, busy=not self.executor.idle()):
                logger.info(
                    "worker %s: nothing due for %g s (idle_timeout); exiting",
                    self.id,
                    self.limits.idle_timeout,
                )
                break
            elif woken or now >= next_look or self._pop_due(now):
                # A look costs a query, so only an event or a timer that asked for one makes
                # it; waking for maintenance or a timeout does not.
                wait = self._look(poll)
                if wait is None:
                    break
                next_look = now + wait
            woken = self._sleep(min(next_look, next_rescue, next_prune, self._next_timer()))

    def _look(self, poll: PollBackoff) -> float | None:
        """Claim what fits in the free slots; return how long until the next look."""
        # Claim only what can run now: the limit is the number of free slots.
        free = self._claim_limit(self.executor.free_slots())
        if not free:
            # Every slot is busy: a freed slot wakes us, and we claim again at once.
            return SAFETY_POLL
        try:
            claimed = self._retrying_once(lambda: self._claim(free))
        except DatabaseError:
            # The database is away (restart, failover): keep the process and its in-flight
            # jobs, and look again after the idle wait.
            wait = poll.empty_look()
            logger.exception("worker %s: claim failed; retrying in %g s", self.id, wait)
            connections[self.store.queries.using].close()
            return wait
        if claimed:
            self.limits.last_busy = time.monotonic()
            poll.found_work()
            # We may have taken everything due; a freed slot or a notification wakes us.
            return SAFETY_POLL if self._listening() else self.settings.poll_interval
        if self.burst and self.executor.idle():
            logger.info("worker %s: nothing is due, leaving (--burst)", self.id)
            return None
        # An empty look. With LISTEN a notification wakes us; without, poll, twice as long
        # after each empty look. Either way, sleep no longer than until a job is due.
        wait = SAFETY_POLL if self._listening() else poll.empty_look()
        due = self._next_due()
        return wait if due is None else max(0.0, min(wait, due))

    def _retrying_once(self, query: Callable[[], T]) -> T:
        # After a database restart this thread's connection is dead but the database is
        # back: one fresh connection, at once, rather than a wait of a whole poll.
        try:
            return query()
        except DatabaseError:
            connections[self.store.queries.using].close()
            return query()

    def _next_due(self) -> float | None:
        try:
            return self._retrying_once(
                lambda: self.store.next_due(
                    task_names=self._task_names, queues=self.queues, excluded=self.excluded
                )
            )
        except DatabaseError:
            connections[self.store.queries.using].close()
            return None

    def _next_timer(self) -> float:
        """The earliest of: an attempt's timeout, a job this process put back falling due."""
        timers = [time.monotonic() + (1.0 if self._parent_pid is not None else SAFETY_POLL)]
        timers += self.limits.timers()
        deadline = self.executor.next_deadline()
        if deadline is not None:
            timers.append(deadline)
        with self._due_lock:
            if self._due_times:
                timers.append(self._due_times[0])
        return min(timers)

    def _pop_due(self, now: float) -> bool:
        """True if a job this process put back (retry, snooze) has fallen due since."""
        due = False
        with self._due_lock:
            while self._due_times and self._due_times[0] <= now:
                heapq.heappop(self._due_times)
                due = True
        return due

    def _sleep(self, until: float) -> bool:
        """Wait until ``until`` or an event; True if an event (slot, notification) woke us."""
        timeout = until - time.monotonic()
        woken = self._wake.wait(timeout) if timeout > 0 else self._wake.is_set()
        self._wake.clear()
        return woken

    def _listening(self) -> bool:
        return self.listener is not None and self.listener.connected.is_set()

    def _claim(self, limit: int) -> list[ClaimedJob]:
        claimed = self.store.claim(
            worker=self.id,
            task_names=self._task_names,
            queues=self.queues,
            excluded=self.excluded,
            limit=limit,
        )
        logger.debug("looked for up to %s job(s), claimed %s", limit, len(claimed))
        with self._claims_lock:
            self._claimed_total += len(claimed)
        for job in claimed:
            self.executor.submit(self._attempt(job))
        return claimed

    def _claim_limit(self, free: int) -> int:
        with self._claims_lock:
            return self.limits.claim_limit(free, self._claimed_total + self._claims_in_flight)

    def _run_attempt(self, attempt: Attempt) -> Attempt | None:
        """A slot runs ``attempt``; its success also claims the slot's next job, if it may."""
        asked: list[NextClaim] = []

        def ask_next(finished: Attempt) -> NextClaim | None:
            then = self._next_claim(finished)
            if then is not None:
                asked.append(then)
            return then

        try:
            attempts.run(attempt, self.store, self.id, ask_next=ask_next)
        except Exception:
            # Logged here rather than by the slot: a job claimed along with the success is
            # still this slot's to run, even if something after the write raised.
            logger.exception("job %s: unexpected error in the worker", attempt.job.id)
        return self._claim_answered(asked[0] if asked else None)

    def _claim_answered(self, then: NextClaim | None) -> Attempt | None:
        if then is None:
            return None
        with self._claims_lock:
            self._claims_in_flight -= 1
            self._claimed_total += then.job is not None
        if then.job is None:
            return None
        self.limits.last_busy = time.monotonic()
        return self._attempt(then.job)

    def _next_claim(self, finished: Attempt) -> NextClaim | None:
        # Not while stopping or retiring, not from an attempt that left its slot, and never
        # past max_jobs: a request counts against the limit until its answer is back.
        if self._stop.is_set() or self._retiring or self._scope is None:
            return None
        if finished.timed_out or finished.cancelled.is_set():
            return None
        # The loop checks the limits between the jobs it hands out; this is between jobs too.
        reason = self.limits.retire_reason(
            time.monotonic(), self._claimed_total, self.executor.completed + 1
        )
        if reason:
            self._retiring = self._retiring or reason
            self._wake.set()
            return None
        with self._claims_lock:
            if not self.limits.claim_limit(1, self._claimed_total + self._claims_in_flight):
                return None
            self._claims_in_flight += 1
        return NextClaim(self._scope)

    def _attempt(self, job: ClaimedJob) -> Attempt:
        task = tasks.get(job.task_name)
        assert task is not None, "the claim is restricted to registered task names"
        return Attempt(job=job, task=task, on_scheduled=self._due_in)

    def _due_in(self, delay: float) -> None:
        with self._due_lock:
            heapq.heappush(self._due_times, time.monotonic() + delay)
        # No wake-up here: the slot that called this frees itself next, and that wakes the
        # loop, which then sleeps until this job is due.

    def _should_stop(self) -> bool:
        if self.heartbeat.error is not None or not self.heartbeat.alive:
            logger.critical("worker %s: the heartbeat thread died; stopping", self.id)
            self.exit_code = 1
            return True
        stuck = self.executor.stuck
        if stuck > self.concurrency:
            logger.error(
                "worker %s: %s handler(s) are stuck past their timeout; stopping so that the "
                "process can be restarted instead of leaking threads",
                self.id,
                stuck,
            )
            self.exit_code = EXIT_STUCK
            return True
        return False

    def _expire_timeouts(self) -> None:
        expired = self.executor.expire()
        if expired:
            self._wake.set()  # their slots are free again: look for work
        for attempt in expired:
            logger.error(
                "job %s (%s): %s; its slot is freed and its late outcome will be discarded",
                attempt.job.id,
                attempt.job.task_name,
                attempts.timeout_message(attempt),
            )
            attempts.record_timeout(self.store, attempt, self.id)

    def _on_jobs_committed(self, sender: Any, *, queue: str, database: str, **kwargs: Any) -> None:
        # A job this process enqueued (a handler fanning out, say) needs no notification.
        if database == self.store.queries.using and self._serves(queue):
            self._wake.set()

    def _on_notify(self, queue: str) -> None:
        if self._serves(queue):
            logger.debug("worker %s: woken by a notification for queue %s", self.id, queue)
            self._wake.set()

    def _serves(self, queue: str) -> bool:
        if queue in self.excluded:
            return False
        return self.queues is None or queue in self.queues

    # -- maintenance ------------------------------------------------------------------

    def _register(self) -> None:
        self.store.register_worker(
            worker=self.id,
            hostname=self.hostname,
            pid=self.pid,
            pool=self.pool.name,
            queues={"queues": self.queues, "excluded": self.excluded},
            concurrency=self.concurrency,
        )

    def _rescue(self) -> None:
        try:
            recovered = self.store.rescue_expired()
            self.store.reap_workers()
        except Exception:
            logger.exception("worker %s: crash recovery failed; trying again later", self.id)
            connections[self.store.queries.using].close()
            return
        if any(status == "pending" for _, _, status in recovered):
            self._wake.set()

    def _prune(self) -> bool:
        """Prune one slice; True if more expired rows wait."""
        try:
            self.store.prune(max_batches=PRUNE_SLICE)
        except Exception:
            logger.exception("worker %s: retention pruning failed; trying again later", self.id)
            connections[self.store.queries.using].close()
            return False
        return self.store.more_to_prune

    # -- shutdown ---------------------------------------------------------------------

    def _shutdown(self) -> None:
        in_flight = len(self.executor.running())
        if in_flight:
            logger.info(
                "worker %s: stopped claiming; waiting up to %g s for %s in-flight job(s)",
                self.id,
                self.shutdown_timeout,
                in_flight,
            )
        if not self.executor.wait_idle(self.shutdown_timeout):
            self._release_unfinished()
        if self.listener is not None:
            self.listener.stop()
        self.heartbeat.stop()
        try:
            self.store.deregister_worker(self.id)
        except Exception:
            logger.exception("worker %s: could not remove its worker row", self.id)
        self.executor.stop()
        connections.close_all()
        logger.info("worker %s: stopped", self.id)

    def _release_unfinished(self) -> None:
        # The process is about to exit, so these attempts are certainly dead: apply the
        # crash policy now instead of letting the jobs wait out their leases.
        held = self.executor.running()
        for attempt in held:
            attempt.cancelled.set()
        reason = (
            f"The worker shut down before the job finished (waited SHUTDOWN_TIMEOUT "
            f"{self.shutdown_timeout:g} s)."
        )
        released = self.store.release(self.id, [a.job.token for a in held], reason)
        logger.warning(
            "worker %s: %s job(s) still running after %g s were handed back: %s",
            self.id,
            len(released),
            self.shutdown_timeout,
            ", ".join(f"{job_id} -> {status}" for job_id, _, status in released) or "none",
        )

    def _log_start(self) -> None:
        queues = "every queue" if self.queues is None else ", ".join(self.queues) or "no queue"
        if self.excluded:
            queues += f" except {', '.join(self.excluded)}"
        logger.info(
            "worker %s starting: pool %s, %s, concurrency %s, %s task(s); default timeout %s, "
            "lease %g s (renewed every %g s), shutdown timeout %g s",
            self.id,
            self.pool.name,
            queues,
            self.concurrency,
            len(self._task_names),
            f"{self.settings.timeout:g} s" if self.settings.timeout else "none",
            self.settings.lease,
            self.settings.heartbeat_interval,
            self.shutdown_timeout,
        )
        if not self._task_names:
            logger.warning(
                "worker %s: no task is registered; define tasks in an installed app's tasks.py "
                'or list their modules in JOBQUEUE["TASK_MODULES"]',
                self.id,
            )


def default_pool(settings: conf.Settings) -> str:
    """The pool a ``Worker`` built without one serves: "default", else the catch-all, else
    the first one."""
    if "default" in settings.pools:
        return "default"
    catch_all = settings.catch_all_pool()
    return catch_all.name if catch_all else next(iter(settings.pools))
