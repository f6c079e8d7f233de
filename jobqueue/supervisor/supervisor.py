"""Keep each pool's worker processes running: resident pools always, on-demand pools only
while jobs are due. A child that dies has its jobs recovered at once, without waiting for
their leases, because the supervisor saw it die.

How soon a dead child is replaced depends on how far it got. Each child holds the write end
of a pipe and writes READY once it has registered its row (imports, task discovery,
settings and a first statement went through), and WORKED once it has finished a job. A
child that died after READY was working and met something outside it (the OOM killer, a
deploy tool, a segfault in a library): it is replaced at once, however often that happens.
A child that died before READY will most likely die again the same way (a bad import, wrong
settings, an unreachable database): its replacement waits RESTART_FIRST, twice as long
after each such death, up to RESTART_CAP. Ready children that die at once and again and
again without finishing a job are a crash loop, and back off as well.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings as django_settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from jobqueue import conf
from jobqueue.runtime import queues as queue_selection
from jobqueue.runtime.outage import Health
from jobqueue.runtime.polling import SAFETY_POLL
from jobqueue.runtime.service import Service
from jobqueue.runtime.shutdown import EXIT_FORCED, FORCED_RELEASE_TIMEOUT, on_stop_signals
from jobqueue.store.jobs import Store
from jobqueue.tasks import base as tasks

logger = logging.getLogger("jobqueue.supervisor")

REAP_INTERVAL = 0.5  # how often children are checked: a dead one is noticed this fast
# The wait before replacing a child that died during start-up (or in a crash loop): this
# long after the first such death, doubling after each one, up to RESTART_CAP.
RESTART_FIRST = 1.0
RESTART_CAP = 60.0
# A child that finished a job, exited with status 0 or lived this long resets that wait.
STABLE_AFTER = 30.0
# More than CRASH_LOOP_DEATHS ready children of a pool dying within CRASH_LOOP_WINDOW
# seconds, none of them having finished a job, is a crash loop: the pool backs off.
CRASH_LOOP_DEATHS = 10
CRASH_LOOP_WINDOW = 10.0
ON_DEMAND_GRACE = 1.0  # s a job may wait for a live worker before another is started
STOP_MARGIN = 5.0  # s beyond SHUTDOWN_TIMEOUT before children are killed


# What a child writes on its pipe (``--ready-fd``): one byte each, once.
READY = b"R"  # registered: past start-up
WORKED = b"J"  # finished its first job


class ReadyReport:
    """The child's end of the pipe: runjobs tells its supervisor how far it got."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._sent: set[bytes] = set()
        self._lock = threading.Lock()  # the main thread and any slot or writer thread

    def send(self, what: bytes) -> None:
        with self._lock:
            if what in self._sent:
                return
            self._sent.add(what)
            # The supervisor gone: the worker notices that on its own, and stops.
            with contextlib.suppress(OSError):
                os.write(self._fd, what)


@dataclass
class Child:
    pool: conf.PoolSpec
    proc: subprocess.Popen[bytes]
    worker_id: str
    ready_fd: int  # the supervisor's (non-blocking) end of the child's pipe
    started: float = field(default_factory=time.monotonic)
    ready: bool = False  # READY read: it registered
    worked: bool = False  # WORKED read: it finished a job

    def read_reports(self) -> None:
        """Take what the child wrote, without blocking; after its death, what is left."""
        while True:
            try:
                data = os.read(self.ready_fd, 16)
            except BlockingIOError:
                return
            except OSError:  # closed already
                return
            if not data:  # end of file: the child (and so every copy of its end) is gone
                return
            self.worked = self.worked or WORKED in data
            # A child that finished a job got past start-up, whatever else it wrote.
            self.ready = self.ready or READY in data or self.worked

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.ready_fd)


@dataclass
class PoolState:
    spec: conf.PoolSpec
    queues: tuple[str, ...] | None
    excluded: tuple[str, ...]
    restart_delay: float = RESTART_FIRST
    # When each child that died young may be replaced (monotonic); one entry per child: a
    # pool of several processes replaces its other dead children meanwhile.
    delayed: list[float] = field(default_factory=list)
    ready_deaths: deque[float] = field(default_factory=deque)  # within CRASH_LOOP_WINDOW
    ended: int = 0  # children of this pool that have ended

    def waiting(self, now: float) -> int:
        """How many of the pool's missing children must not be replaced yet."""
        self.delayed = [at for at in self.delayed if at > now]
        return len(self.delayed)

    def back_off(self, now: float) -> float:
        delay = self.restart_delay
        self.delayed.append(now + delay)
        self.restart_delay = min(delay * 2, RESTART_CAP)
        return delay

    def settled(self) -> None:
        """A child got to work: the next start-up death waits RESTART_FIRST again."""
        self.restart_delay = RESTART_FIRST
        self.ready_deaths.clear()


class Supervisor(Service):
    """Runs, on the thread that calls ``run()``, the loop that keeps the pools' children."""

    def __init__(
        self,
        *,
        worker_args: list[str] | None = None,
        idle_timeout: float | None = None,
        burst: bool = False,
        shutdown_timeout: float | None = None,
        using: str = DEFAULT_DB_ALIAS,
        settings: conf.Settings | None = None,
        on_child_ended: Callable[[int], None] | None = None,
    ) -> None:
        self.settings = settings or conf.get()
        # Told the pid of each child reaped (the metrics drop its live gauges).
        self.on_child_ended = on_child_ended
        self.worker_args = worker_args or []
        self.idle_timeout = idle_timeout  # for on-demand pools only
        self.burst = burst
        self.shutdown_timeout = (
            self.settings.shutdown_timeout if shutdown_timeout is None else shutdown_timeout
        )
        self.store = Store(using, self.settings)
        # LISTEN only for the on-demand pools: a notification may start one's worker.
        super().__init__(
            store=self.store,
            settings=self.settings,
            listen=any(not p.resident for p in self.settings.pools.values()),
        )
        self.hostname = socket.gethostname()
        self.pools = {
            name: PoolState(spec, *queue_selection.select(self.settings, spec))
            for name, spec in self.settings.pools.items()
        }
        self.children: list[Child] = []
        self._task_names: list[str] = []
        self._started_once: set[str] = set()
        # Its own statements (count_due, the recovery of a dead child's jobs) meet outages
        # too: one line when the database goes, one when it is back.
        self.health = Health("supervisor", logger)

    # -- control ----------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        def first(name: str) -> None:
            logger.info("supervisor: %s received; stopping every worker", name)
            self.stop()

        def second(name: str) -> None:
            logger.warning(
                "supervisor: second %s; children hand back their jobs and exit at once", name
            )
            # The workers take it as their own second signal: each hands back what it holds
            # by policy and exits. Waiting for them (briefly) keeps a process manager that
            # kills what is left once the supervisor is gone from killing them mid-way.
            self._signal_children(signal.SIGTERM)
            deadline = time.monotonic() + FORCED_RELEASE_TIMEOUT + 1.0
            while time.monotonic() < deadline and any(
                child.proc.poll() is None for child in list(self.children)
            ):
                time.sleep(0.05)
            os._exit(EXIT_FORCED)

        on_stop_signals(first, second)

    def run(self) -> int:
        self._task_names = tasks.discover()
        for state in self.pools.values():
            spec = state.spec
            logger.info(
                "supervisor: pool %s, %s, %s process(es) x %s thread(s)%s",
                spec.name,
                "every queue no other pool serves"
                if state.queues is None
                else ", ".join(state.queues),
                spec.processes,
                spec.concurrency,
                "" if spec.resident else f", on demand (idle_timeout {spec.idle_timeout:g} s)",
            )
        if self.listener is not None:
            self.listener.start()
        next_demand_check = 0.0
        woken = False
        try:
            while not self.stopping:
                self._reap()
                now = time.monotonic()
                self._keep_resident(now)
                if woken or now >= next_demand_check:
                    self._start_on_demand()
                    next_demand_check = now + self._demand_interval()
                if self.burst and not self.children:
                    logger.info("supervisor: every worker has finished (--burst)")
                    break
                woken = self.control.sleep(time.monotonic() + REAP_INTERVAL)
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
        # The child reports on this pipe how far it got (READY, WORKED); the supervisor
        # reads its end without blocking when it reaps.
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        command += ["--ready-fd", str(write_end), "--supervisor-pid", str(os.getpid())]
        if self.burst:
            command.append("--burst")
        if self.idle_timeout is not None and not spec.resident:
            command += ["--idle-timeout", str(self.idle_timeout)]
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": django_settings.SETTINGS_MODULE,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        try:
            proc = subprocess.Popen(command, env=env, pass_fds=(write_end,))
        except BaseException:
            os.close(read_end)
            raise
        finally:
            # Only the child holds the write end now: its death is the pipe's end of file.
            os.close(write_end)
        child = Child(spec, proc, worker_id=f"{self.hostname}:{proc.pid}:{tag}", ready_fd=read_end)
        self.children.append(child)
        self._started_once.add(spec.name)
        logger.info("supervisor: started worker %s for pool %s (%s)", proc.pid, spec.name, reason)

    def _reap(self, *, restarting: bool = True) -> None:
        """Notice children that ended: recover the jobs of one that died, and (unless the
        supervisor is stopping) schedule its replacement: at once, or after a backoff."""
        for child in list(self.children):
            child.read_reports()
            code = child.proc.poll()
            if code is None:
                if child.worked and child.pool.name in self.pools:
                    self.pools[child.pool.name].settled()
                continue
            self.children.remove(child)
            child.read_reports()  # what it wrote just before it died
            child.close()
            self._ended(child)
            lived = time.monotonic() - child.started
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            if restarting:
                self._schedule_replacement(child, code, how, lived)
            else:
                log = logger.info if code == 0 else logger.error
                log(
                    "supervisor: worker %s of pool %s ended (%s) after %.1f s",
                    child.proc.pid,
                    child.pool.name,
                    how,
                    lived,
                )
            if code != 0:
                # Status 130 too: a second signal made it exit at once; whatever it could
                # not hand back in time is recovered here. Before the replacement starts
                # (on the loop's next step), so that it can claim these jobs at once.
                self._recover(child, how)

    def _ended(self, child: Child) -> None:
        if self.on_child_ended is not None:
            self.on_child_ended(child.proc.pid)

    def _schedule_replacement(self, child: Child, code: int, how: str, lived: float) -> None:
        state = self.pools[child.pool.name]
        state.ended += 1
        now = time.monotonic()
        pid, pool = child.proc.pid, child.pool.name
        if code == 0 or lived >= STABLE_AFTER or child.worked:
            state.settled()
        if code == 0:
            logger.info(
                "supervisor: worker %s of pool %s ended (%s) after %.1f s", pid, pool, how, lived
            )
            return
        if self.burst and child.pool.resident:
            then = "; not restarted (--burst)"
        elif child.pool.resident:
            then = "; restarting it {when}"
        else:
            then = "; its pool starts another {when} if jobs are due"
        if child.ready:
            if not child.worked:
                state.ready_deaths.append(now)
                while state.ready_deaths and state.ready_deaths[0] < now - CRASH_LOOP_WINDOW:
                    state.ready_deaths.popleft()
            if len(state.ready_deaths) <= CRASH_LOOP_DEATHS:
                # It was working: something outside it killed it (OOM killer, a deploy
                # tool, a crash in a library). Its pool must not go down for it.
                logger.error(
                    "supervisor: worker %s of pool %s died after it was ready (%s, %.1f s "
                    "after it started)%s",
                    pid,
                    pool,
                    how,
                    lived,
                    then.format(when="now"),
                )
                return
            delay = state.back_off(now)
            logger.error(
                "supervisor: worker %s of pool %s died after it was ready (%s, %.1f s after "
                "it started): %s ready workers of this pool died within %g s without "
                "finishing a job, a crash loop%s",
                pid,
                pool,
                how,
                lived,
                len(state.ready_deaths),
                CRASH_LOOP_WINDOW,
                then.format(when=f"in {delay:g} s"),
            )
            return
        # It never got past start-up (a bad import, wrong settings, no database): the
        # next one would most likely die the same way, so the pool backs off.
        delay = state.back_off(now)
        logger.error(
            "supervisor: worker %s of pool %s died during start-up (%s, %.1f s after it started)%s",
            pid,
            pool,
            how,
            lived,
            then.format(when=f"in {delay:g} s"),
        )

    def _recover(self, child: Child, how: str) -> None:
        # The supervisor saw the process die, so its jobs are certainly orphaned: apply the
        # crash policy now instead of waiting for their leases to expire.
        released: list[tuple[int, str, str]] = []
        with self.health.trying(
            f"recovering the jobs of worker {child.worker_id}",
            self.store.queries.using,
            "supervisor: could not recover the jobs of a dead worker",
            catching=DatabaseError,
            log=logger,
        ) as attempt:
            released = self.store.release_worker(
                child.worker_id, f"The worker process {child.proc.pid} died ({how})."
            )
            self.store.deregister_worker(child.worker_id)
        if attempt.failed:
            logger.error(
                "supervisor: the jobs of worker %s were not recovered; their leases will "
                "expire and any worker will recover them",
                child.worker_id,
            )
            return
        self.health.ok()
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
            if not spec.resident:
                continue
            if self.burst and spec.name in self._started_once:
                continue
            for _ in range(spec.processes - self._alive(spec.name) - state.waiting(now)):
                reason = "restart" if state.ended else "resident pool"
                self._spawn(spec, reason)

    def _start_on_demand(self) -> None:
        now = time.monotonic()
        for state in self.pools.values():
            spec = state.spec
            if spec.resident:
                continue
            alive = self._alive(spec.name)
            if alive + state.waiting(now) >= spec.processes:
                continue
            due = 0
            with self.health.trying(
                f"counting the due jobs of pool {spec.name}",
                self.store.queries.using,
                "supervisor: could not count due jobs of pool %s",
                spec.name,
                catching=DatabaseError,
                log=logger,
            ) as attempt:
                due = self.store.count_due(
                    task_names=self._task_names,
                    queues=state.queues,
                    excluded=state.excluded,
                    limit=spec.processes,
                    grace=ON_DEMAND_GRACE if alive else 0.0,
                )
            if attempt.failed:
                continue
            self.health.ok()
            # Never more workers than due jobs, never more than the pool's processes.
            for _ in range(min(due, spec.processes - alive - state.waiting(now))):
                self._spawn(spec, f"{due} job(s) due")

    def _demand_interval(self) -> float:
        if not any(not s.spec.resident for s in self.pools.values()):
            return SAFETY_POLL
        # With LISTEN a notification wakes the check; without, look every few seconds.
        return SAFETY_POLL if self.listening else 2.0

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
            child.close()
            self._ended(child)
            self._recover(child, "killed after the shutdown timeout")
        self.children.clear()
        logger.info("supervisor: stopped")
