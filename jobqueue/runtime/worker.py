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

from jobqueue import conf, overview, signals, tasks
from jobqueue.channel import NOTIFY_CHANNEL
from jobqueue.runtime import attempt as attempts
from jobqueue.runtime import queues as queue_selection
from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.executor import Executor
from jobqueue.runtime.lease import Heartbeat
from jobqueue.runtime.limits import Limits
from jobqueue.runtime.listener import Listener, connection_target
from jobqueue.runtime.outage import HEALTH, Backoff
from jobqueue.runtime.polling import SAFETY_POLL, PollBackoff
from jobqueue.runtime.ticker import Ticker
from jobqueue.runtime.writer import Writer
from jobqueue.store import ClaimedJob, ClaimScope, Store, success

logger = logging.getLogger("jobqueue.worker")
T = TypeVar("T")

PRUNE_INTERVAL = 3600.0
# A backlog of expired rows is pruned a slice at a time, so that a worker started on a big
# table claims work at once instead of deleting for minutes first.
PRUNE_SLICE = 20  # statements of PRUNE_BATCH rows
PRUNE_SLICE_PAUSE = 1.0
# Pending jobs of tasks no live worker has registered are named in the log at start, then
# at most this often, from the maintenance timer: never a statement on the claim path.
UNREGISTERED_INTERVAL = 600.0

# Jobs are claimed ahead of the slots only while they typically take less than this: then a
# round trip of their own would be a large share of each.
PREFETCH_BELOW = 0.02
# Unless the pool or the command line says otherwise, a worker claims up to this many jobs
# per slot ahead of its slots. A claim is one statement whatever its size, so bigger claims
# of very short jobs drain a queue faster; PREFETCH_WINDOW keeps the wait of longer ones short.
PREFETCH_PER_SLOT = 16
# No more jobs are held than the slots are expected to start within this many seconds, at
# the jobs' typical run time: a held job waits about this long for a slot, at most.
PREFETCH_WINDOW = 0.05
# A job held in line longer than this (every slot taken by longer jobs) is handed back, so
# that another worker may run it.
HOLD_LIMIT = 1.0

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
        prefetch: int | None = None,
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
        # Jobs claimed ahead of the slots, at most.
        self.prefetch = next(
            p
            for p in (prefetch, self.pool.prefetch, PREFETCH_PER_SLOT * self.concurrency)
            if p is not None
        )
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
            on_start=self._on_start,
        )
        self.writer = Writer(store=self.store, sizes=self._claim_sizes, on_claimed=self._claimed)
        self.heartbeat = Heartbeat(
            store=self.store,
            worker=self.id,
            held=self.executor.holding,
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
        self._claimed_total = 0  # written by the writer's thread alone
        # After a hand-back, no claiming ahead until a slot has freed: the slots are taken
        # by long jobs, and what is held would only wait and go back again.
        self._ahead_after = -1  # a value of executor.completed
        self._retiring: str | None = None  # why this process stops claiming, if it does
        self._limits_lock = threading.Lock()
        # Held while claimed jobs join the line, and while the shutdown begins: after that,
        # none joins it.
        self._submitting = threading.Lock()
        self._parent_pid: int | None = None
        # Monotonic times at which jobs this process put back (retry, snooze) fall due.
        self._due_times: list[float] = []
        self._due_lock = threading.Lock()
        # Called once the worker has registered its row (past imports, task discovery,
        # settings and a first statement): runjobs tells its supervisor, which restarts at
        # once a worker that got this far, and with backoff one that did not.
        self.on_ready: Callable[[], None] | None = None
        # One outage is one line for the whole process, whichever thread meets it first.
        self.health = HEALTH
        self.health.begin(f"worker {self.id}")
        self._claim_backoff = Backoff()
        self.ticker = Ticker(self.settings, using, self.health)  # schedules (issue 17)

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
        if not self._register_first():
            return self.exit_code  # stopped while it waited for the database
        if self.on_ready is not None:
            self.on_ready()
        signals.jobs_committed.connect(self._on_jobs_committed, weak=False)
        self.heartbeat.start()
        self.executor.start()
        self.writer.start(self._scope)
        if self.listener is not None:
            self.listener.start()
        try:
            self._rescue()
            self.ticker.start()  # schedules (issue 17)
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
        next_unregistered = now  # and name the tasks no live worker has registered
        next_schedule = self.ticker.next_at()  # schedules (issue 17)
        woken = False
        while not self._stop.is_set():
            self._expire_timeouts()
            if self._should_stop():
                break
            now = time.monotonic()
            if now >= next_rescue:
                self._rescue()
                next_rescue = now + self.settings.heartbeat_interval
            if now >= next_schedule:  # schedules (issue 17)
                next_schedule = self.ticker.run(now)
            self._hand_back_held(claimed_before=now - HOLD_LIMIT)
            if now >= next_prune:
                more = self._prune()
                next_prune = now + (PRUNE_SLICE_PAUSE if more else PRUNE_INTERVAL)
            if now >= next_unregistered:
                self._warn_unregistered()
                next_unregistered = now + UNREGISTERED_INTERVAL
            if self._parent_pid is not None and os.getppid() != self._parent_pid:
                logger.error("worker %s: its supervisor is gone; stopping", self.id)
                self.stop()
                break
            if self._check_limits(now):
                # Claim no more, let what runs finish (however long), then leave.
                if self._idle():
                    logger.info("worker %s: %s; exiting to be restarted", self.id, self._retiring)
                    break
                next_look = now + SAFETY_POLL
            elif self.limits.idle_for_too_long(now, busy=not self._idle()):
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
            woken = self._sleep(
                min(
                    next_look,
                    next_rescue,
                    next_prune,
                    next_unregistered,
                    next_schedule,  # schedules (issue 17)
                    self._next_timer(),
                )
            )

    def _look(self, poll: PollBackoff) -> float | None:
        """Claim for the free slots (the writer does); return how long until the next look."""
        if not sum(self._claim_sizes()):
            # Every slot is busy: a freed slot wakes us, and we claim again at once.
            return SAFETY_POLL
        try:
            asked, claimed = self._retrying_once(self.writer.claim)
        except DatabaseError as exc:
            connections[self.store.queries.using].close()
            if self.health.failed(exc, "claiming"):
                # The database is away (restart, failover): keep the process and its
                # in-flight jobs, and look again soon, so that work resumes within
                # OUTAGE_CAP of its return (a notification or LISTEN's return is sooner).
                return self._claim_backoff.next()
            wait = poll.empty_look()
            logger.exception("worker %s: claim failed; retrying in %g s", self.id, wait)
            return wait
        self.health.ok()
        self._claim_backoff.reset()
        if not self.writer.alive:
            return 0.0  # the loop's next turn sees why, and stops
        if not asked:
            return SAFETY_POLL  # the slots filled before the statement went out
        logger.debug("looked for up to %s job(s), claimed %s", asked, claimed)
        if claimed:
            self.limits.last_busy = time.monotonic()
            poll.found_work()
            # We may have taken everything due; a freed slot or a notification wakes us.
            return SAFETY_POLL if self._listening() else self.settings.poll_interval
        if self.burst and self._idle():
            logger.info("worker %s: nothing is due, leaving (--burst)", self.id)
            return None
        # An empty look. With LISTEN a notification wakes us; without, poll, twice as long
        # after each empty look. Either way, sleep no longer than until a job is due.
        wait = SAFETY_POLL if self._listening() else poll.empty_look()
        due = self._next_due()
        return wait if due is None else max(0.0, min(wait, due))

    def _idle(self) -> bool:
        """Nothing running, nothing in line, no success waiting to be written."""
        return self.executor.idle() and not self.writer.pending

    def _retrying_once(self, query: Callable[[], T]) -> T:
        # After a database restart this thread's connection is dead but the database is
        # back: one fresh connection, at once, rather than a wait of a whole poll. During
        # an outage already seen, the backoff decides instead.
        try:
            return query()
        except DatabaseError:
            connections[self.store.queries.using].close()
            if self.health.down:
                raise
            return query()

    def _next_due(self) -> float | None:
        try:
            return self._retrying_once(
                lambda: self.store.next_due(
                    task_names=self._task_names, queues=self.queues, excluded=self.excluded
                )
            )
        except DatabaseError as exc:
            connections[self.store.queries.using].close()
            # Without it the loop waits its poll, no longer than without a due job.
            if not self.health.failed(exc, "looking for the next due job"):
                logger.exception("worker %s: could not find the next due job", self.id)
            return None

    def _next_timer(self) -> float:
        """The earliest of: an attempt's timeout, a job this process put back falling due."""
        timers = [time.monotonic() + (1.0 if self._parent_pid is not None else SAFETY_POLL)]
        timers += self.limits.timers()
        oldest_held = self.executor.oldest_held()
        if oldest_held is not None:
            timers.append(oldest_held + HOLD_LIMIT)
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

    def _claim_sizes(self) -> tuple[int, int]:
        """How many jobs the next statement claims: for the free slots, and ahead of them.

        Called by the writer just before each statement, and by the loop before it asks.
        """
        if self._stop.is_set() or self._scope is None:
            return 0, 0
        # Between jobs, like the loop: a limit reached here means no more claims.
        if self._check_limits(time.monotonic()):
            self._wake.set()
            return 0, 0
        running, waiting = self.executor.load()
        free = max(0, self.concurrency - running - waiting)
        held = max(0, waiting - (self.concurrency - running))
        ahead = max(0, self._holdable() - held)
        total = self.limits.claim_limit(free + ahead, self._claimed_total)
        return min(free, total), total - min(free, total)

    def _holdable(self) -> int:
        """How many jobs may wait in line now: none unless the jobs are short, and no more
        than the slots are expected to start within PREFETCH_WINDOW."""
        typical = self.executor.typical_run
        if typical is None or typical >= PREFETCH_BELOW:
            return 0
        if self.executor.completed <= self._ahead_after:
            return 0  # handed jobs back, and no slot has freed since
        in_window = int(self.concurrency * PREFETCH_WINDOW / max(typical, 1e-6))
        return min(self.prefetch, in_window)

    def _check_limits(self, now: float) -> str | None:
        """Why this worker retires, if a limit says it should; the first reason stays."""
        # The loop and the writer both check, and a check between jobs happens once per
        # job: under the lock, the other waits for its outcome instead of skipping it.
        with self._limits_lock:
            if not self._retiring:
                self._retiring = self.limits.retire_reason(
                    now, self._claimed_total, self.executor.completed
                )
            return self._retiring

    def _claimed(self, jobs: list[ClaimedJob], asked: int, recorded: int) -> None:
        """Take the jobs a statement of the writer claimed (on the writer's thread)."""
        if jobs or asked or recorded:  # a statement went out, and through: no outage now
            self.health.ok()
        with self._submitting:
            stopped = self._stop.is_set()
            if not stopped:
                for job in jobs:
                    self.executor.submit(self._attempt(job))
        if jobs and stopped:
            # Claimed by a statement that was already out when the shutdown began: they go
            # back unstarted rather than into a line that nothing will serve.
            self._unclaim([job.token for job in jobs], "claimed as the worker stopped")
            return
        self._claimed_total += len(jobs)
        if jobs:
            self.limits.last_busy = time.monotonic()
        logger.debug("recorded %s success(es), claimed %s job(s)", recorded, len(jobs))
        if recorded and (len(jobs) < asked or self._retiring or self._stop.is_set()):
            # Slots freed by these successes stay empty: the loop looks (with --burst, it
            # leaves if nothing is due), or, if it is winding down, sees whether it is done.
            self._wake.set()

    def _on_start(self, attempt: Attempt) -> None:
        # A slot took a job out of the line. One claimed for a free slot was recorded as
        # started by its claim; a held one is recorded by the writer's next statement, from
        # when on a death of this process counts a crash for it.
        if attempt.job.held:
            self.writer.started(attempt.job)

    def _run_attempt(self, attempt: Attempt) -> bool:
        """A slot runs ``attempt``; True if its success went to the writer."""
        return attempts.run(attempt, self.store, self.id, record_success=self._record_success)

    def _record_success(self, attempt: Attempt, value: object) -> None:
        # Encoded first: if json.dumps raises, the slot, still busy, fails the job (an idle
        # burst worker must not exit before that is written). Then the slot is freed, so
        # that the writer counts it free when it claims.
        done = success(attempt.job, value)
        self.executor.end(attempt)
        self.writer.add(done)

    def _hand_back_held(self, claimed_before: float | None = None) -> None:
        """Hand back, unstarted, the jobs held in line since before ``claimed_before``
        (every one if None): pending again, with no attempt spent and no crash counted."""
        held = self.executor.take_held(claimed_before)
        if not held:
            return
        self._ahead_after = self.executor.completed
        why = "held unstarted" if claimed_before is None else f"held for over {HOLD_LIMIT:g} s"
        self._unclaim([a.job.token for a in held], why)

    def _unclaim(self, tokens: list[str], why: str) -> None:
        try:
            returned = self.store.unclaim(self.id, tokens, why)
        except Exception as exc:
            # Still this worker's: their leases run out and recovery returns them.
            if not self.health.failed(exc, "handing back held jobs"):
                logger.exception("worker %s: could not hand back %s job(s)", self.id, len(tokens))
            connections[self.store.queries.using].close()
            return
        logger.info("worker %s: handed back %s job(s) %s", self.id, len(returned), why)

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
        if self.writer.error is not None or not self.writer.alive:
            logger.critical("worker %s: the writer thread died; stopping", self.id)
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

    def _register_first(self) -> bool:
        """Register this worker's row, waiting out a database outage; False if stopped first.

        A worker started while the database is away (a restart, a failover, a supervisor
        replacing a child mid-outage) waits for it, logging the outage once, instead of
        exiting: its supervisor would take an exit for a broken start-up and back off, up
        to a minute, after the database is back. Any other error still ends the process.
        """
        backoff = Backoff()
        while True:
            try:
                self._register()
            except DatabaseError as exc:
                connections[self.store.queries.using].close()
                if not self.health.failed(exc, "registering at start-up"):
                    raise
                if self._stop.wait(backoff.next()):
                    return False
            else:
                self.health.ok()
                return True

    def _register(self) -> None:
        self.store.register_worker(
            worker=self.id,
            hostname=self.hostname,
            pid=self.pid,
            pool=self.pool.name,
            queues={"queues": self.queues, "excluded": self.excluded},
            concurrency=self.concurrency,
            tasks=self._task_names,
        )

    def _rescue(self) -> None:
        try:
            recovered = self.store.rescue_expired()
            self.store.reap_workers()
        except Exception as exc:
            if not self.health.failed(exc, "recovering expired leases"):
                logger.exception("worker %s: crash recovery failed; trying again later", self.id)
            connections[self.store.queries.using].close()
            return
        if any(status == "pending" for _, _, status in recovered):
            self._wake.set()

    def _prune(self) -> bool:
        """Prune one slice; True if more expired rows wait."""
        try:
            self.store.prune(max_batches=PRUNE_SLICE)
        except Exception as exc:
            if not self.health.failed(exc, "pruning"):
                logger.exception("worker %s: retention pruning failed; trying again later", self.id)
            connections[self.store.queries.using].close()
            return False
        return self.store.more_to_prune

    def _warn_unregistered(self) -> None:
        """Name the pending jobs no live worker will claim: their task is registered nowhere."""
        try:
            counts = overview.by_task(self.store.unregistered_pending())
        except Exception as exc:
            if not self.health.failed(exc, "looking for jobs of unregistered tasks"):
                logger.exception(
                    "worker %s: could not look for jobs of unregistered tasks; trying again later",
                    self.id,
                )
            connections[self.store.queries.using].close()
            return
        if counts:
            logger.warning("worker %s: %s", self.id, overview.unregistered_message(counts))

    # -- shutdown ---------------------------------------------------------------------

    def _shutdown(self) -> None:
        with self._submitting:
            self._stop.set()  # the writer claims nothing more from here on
        self._hand_back_held()
        in_flight = len(self.executor.running())
        if in_flight:
            logger.info(
                "worker %s: stopped claiming; waiting up to %g s for %s in-flight job(s)",
                self.id,
                self.shutdown_timeout,
                in_flight,
            )
        finished = self.executor.wait_idle(self.shutdown_timeout)
        # The successes of what finished are written before the worker leaves.
        self.writer.stop(timeout=self.shutdown_timeout)
        if not finished:
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
        logger.debug(
            "worker %s: registered task(s): %s", self.id, ", ".join(self._task_names) or "none"
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
