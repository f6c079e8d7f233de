"""The no-op task every workload enqueues and drains, and W4's stamp task."""

import os
import time

from jobqueue import task


@task(name="bench.noop")
def noop(n: int) -> None:
    """Do nothing: the benchmark measures the queue, not the handler."""


@task(name="bench.stamp")
def stamp(n: int) -> None:
    """W4: record the moment the handler runs, as ``n wall-clock-time``."""
    with open(os.environ["BENCH_STAMP_FILE"], "a") as file:
        file.write(f"{n} {time.time()!r}\n")
