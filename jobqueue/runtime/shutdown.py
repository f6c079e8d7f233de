"""Signal handling for the process that owns the worker loop, and only there."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from django.db import connections

from jobqueue.runtime.worker import Worker

logger = logging.getLogger("jobqueue.worker")

EXIT_FORCED = 130
# One stop can arrive twice at once: systemd signals the whole control group and the
# supervisor forwards its own signal. Only a signal after this long counts as a second one.
SAME_STOP = 1.0
# A second signal exits at once, but first hands back (by policy) the jobs the worker holds,
# in one statement: the exit waits for it this long at most.
FORCED_RELEASE_TIMEOUT = 3.0


def on_stop_signals(
    first: Callable[[str], None], second: Callable[[str], None], *, ignore_sigint: bool = False
) -> None:
    """Call ``first`` on SIGTERM/SIGINT, ``second`` on another one at least SAME_STOP later.

    A repeat within SAME_STOP is the same stop delivered twice and is ignored.
    """
    received: list[float] = []

    def handle(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not received:
            received.append(time.monotonic())
            first(name)
        elif time.monotonic() - received[0] >= SAME_STOP:
            second(name)

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_sigint else handle)


def install(worker: Worker, *, supervised: bool = False) -> None:
    """First SIGTERM/SIGINT: a bounded, graceful stop. A second one: hand back every job
    held, by policy, and exit at once.

    A worker started by the supervisor ignores SIGINT: Ctrl-C in a terminal reaches the
    whole process group, and the supervisor turns it into one SIGTERM per worker.
    """
    forcing = threading.Event()

    def first(name: str) -> None:
        logger.info("worker %s: %s received, shutting down", worker.id, name)
        worker.stop()

    def second(name: str) -> None:
        if forcing.is_set():  # a third signal while the hand-back runs: it is on its way
            return
        forcing.set()
        logger.warning(
            "worker %s: second %s, handing back its jobs and exiting now", worker.id, name
        )
        release_all(worker)
        os._exit(EXIT_FORCED)

    on_stop_signals(first, second, ignore_sigint=supervised)


def release_all(worker: Worker, timeout: float = FORCED_RELEASE_TIMEOUT) -> None:
    """Apply the crash policy now to every job ``worker`` holds, running or held unstarted,
    in one statement; give up after ``timeout``.

    Called from a signal handler, so the main thread may have been interrupted inside a
    statement on its own connection, or holding a lock of the executor: the statement goes
    out from a fresh thread, on a connection of its own, and it names the jobs by worker
    (every job this process holds), not by a list the executor's lock guards.
    """
    reason = (
        "The worker was stopped by a second signal before the job finished (no wait for "
        "SHUTDOWN_TIMEOUT)."
    )

    def hand_back() -> None:
        try:
            released = worker.store.release_worker(worker.id, reason)
            logger.warning(
                "worker %s: %s job(s) handed back at the second signal: %s",
                worker.id,
                len(released),
                ", ".join(f"{job_id} -> {status}" for job_id, _, status in released) or "none",
            )
            worker.store.deregister_worker(worker.id)
        except Exception:
            logger.exception(
                "worker %s: could not hand back its jobs; they are recovered when their "
                "leases expire",
                worker.id,
            )
        finally:
            connections.close_all()

    thread = threading.Thread(target=hand_back, name="jobqueue-release", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        logger.error(
            "worker %s: handing back its jobs took over %g s; exiting without it "
            "(they are recovered when their leases expire)",
            worker.id,
            timeout,
        )


def stop_with_parent(worker: Worker, parent_pid: int) -> None:
    """Stop gracefully when the supervisor that started this worker dies.

    A worker must not outlive its supervisor (killed with SIGKILL, say): nothing would
    restart or reap it. Linux delivers SIGTERM at the parent's death; elsewhere the worker
    notices a new parent process within a second.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
    worker.watch_parent(parent_pid)
    if os.getppid() != parent_pid:  # it died before the line above took effect
        worker.stop()
