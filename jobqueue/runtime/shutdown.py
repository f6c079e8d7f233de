"""Signal handling for the process that owns the worker loop, and only there."""

from __future__ import annotations

import logging
import os
import signal
from types import FrameType

from jobqueue.runtime.worker import Worker

logger = logging.getLogger("jobqueue.worker")

EXIT_FORCED = 130


def install(worker: Worker) -> None:
    """First SIGTERM/SIGINT: a bounded, graceful stop. A second one: exit at once."""

    def handle(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if worker.stopping:
            logger.warning("worker %s: second %s, exiting now", worker.id, name)
            os._exit(EXIT_FORCED)
        logger.info("worker %s: %s received, shutting down", worker.id, name)
        worker.stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
