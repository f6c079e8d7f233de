"""One worker process: claim up to the free slots, run, wait, and shut down within bounds."""

from __future__ import annotations

import heapq
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from jobqueue import conf, signals, tasks
from jobqueue.runtime import attempt as attempts
from jobqueue.runtime import queues as queue_selection
from jobqueue.runtime.attempt import Attempt
from jobqueue.runtime.executor import Executor
from jobqueue.runtime.lease import Heartbeat
from jobqueue.store import Store

logger = logging.getLogger("jobqueue.worker")

MAX_IDLE_WAIT = 30.0
PRUNE_INTERVAL = 3600.0

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
        shutdown_timeout: float | None = None,
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
        self.max_jobs = max_jobs
        self.shutdown_timeout = (
            self.settings.shutdown_timeout if shutdown_timeout is None else shutdown_timeout
        )
        self.hostname = socket.gethostname()
        self.pid = os.getpid()
        self.id = f"{self.hostname}:{self.pid}:{secrets.token_hex(3)}"
        self.store = Store(using, self.settings)
        self.exit_code = EXIT_OK
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.executor = Executor(
            concurrency=self.concurrency,
            run=lambda a: attempts.run(a, self.store, self.id),
            on_slot_free=self._wake.set,
        )
        self.heartbeat = Heartbeat(
            store=self.store,
            worker=self.id,
            held=self.executor.running,
            register=self._register,
            interval=self.settings.heartbeat_interval,
        )
        self._task_names: list[str] = []
        self._claimed_total = 0
        # Monotonic times at which jobs this process put back (retry, snooze) fall due.
        self._due_times: list[float] = []
        self._due_lock = threading.Lock()

    # -- control ----------------------------------------------------------------------

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
        self._log_start()
        self._register()
        signals.jobs_committed.connect(self._on_jobs_committed, weak=False)
        self.heartbeat.start()
        self.executor.start()
        try:
            self._rescue()
            self._prune()
            self._loop()
        finally:
            signals.jobs_committed.disconnect(self._on_jobs_committed)
            self._shutdown()
        return self.exit_code

    # -- the loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        idle_wait = self.settings.poll_interval
        next_rescue = time.monotonic() + self.settings.heartbeat_interval
        next_prune = time.monotonic() + PRUNE_INTERVAL
        while not self._stop.is_set():
            self._expire_timeouts()
            if self._should_stop():
                break
            now = time.monotonic()
            if self._budget_spent():
                # --max-jobs: claim no more, let what runs finish, then leave.
                if self.executor.idle():
                    logger.info(
                        "worker %s: ran %s job(s) (--max-jobs); stopping", self.id, self.max_jobs
                    )
                    break
                self._wake.wait(MAX_IDLE_WAIT)
                self._wake.clear()
                continue
            if now >= next_rescue:
                self._rescue()
                next_rescue = now + self.settings.heartbeat_interval
            if now >= next_prune:
                self._prune()
                next_prune = now + PRUNE_INTERVAL

            # Claim only what can run now: the limit is the number of free slots.
            free = self.executor.free_slots()
            if self.max_jobs is not None:
                free = min(free, self.max_jobs - self._claimed_total)
            try:
                claimed = self._claim(free) if free else []
            except DatabaseError:
                # The database went away (restart, failover): keep the process and its
                # in-flight jobs, and look again after the idle wait.
                logger.exception("worker %s: claim failed; retrying in %g s", self.id, idle_wait)
                connections[self.store.queries.using].close()
                claimed = []
            if claimed:
                idle_wait = self.settings.poll_interval
            elif free and self.burst and self.executor.idle():
                logger.info("worker %s: nothing is due, leaving (--burst)", self.id)
                break

            if free and not claimed:
                # An empty look: wait, then look again, twice as long after each empty look.
                wait = idle_wait
                idle_wait = min(idle_wait * 2, MAX_IDLE_WAIT)
            elif len(claimed) < free:
                # We took everything due: wait as after an empty look, from the start.
                wait = self.settings.poll_interval
            else:
                # Every slot is busy: a freed slot wakes us, and we claim again at once.
                wait = MAX_IDLE_WAIT
            wait = min(wait, next_rescue - now, next_prune - now)
            with self._due_lock:
                while self._due_times and self._due_times[0] <= now:
                    heapq.heappop(self._due_times)  # this look covered it
                if self._due_times:
                    # A retry or snooze this process scheduled: look again when it is due.
                    wait = min(wait, self._due_times[0] - now)
            deadline = self.executor.next_deadline()
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
            if wait > 0:
                self._wake.wait(wait)
            self._wake.clear()

    def _claim(self, limit: int) -> list[Any]:
        claimed = self.store.claim(
            worker=self.id,
            task_names=self._task_names,
            queues=self.queues,
            excluded=self.excluded,
            limit=limit,
        )
        self._claimed_total += len(claimed)
        for job in claimed:
            task = tasks.get(job.task_name)
            assert task is not None, "the claim is restricted to registered task names"
            self.executor.submit(Attempt(job=job, task=task, on_scheduled=self._due_in))
        return claimed

    def _due_in(self, delay: float) -> None:
        with self._due_lock:
            heapq.heappush(self._due_times, time.monotonic() + delay)
        # No wake-up here: the slot that called this frees itself next, and that wakes the
        # loop, which then sleeps until this job is due.

    def _budget_spent(self) -> bool:
        return self.max_jobs is not None and self._claimed_total >= self.max_jobs

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
        for attempt in self.executor.expire():
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

    def _prune(self) -> None:
        try:
            self.store.prune()
        except Exception:
            logger.exception("worker %s: retention pruning failed; trying again later", self.id)
            connections[self.store.queries.using].close()

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
    """The pool a bare ``runjobs`` serves until the supervisor lands: "default", else the
    catch-all, else the first one."""
    if "default" in settings.pools:
        return "default"
    catch_all = settings.catch_all_pool()
    return catch_all.name if catch_all else next(iter(settings.pools))
