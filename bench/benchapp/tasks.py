"""The no-op task every workload enqueues and drains, W4's stamp task, and the memory
workload's task that returns 10 KB."""

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


# The memory workload's job that returns something: 10 KB stored as the job's result.
TEN_KB = "x" * 10_240


@task(name="bench.ten_kb")
def ten_kb(n: int) -> str:
    """Return 10 KB: the memory workload checks the worker does not keep results."""
    return TEN_KB
