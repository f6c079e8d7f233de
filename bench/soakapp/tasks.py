"""The soak's handlers: one per crash policy, each a few milliseconds with two steps.

Each run records, fenced (see ``records``), its start, every step function it executes and
its end. A step's stored value is the token of the run that executed it, so the checks can
tell which run did what.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from bench.soakapp import records
from jobqueue import task
from jobqueue.tasks.context import JobContext

# The machine has two cores shared with the database: the handlers stay light, and wait
# rather than compute, so that kills still land in the middle of runs.
WORK = (0.001, 0.004)  # s between the two steps, uniformly at random


def _token(ctx: JobContext) -> str:
    # The claim's own token, not ``ctx.job.token``: ``ctx.job`` is read from the row when
    # first asked for, and a run paused (SIGSTOP) between its claim and that read would see
    # the token of the run that recovered the job, and pass the fence as that run.
    return ctx._claimed.token


def _executed(job_id: int, token: str, name: str) -> str:
    """A step's function: record that this run executed it, and return the run's token."""
    records.record(job_id, token, "step", os.getpid(), step=name)
    return token


def _run(ctx: JobContext, n: int) -> dict[str, Any]:
    token, pid = _token(ctx), os.getpid()
    records.record(ctx.job_id, token, "start", pid)
    first = ctx.step("first", _executed, ctx.job_id, token, "first")
    time.sleep(random.uniform(*WORK))
    second = ctx.step("second", _executed, ctx.job_id, token, "second")
    records.record(ctx.job_id, token, "end", pid)
    return {"n": n, "first": first, "second": second}


# Retried after every crash (MAX_CRASHES is set far above what the soak inflicts) and after
# every failure (a PostgreSQL restart under a step's write is one), with short delays: every
# one of these jobs must end succeeded.
@task(
    name="soak.retry",
    on_crash="retry",
    takes_context=True,
    max_attempts=1000,
    backoff=(0.2, 1.5, 2.0),
)
def soak_retry(ctx: JobContext, n: int) -> dict[str, Any]:
    return _run(ctx, n)


# At most once: a crash parks it, and one attempt only, so that a failure (a restart under a
# step's write) does not start it again either. It ends succeeded, abandoned or failed, and
# never has two recorded runs.
@task(name="soak.park", on_crash="park", takes_context=True, max_attempts=1)
def soak_park(ctx: JobContext, n: int) -> dict[str, Any]:
    return _run(ctx, n)
