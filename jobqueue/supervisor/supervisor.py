"""Keep each pool's worker processes running: resident pools always, on-demand pools only
while jobs are due. A child that dies has its jobs recovered at once, without waiting for
their leases, because the supervisor saw it die."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from django.conf import settings as django_settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from jobqueue import conf, tasks
from jobqueue.enqueue import NOTIFY_CHANNEL
from jobqueue.runtime import queues as queue_selection
from jobqueue.runtime.listener import Listener, connection_target
from jobqueue.runtime.polling import SAFETY_POLL
from jobqueue.runtime.shutdown import EXIT_FORCED, on_stop_signals
from jobqueue.store import Store

logger = logging.getLogger("jobqueue.supervisor")

REAP_INTERVAL = 0.5  # how often children are checked: a dead one is noticed this fast
RESTART_FIRST = 1.0
RESTART_CAP = 60.0
STABLE_AFTER = 30.0  # a child that lived this long resets its pool's restart backoff
ON_DEMAND_GRACE = 1.0  # s a job may wait for a live worker before another is started
STOP_MARGIN = 5.0  # s beyond SHUTDOWN_TIMEOUT before children are killed


@dataclass
class Child:
    pool: conf.PoolSpec
    proc: subprocess.Popen[bytes]
    worker_id: str
    started: float = field(default_factory=time.monotonic)


@dataclass
class PoolState:
    spec: conf.PoolSpec
    queues: tuple[str, ...] | None
    excluded: tuple[str, ...]
    restart_delay: float = RESTART_FIRST
    restart_at: float = 0.0
    ended: int = 0  # children of this pool that have ended


class Supervisor:
    def __init__(
        self,
        *,
        worker_args: list[str] | None = None,
        idle_timeout: float | None = None,
        burst: bool = False,
        shutdown_timeout: float | None = None,
        using: str = DEFAULT_DB_ALIAS,
        settings: conf.Settings | None = None,
    ) -> None:
        self.settings = settings or conf.get()
        self.worker_args = worker_args or []
        self.idle_timeout = idle_timeout  # for on-demand pools only
        self.burst = burst
        self.shutdown_timeout = (
            self.settings.shutdown_timeout if shutdown_timeout is None else shutdown_timeout
        )
        self.store = Store(using, self.settings)
        self.hostname = socket.gethostname()
        self.pools = {
            name: PoolState(spec, *queue_selection.select(self.settings, spec))
            for name, spec in self.settings.pools.items()
        }
        self.children: list[Child] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._task_names: list[str] = []
        self._started_once: set[str] = set()
        self.listener: Listener | None = None
        if self.store.queries.is_postgresql and any(
            not p.resident for p in self.settings.pools.values()
        ):
            self.listener = Listener(
                target=connection_target(using, self.settings.listen_url),
                channel=NOTIFY_CHANNEL,
                on_notify=lambda queue: self._wake.set(),
                on_connect=self._wake.set,
            )

    # -- control ----------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        def first(name: str) -> None:
            logger.info("supervisor: %s received; stopping every worker", name)
            self.stop()

        def second(name: str) -> None:
            logger.warning("supervisor: second %s; children exit at once", name)
            self._signal_children(signal.SIGTERM)
            os._exit(EXIT_FORCED)

        on_stop_signals(first, second)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def run(self) -> int:
        self._task_names = tasks.discover()
        for state in self.pools.values():
            spec = state.spec
            logger.info(
                "supervisor: pool %s, %s, %s process(es) x %s thread(s)%s",
                spec.name,
                "every other queue" if state.queues is None else ", ".join(state.queues),
                spec.processes,
                spec.concurrency,
                "" if spec.resident else f", on demand (idle_timeout {spec.idle_timeout:g} s)",
            )
        if self.listener is not None:
            self.listener.start()
        next_demand_check = 0.0
        try:
            while not self._stop.is_set():
                self._reap()
                now = time.monotonic()
                self._keep_resident(now)
                if self._wake.is_set() or now >= next_demand_check:
                    self._wake.clear()
                    self._start_on_demand()
                    next_demand_check = now + self._demand_interval()
                if self.burst and not self.children:
                    logger.info("supervisor: every worker has finished (--burst)")
                    break
                self._wake.wait(REAP_INTERVAL)
        finally:
            self._shutdown()
        return 0

    # -- children ---------------------------------------------------------------------

    def _spawn(self, spec: conf.PoolSpec, reason: str) -> None:
        tag = secrets.token_hex(3)
        command = [
            sys.executable,
            "-m",
            "django",
            "runjobs",
            "--pool",
            spec.name,
            "--worker-tag",
            tag,
            *self.worker_args,
        ]
        if self.burst:
            command.append("--burst")
        if self.idle_timeout is not None and not spec.resident:
            command += ["--idle-timeout", str(self.idle_timeout)]
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": django_settings.SETTINGS_MODULE,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        proc = subprocess.Popen(command, env=env)
        child = Child(spec, proc, worker_id=f"{self.hostname}:{proc.pid}:{tag}")
        self.children.append(child)
        self._started_once.add(spec.name)
        logger.info("supervisor: started worker %s for pool %s (%s)", proc.pid, spec.name, reason)

    def _reap(self, *, restarting: bool = True) -> None:
        """Notice children that ended: recover the jobs of one that died, and (unless the
        supervisor is stopping) schedule the restart of a resident pool's."""
        for child in list(self.children):
            code = child.proc.poll()
            if code is None:
                continue
            self.children.remove(child)
            lived = time.monotonic() - child.started
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            log = logger.info if code == 0 else logger.error
            log(
                "supervisor: worker %s of pool %s ended (%s) after %.1f s",
                child.proc.pid,
                child.pool.name,
                how,
                lived,
            )
            if code != 0:
                # Status 130 too: a second signal made it exit at once, jobs and all.
                self._recover(child, how)
            if not restarting:
                continue
            state = self.pools[child.pool.name]
            state.ended += 1
            if lived >= STABLE_AFTER or code == 0:
                state.restart_delay = RESTART_FIRST
                state.restart_at = 0.0
            else:
                # A worker that dies young may die again at once: back off between restarts.
                state.restart_at = time.monotonic() + state.restart_delay
                logger.warning(
                    "supervisor: pool %s restarts in %g s", child.pool.name, state.restart_delay
                )
                state.restart_delay = min(state.restart_delay * 2, RESTART_CAP)

    def _recover(self, child: Child, how: str) -> None:
        # The supervisor saw the process die, so its jobs are certainly orphaned: apply the
        # crash policy now instead of waiting for their leases to expire.
        try:
            released = self.store.release_worker(
                child.worker_id, f"The worker process {child.proc.pid} died ({how})."
            )
            self.store.deregister_worker(child.worker_id)
        except DatabaseError:
            logger.exception(
                "supervisor: could not recover the jobs of worker %s; their "
                "leases will expire and any worker will recover them",
                child.worker_id,
            )
            connections[self.store.queries.using].close()
            return
        if released:
            logger.warning(
                "supervisor: recovered %s job(s) of worker %s: %s",
                len(released),
                child.proc.pid,
                ", ".join(f"{job_id} -> {status}" for job_id, _, status in released),
            )

    def _alive(self, pool: str) -> int:
        return sum(1 for c in self.children if c.pool.name == pool)

    def _keep_resident(self, now: float) -> None:
        for state in self.pools.values():
            spec = state.spec
            if not spec.resident or now < state.restart_at:
                continue
            if self.burst and spec.name in self._started_once:
                continue
            for _ in range(spec.processes - self._alive(spec.name)):
                reason = "restart" if state.ended else "resident pool"
                self._spawn(spec, reason)

    def _start_on_demand(self) -> None:
        now = time.monotonic()
        for state in self.pools.values():
            spec = state.spec
            if spec.resident or now < state.restart_at:
                continue
            alive = self._alive(spec.name)
            if alive >= spec.processes:
                continue
            try:
                due = self.store.count_due(
                    task_names=self._task_names,
                    queues=state.queues,
                    excluded=state.excluded,
                    limit=spec.processes,
                    grace=ON_DEMAND_GRACE if alive else 0.0,
                )
            except DatabaseError:
                logger.exception("supervisor: could not count due jobs of pool %s", spec.name)
                connections[self.store.queries.using].close()
                continue
            # Never more workers than due jobs, never more than the pool's processes.
            for _ in range(min(due, spec.processes - alive)):
                self._spawn(spec, f"{due} job(s) due")

    def _demand_interval(self) -> float:
        if not any(not s.spec.resident for s in self.pools.values()):
            return SAFETY_POLL
        listening = self.listener is not None and self.listener.connected.is_set()
        # With LISTEN a notification wakes the check; without, look every few seconds.
        return SAFETY_POLL if listening else 2.0

    # -- shutdown ---------------------------------------------------------------------

    def _signal_children(self, signum: int) -> None:
        for child in self.children:
            if child.proc.poll() is None:
                child.proc.send_signal(signum)

    def _shutdown(self) -> None:
        if self.listener is not None:
            self.listener.stop()
        if self.children:
            logger.info(
                "supervisor: stopping %s worker(s); they have %g s to finish",
                len(self.children),
                self.shutdown_timeout,
            )
        self._signal_children(signal.SIGTERM)
        deadline = time.monotonic() + self.shutdown_timeout + STOP_MARGIN
        while self.children and time.monotonic() < deadline:
            self._reap(restarting=False)
            time.sleep(0.05)
        for child in self.children:
            logger.error("supervisor: worker %s did not stop in time; killing it", child.proc.pid)
            child.proc.kill()
            child.proc.wait()
            self._recover(child, "killed after the shutdown timeout")
        self.children.clear()
        logger.info("supervisor: stopped")
