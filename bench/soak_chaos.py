"""The soak's two drains of ONE supervisor: calm, for the baseline throughput, and under
chaos: SIGKILLs of busy workers, SIGSTOP pauses past the lease, three PostgreSQL restarts
and the supervisor's own SIGKILL, driven one tick at a time by :class:`Chaos`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import signal
import time
from dataclasses import dataclass, field

from bench.chaos import Cluster, Process, SupervisorProcess, signal_process
from bench.soak_jobs import (
    empty_tables,
    enqueue,
    progress,
    ready_pids,
    throughput,
    unfinished,
    wait_for_database,
)

TICK = 0.05
POLL = 0.5  # s between looks at the queue's progress
RESTART_MARKS = (0.25, 0.5, 0.75)  # PostgreSQL restarts, as shares of the chaos
SUPERVISOR_MARK = 0.62  # the supervisor's SIGKILL, between the second and third restart
QUIET_AFTER_RESTART = 3.0  # s after a restart before the next one or the supervisor's kill
ORPHAN_GRACE = 15.0  # s an orphaned worker may take to stop: SHUTDOWN_TIMEOUT and a margin


def calm_drain(args: argparse.Namespace, env: dict[str, str]) -> float:
    """Drain ``--baseline-jobs`` jobs with no chaos: jobs/s from first start to last finish."""
    empty_tables()
    ids = enqueue(args.baseline_jobs, args.park_share)
    progress(f"baseline: {len(ids)} jobs, no chaos")
    supervisor = SupervisorProcess(env, args.log)
    deadline = time.monotonic() + args.timeout
    try:
        while (left := unfinished()) != 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"soak: the calm drain did not finish ({left} jobs left)")
            time.sleep(0.2)
    finally:
        supervisor.stop()
    rate = throughput(None)
    progress(f"baseline: {rate:.0f} jobs/s")
    return rate


@dataclass
class Pause:
    process: Process
    until: float


@dataclass
class Chaos:
    """What was done, and when; the soak's loop drives it one tick at a time."""

    args: argparse.Namespace
    cluster: Cluster
    env: dict[str, str]
    supervisor: SupervisorProcess
    rng: random.Random
    started: float = field(default_factory=time.monotonic)
    kills: int = 0
    kills_missed: int = 0  # ticks with no ready worker to kill (the pool was down)
    pauses: int = 0
    supervisor_kills: int = 0
    orphans: dict[Process, float | None] = field(default_factory=dict)  # -> s until exit
    orphaned_at: float = 0.0
    pause: Pause | None = None
    next_kill: float = 0.0
    next_pause: float = 0.0
    restart_ended: float = 0.0
    ready: set[int] = field(default_factory=set)
    seconds: float = 0.0  # how long the chaos lasted, once it is over
    log_offset: int = 0  # where the chaos's part of the supervisors' output begins

    def __post_init__(self) -> None:
        self.next_kill = self.started + self.args.kill_every
        self.next_pause = self.started + min(3.0, self.args.pause_every)

    def elapsed(self, now: float) -> float:
        return now - self.started

    def tick(self, now: float, share_done: float) -> None:
        """One step of chaos; ``share_done`` is how far the chaos is, 0 to 1."""
        restarting = self.cluster.restarting()
        if not restarting and self.cluster.restarts and not self.restart_ended:
            self.restart_ended = now
        quiet = not restarting and now - self.restart_ended >= QUIET_AFTER_RESTART
        if self.pause is not None and now >= self.pause.until:
            self._resume()
        if now >= self.next_kill:
            self.next_kill += self.args.kill_every
            self._kill_a_worker()
        if self.pause is None and now >= self.next_pause:
            self.next_pause = now + self.args.pause_every
            self._pause_a_worker(now)
        restarts = self.cluster.restarts
        # The order is fixed: two restarts, the supervisor's kill, the third restart.
        if (
            quiet
            and restarts < len(RESTART_MARKS)
            and share_done >= RESTART_MARKS[restarts]
            and (restarts < 2 or self.supervisor_kills)
        ):
            progress(f"restarting PostgreSQL ({self.cluster}), {restarts + 1}")
            self.cluster.start_restart()
            self.restart_ended = 0.0
        elif (
            quiet and not self.supervisor_kills and restarts >= 2 and share_done >= SUPERVISOR_MARK
        ):
            self._kill_the_supervisor(now)
        self._watch_orphans(now)

    def done(self) -> bool:
        """Has every kind of chaos happened at least once?"""
        return bool(
            self.cluster.restarts == len(RESTART_MARKS)
            and not self.cluster.restarting()
            and self.supervisor_kills
            and self.pauses
            and self.kills
        )

    def end(self) -> None:
        if self.pause is not None:
            self._resume()

    def _candidates(self) -> list[Process]:
        ready = ready_pids()
        if ready is not None:  # else PostgreSQL is away: the last known ready workers
            self.ready = ready
        paused = self.pause.process if self.pause else None
        return [p for p in self.supervisor.workers() if p.pid in self.ready and p != paused]

    def _kill_a_worker(self) -> None:
        candidates = self._candidates()
        if not candidates:
            self.kills_missed += 1
            return
        victim = self.rng.choice(candidates)
        if signal_process(victim, signal.SIGKILL):
            self.kills += 1

    def _pause_a_worker(self, now: float) -> None:
        candidates = self._candidates()
        if not candidates:
            self.next_pause = now + 1.0  # try again soon
            return
        victim = self.rng.choice(candidates)
        if signal_process(victim, signal.SIGSTOP):
            self.pause = Pause(victim, now + self.args.pause_for)
            self.pauses += 1
            progress(f"paused worker {victim.pid} for {self.args.pause_for:g} s")

    def _resume(self) -> None:
        assert self.pause is not None
        signal_process(self.pause.process, signal.SIGCONT)
        self.pause = None

    def _kill_the_supervisor(self, now: float) -> None:
        if self.pause is not None:
            # A stopped orphan could not notice its parent's death: end the pause first.
            self._resume()
        orphans = self.supervisor.kill()
        self.supervisor_kills += 1
        self.orphaned_at = now
        self.restart_ended = now  # the fresh supervisor gets the quiet a restart gets
        self.orphans = dict.fromkeys(orphans)
        progress(
            f"killed the supervisor {self.supervisor.pid}; its workers "
            f"{', '.join(str(p.pid) for p in orphans) or '(none)'} must stop by themselves"
        )
        self.supervisor = SupervisorProcess(self.env, self.args.log)
        progress(f"started a fresh supervisor {self.supervisor.pid}")

    def _watch_orphans(self, now: float) -> None:
        for process, ended in self.orphans.items():
            if ended is None and not process.alive():
                self.orphans[process] = now - self.orphaned_at


def chaos_drain(
    args: argparse.Namespace, cluster: Cluster, env: dict[str, str]
) -> tuple[Chaos, list[int], float, dt.datetime]:
    """Enqueue ``--jobs`` and drain them under chaos; return what was done and when."""
    empty_tables()
    ids = enqueue(args.jobs, args.park_share)
    progress(
        f"chaos: {len(ids)} jobs, a SIGKILL every {args.kill_every:g} s, "
        f"{'until drained' if args.duration is None else f'for {args.duration:g} s'}"
    )
    began = dt.datetime.now(dt.UTC)
    log_offset = args.log.stat().st_size if args.log.exists() else 0
    chaos = Chaos(args, cluster, env, SupervisorProcess(env, args.log), random.Random(args.seed))
    chaos.log_offset = log_offset
    deadline = chaos.started + args.timeout
    left: int | None = len(ids)
    chaos_over = None
    next_look = last_report = 0.0
    try:
        while True:
            now = time.monotonic()
            if now >= next_look:
                next_look = now + POLL
                looked = unfinished()
                left = looked if looked is not None else left
                if left == 0:
                    break
            if now > deadline:
                progress(f"gave up after {args.timeout:g} s: {left} jobs not terminal")
                break
            over_time = args.duration is not None and chaos.elapsed(now) >= args.duration
            if chaos_over is None and over_time:
                chaos.end()
                chaos_over = dt.datetime.now(dt.UTC)
                progress(f"chaos over after {args.duration:g} s; {left} jobs left drain calmly")
            if chaos_over is None:
                share = 1 - (left or 0) / max(len(ids), 1)
                if args.duration is not None:
                    share = max(share, chaos.elapsed(now) / args.duration)
                chaos.tick(now, share)
            if now - last_report >= 10:
                last_report = now
                progress(
                    f"{chaos.elapsed(now):.0f} s: {left} left, {chaos.kills} kills "
                    f"({chaos.kills_missed} ticks with no ready worker), {chaos.pauses} "
                    f"pauses, {cluster.restarts} restarts, {chaos.supervisor_kills} "
                    "supervisor kill(s)"
                )
            time.sleep(TICK)
    finally:
        chaos.end()
        cluster.wait()
    if chaos_over is None:
        chaos_over = dt.datetime.now(dt.UTC)
    chaos.seconds = (chaos_over - began).total_seconds()
    # Orphans get SHUTDOWN_TIMEOUT to hand their jobs back; give them that and a margin.
    limit = time.monotonic() + ORPHAN_GRACE
    while any(e is None for e in chaos.orphans.values()) and time.monotonic() < limit:
        chaos._watch_orphans(time.monotonic())
        time.sleep(0.1)
    for process, ended in chaos.orphans.items():
        if ended is None:  # a leaked worker would go on claiming jobs after the soak
            progress(f"orphaned worker {process.pid} is still running; killing it")
            signal_process(process, signal.SIGKILL)
    code = chaos.supervisor.stop()
    progress(f"the supervisor stopped with exit status {code}")
    wait_for_database()
    return chaos, ids, chaos.elapsed(time.monotonic()), chaos_over
