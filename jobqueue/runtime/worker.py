"""One worker process: the loop that claims up to the free slots, sleeps, and shuts down
within bounds.

The loop runs on the thread that calls ``run()`` and owns no policy of its own: it starts
the parts, asks them, and stops them. ``lookout`` looks for work and says when to look
again; what to claim is ``demand``'s; the claims go out through ``writer`` (on its thread,
or inline on this one); what they bring joins ``executor``'s line through ``intake``; the
slots run it with ``runner``; ``due`` says when a job put back falls due; ``maintenance``
runs the chores between looks; ``heartbeat`` keeps the leases alive on its own thread;
``canceller`` cancels the attempts whose jobs an operator discarded. The loop wakes on
``control`` (a freed slot, a notification, a job enqueued here) or on the earliest of its
timers.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from jobqueue import conf, signals
from jobqueue.runtime import cancel
from jobqueue.runtime import queues as queue_selection
from jobqueue.runtime.cancel import Canceller
from jobqueue.runtime.demand import Demand
from jobqueue.runtime.due import Due
from jobqueue.runtime.executor import Executor
from jobqueue.runtime.intake import Intake, Runner
from jobqueue.runtime.lease import Heartbeat, Registration
from jobqueue.runtime.limits import Limits
from jobqueue.runtime.lookout import Lookout
from jobqueue.runtime.maintenance import Maintenance, Prune, Rescue, UnregisteredWarning
from jobqueue.runtime.outage import HEALTH
from jobqueue.runtime.polling import SAFETY_POLL
from jobqueue.runtime.service import Service
from jobqueue.runtime.tally import Recorder, Tally
from jobqueue.runtime.ticker import Ticker
from jobqueue.runtime.writer import Writer
from jobqueue.store.jobs import ClaimScope, Store
from jobqueue.tasks import base as tasks
from jobqueue.tasks import tracing

logger = logging.getLogger("jobqueue.worker")

EXIT_OK = 0
EXIT_STUCK = 3  # handlers stuck past their timeout filled the slots: restart this process


class Worker(Service):
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
        self.selection = queue_selection.QueueSelection(
            *queue_selection.select(self.settings, self.pool, queues, exclude_queues)
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
        self.hostname, self.pid = socket.gethostname(), os.getpid()
        self.id = worker_id or f"{self.hostname}:{self.pid}:{secrets.token_hex(3)}"
        self.store = Store(using, self.settings)
        super().__init__(store=self.store, settings=self.settings)
        self.exit_code = EXIT_OK
        # One outage is one line for the whole process, whichever thread meets it first.
        self.health = HEALTH
        self.health.begin(f"worker {self.id}")
        store, me, control, health = self.store, self.id, self.control, self.health
        self.executor = Executor(concurrency=self.concurrency, on_slot_free=control.wake)
        self.demand = Demand(
            executor=self.executor,
            limits=self.limits,
            control=control,
            prefetch=self.pool.prefetch if prefetch is None else prefetch,
        )
        self.due = Due()
        self.intake = Intake(
            store=store,
            worker=me,
            executor=self.executor,
            demand=self.demand,
            due=self.due,
            control=control,
            health=health,
        )
        self.writer = Writer(store=store, demand=self.demand, intake=self.intake)
        self.canceller = Canceller(
            store=store,
            worker=me,
            executor=self.executor,
            health=health,
            wake=control.wake,
            # No listener and no watcher (MySQL, an in-memory SQLite): nothing reports a
            # commit, so the canceller asks while it holds jobs.
            polls=self.listener is None,
        )
        self.runner = Runner(store=store, worker=me, executor=self.executor, writer=self.writer)
        self.lookout = Lookout(
            store=store,
            writer=self.writer,
            executor=self.executor,
            demand=self.demand,
            listener=self.listener,
            health=health,
            settings=self.settings,
            burst=burst,
        )
        self.registration = Registration(
            store=store,
            worker=me,
            hostname=self.hostname,
            pid=self.pid,
            pool=self.pool.name,
            queues=self.selection.as_row(),
            concurrency=self.concurrency,
            health=health,
        )
        interval = self.settings.heartbeat_interval
        self.heartbeat = Heartbeat(
            store=store,
            worker=me,
            held=self.executor.holding,
            register=self.registration.register,
            interval=interval,
        )
        # Every worker evaluates the schedules; the database decides who wins each tick.
        self.ticker = Ticker(self.settings, using, health)
        # The dashboard's history: counted from the signals, written once a minute.
        self.tally = Tally(me)
        self.recorder = Recorder(tally=self.tally, using=using, health=health)
        self.maintenance = Maintenance(
            [
                Rescue(store=store, worker=me, health=health, control=control, interval=interval),
                Prune(store=store, worker=me, health=health),
                UnregisteredWarning(store=store, worker=me, health=health),
                self.ticker,
                self.recorder,
            ]
        )
        self._task_names: list[str] = []
        self._parent_pid: int | None = None
        # Called once the worker has registered its row (past imports, task discovery,
        # settings and a first statement): runjobs tells its supervisor, which restarts at
        # once a worker that got this far, and with backoff one that did not.
        self.on_ready: Callable[[], None] | None = None

    def watch_parent(self, pid: int) -> None:
        """Stop when the process ``pid`` (the supervisor) is no longer this one's parent."""
        self._parent_pid = pid

    def run(self) -> int:
        """Serve until stopped (or, with ``burst``, until nothing is due); return an exit code."""
        self._task_names = tasks.discover()
        self.limits.start()
        self._log_start()
        if not self.registration.register_first(self._task_names, self.control):
            return self.exit_code  # stopped while it waited for the database
        if self.on_ready is not None:
            self.on_ready()
        signals.jobs_committed.connect(self._on_jobs_committed, weak=False)
        self.tally.connect()
        self.heartbeat.start()
        # OpenTelemetry, if installed, is imported now rather than in the first attempt
        # (tens of milliseconds): the first job's run time then measures the job, and the
        # prefetch policy, which reads it, claims ahead from the start.
        tracing.enabled()
        self.executor.start(self.runner)
        scope = ClaimScope(
            self.id, tuple(self._task_names), self.selection.queues, self.selection.excluded
        )
        self.demand.start()
        self.writer.start(scope)
        self.lookout.start(scope)
        if self.listener is not None:
            self.listener.start()
        self.ticker.start()
        try:
            self._loop()
        finally:
            signals.jobs_committed.disconnect(self._on_jobs_committed)
            self._shutdown()
        return self.exit_code

    # -- the loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        now = time.monotonic()
        # Every chore is due on the first turn (recovery, a prune slice, the names of the
        # tasks no live worker has registered), but only once the first look went out: a
        # job due now need not wait for their round trips. Recovery before the first claim
        # buys nothing: it runs on a timer in every worker, and the jobs it returns are
        # claimed by the next look, which it wakes. Only a burst worker must not leave
        # before it ran: it looks once more after the chores (see below).
        self.maintenance.start(now)
        chores_started = False
        next_look = now  # look at once on start
        woken = False
        while not self.stopping:
            if self.runner.expire_timeouts():
                self.control.wake()  # their slots are free again: look for work
            # A job discarded while it runs here: its attempt is told now (a notification
            # named it, or on SQLite another connection committed). At most one read.
            self.canceller.check(time.monotonic())
            if self._should_stop():
                break
            now = time.monotonic()
            if chores_started:
                self.maintenance.run_due(now)
            self.intake.hand_back_overdue(now)
            if self._parent_pid is not None and os.getppid() != self._parent_pid:
                logger.error("worker %s: its supervisor is gone; stopping", self.id)
                self.stop()
                break
            if self.demand.check_limits(now):
                # Claim no more, let what runs finish (however long), then leave.
                if self.lookout.idle():
                    logger.info(
                        "worker %s: %s; exiting to be restarted", self.id, self.demand.retiring
                    )
                    break
                next_look = now + SAFETY_POLL
            elif self.limits.idle_for_too_long(now, busy=not self.lookout.idle()):
                logger.info(
                    "worker %s: nothing due for %g s (idle_timeout); exiting",
                    self.id,
                    self.limits.idle_timeout,
                )
                break
            elif woken or now >= next_look or self.due.pop_due(now):
                # A look costs a query, so only an event or a timer that asked for one makes
                # it; waking for maintenance or a timeout does not.
                wait = self.lookout.look()
                if not chores_started:
                    chores_started = True
                    self.maintenance.run_due(time.monotonic())
                    if wait is None:
                        # A burst worker found nothing, but the first recovery may just
                        # have returned a crashed worker's jobs: one more look decides.
                        wait = 0.0
                if wait is None:
                    break
                next_look = now + wait
            woken = self.control.sleep(
                min(next_look, self.maintenance.next_at(), self._next_timer())
            )

    def _next_timer(self) -> float:
        """The earliest of: a limit, a check for discarded jobs, a held job's hand-back, an
        attempt's timeout, a job this process put back falling due."""
        timers = [time.monotonic() + (1.0 if self._parent_pid is not None else SAFETY_POLL)]
        timers += self.limits.timers()
        for timer in (
            self.canceller.next_at(),
            self.intake.next_hand_back(),
            self.executor.next_deadline(),
            self.due.earliest(),
        ):
            if timer is not None:
                timers.append(timer)
        return min(timers)

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

    def _on_jobs_committed(self, sender: Any, *, queue: str, database: str, **kwargs: Any) -> None:
        # A job this process enqueued (a handler fanning out, say) needs no notification.
        if database == self.store.queries.using and self.selection.serves(queue):
            self.control.wake()

    def notified(self, payload: str) -> None:
        ids = cancel.parse(payload)
        if ids is not None:
            # Not a queue: an operator discarded running jobs. The canceller wakes the loop
            # only if this worker holds one of them.
            self.canceller.heard(ids)
            return
        queue = payload
        if self.selection.serves(queue):
            logger.debug("worker %s: woken by a notification for queue %s", self.id, queue)
            self.control.wake()

    def committed(self) -> None:
        self.canceller.committed()
        self.control.wake()

    # -- shutdown ---------------------------------------------------------------------

    def _shutdown(self) -> None:
        self.intake.close()  # the writer claims nothing more from here on
        self.intake.hand_back_all()
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
            self.intake.release_running(waited=self.shutdown_timeout)
        if self.listener is not None:
            self.listener.stop()
        self.heartbeat.stop()
        # After the last outcomes are written (writer.stop above) and their signals sent.
        self.tally.disconnect()
        self.recorder.final_flush()
        self.registration.deregister()
        self.executor.stop()
        connections.close_all()
        logger.info("worker %s: stopped", self.id)

    def _log_start(self) -> None:
        queues = self.selection.describe(every="every queue", sep=", ", none="no queue")
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
