"""The no-op task every workload enqueues and drains."""

from jobqueue import task


@task(name="bench.noop")
def noop(n: int) -> None:
    """Do nothing: the benchmark measures the queue, not the handler."""
