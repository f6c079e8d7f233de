"""Signal handling for the process that owns the worker loop, and only there."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from types import FrameType

from jobqueue.runtime.worker import Worker

logger = logging.getLogger("jobqueue.worker")

EXIT_FORCED = 130
# One stop can arrive twice at once: systemd signals the whole control group and the
# supervisor forwards its own signal. Only a signal after this long counts as a second one.
SAME_STOP = 1.0


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
    """First SIGTERM/SIGINT: a bounded, graceful stop. A second one: exit at once.

    A worker started by the supervisor ignores SIGINT: Ctrl-C in a terminal reaches the
    whole process group, and the supervisor turns it into one SIGTERM per worker.
    """

    def first(name: str) -> None:
        logger.info("worker %s: %s received, shutting down", worker.id, name)
        worker.stop()

    def second(name: str) -> None:
        logger.warning("worker %s: second %s, exiting now", worker.id, name)
        os._exit(EXIT_FORCED)

    on_stop_signals(first, second, ignore_sigint=supervised)


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
