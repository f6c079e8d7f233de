"""The no-op task every workload enqueues and drains, W4's stamp task, the memory
workload's task that returns 10 KB, and W14's tasks of a key, without limits and with each."""

import os
import time

from jobqueue import Concurrency, RateLimit, task


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


# W14, flow control: the same no-op job over keys, without limits and with each kind.
# RateLimit's 1,000 starts a second per key is set high enough not to bind: W14 measures
# what checking a limit costs, not the limit.
@task(name="bench.keyed")
def keyed(n: int, key: int) -> None:
    """W14: do nothing, with a key and no limit."""


@task(name="bench.keyed_concurrency", concurrency=Concurrency(key="key", limit=2))
def keyed_concurrency(n: int, key: int) -> None:
    """W14: do nothing, at most 2 of one key running at once."""


@task(name="bench.keyed_rate", rate_limit=RateLimit(key="key", limit=1_000, per=1.0))
def keyed_rate(n: int, key: int) -> None:
    """W14: do nothing, at most 1,000 starts of one key a second."""


@task(name="bench.one_per_key", concurrency=Concurrency(key="key", limit=1))
def one_per_key(n: int, key: str) -> None:
    """W14's head-of-line case: do nothing, one of a key at a time."""
