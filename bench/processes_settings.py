"""Settings of W9's supervisor (``bench/processes.py``): the bench's, with the default pool
run by ``BENCH_PROCESSES`` worker processes (everything else as the example project has it)."""

import os

from testproject.settings import JOBQUEUE

from bench.settings import *  # noqa: F403

JOBQUEUE = {
    **JOBQUEUE,
    "POOLS": {
        "default": {
            **JOBQUEUE["POOLS"]["default"],
            "processes": int(os.environ.get("BENCH_PROCESSES", "1")),
        }
    },
}
