"""Handlers the tests enqueue. Side effects go to the Execution table, never to memory."""

import asyncio
import gc
import os
import signal
import time
from pathlib import Path

from django.db import connection, transaction

from jobqueue import Discard, PermanentError, Snooze, task
from tests.testapp.models import Execution


def record(label, ctx=None):
    Execution.objects.create(
        label=label,
        job_id=ctx.job_id if ctx else None,
        attempt=ctx.attempt if ctx else None,
        pid=os.getpid(),
    )


def wait_for_file(path, timeout=60):
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)


@task(takes_context=True)
def noop(ctx, label="noop"):
    record(label, ctx)
    return label


@task
def frozen_objects():
    """How many objects the process has moved out of the cyclic collector's reach."""
    return gc.get_freeze_count()


@task
def add(a, b):
    return a + b


@task(name="tests.echo")
def echo(value):
    return value


@task(max_attempts=3, backoff=(1, 5, 3600), takes_context=True)
def always_fails(ctx):
    record("always_fails", ctx)
    raise ValueError(f"broken on attempt {ctx.attempt}")


@task(max_attempts=5, takes_context=True)
def permanent(ctx):
    record("permanent", ctx)
    raise PermanentError("the card was declined")


@task(max_attempts=5, takes_context=True)
def discards(ctx):
    record("discards", ctx)
    raise Discard("the order was deleted")


@task(takes_context=True)
def snoozes_once(ctx):
    record("snoozes_once", ctx)
    if not ctx.job.steps.get("snoozed"):
        ctx.step("snoozed", lambda: True)
        raise Snooze(30)
    return "woke"


@task(takes_context=True)
def slow(ctx, seconds, label="slow"):
    record(f"{label}:start", ctx)
    time.sleep(seconds)
    record(f"{label}:end", ctx)
    return label


@task(takes_context=True)
def block_until(ctx, path, label="block"):
    """Record a start, then wait until the test creates ``path``."""
    record(f"{label}:start", ctx)
    wait_for_file(path)
    record(f"{label}:end", ctx)
    return f"{label} done by {os.getpid()}"


@task(takes_context=True, on_crash="park")
def park_block_until(ctx, path, label="park"):
    record(f"{label}:start", ctx)
    wait_for_file(path)
    return label


@task(takes_context=True)
def kill_self(ctx):
    record("kill_self", ctx)
    os.kill(os.getpid(), signal.SIGKILL)


@task(takes_context=True)
def kill_self_once_started(ctx):
    """Record a start; on the first run, once the worker has recorded the start on the row
    (a held job's start goes out with the writer's next statement), SIGKILL the process."""
    from jobqueue.models import Job

    runs = Execution.objects.filter(label="kill_self_once_started", job_id=ctx.job_id)
    first = not runs.exists()
    record("kill_self_once_started", ctx)
    if first:
        deadline = time.monotonic() + 10
        while Job.objects.filter(pk=ctx.job_id, started_at=None).exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the worker never recorded the start")
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGKILL)
    return "survived"


@task(takes_context=True)
def two_steps(ctx, path):
    first = ctx.step("first", lambda: record("first", ctx) or 1)
    wait_for_file(path)
    second = ctx.step("second", lambda: record("second", ctx) or 2)
    return first + second


@task(takes_context=True, timeout=1)
def sleeps_past_timeout(ctx, seconds=5):
    record("sleeps_past_timeout:start", ctx)
    time.sleep(seconds)
    record("sleeps_past_timeout:end", ctx)


@task(takes_context=True, timeout=1)
async def async_sleeps_past_timeout(ctx, seconds=5):
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        await asyncio.to_thread(record, "async:cancelled", ctx)
        raise


@task(takes_context=True)
async def async_add(ctx, a, b):
    return a + b


@task(takes_context=True)
def replace_token(ctx):
    """Simulate another worker taking over: change this job's token mid-handler."""
    from jobqueue.models import Job

    Job.objects.filter(pk=ctx.job_id).update(token="f" * 32)
    return "should never be stored"


@task(takes_context=True)
def hold_transaction(ctx, seconds):
    """Hold a transaction open on the handler's own connection for ``seconds``."""
    with transaction.atomic():
        record("hold_transaction", ctx)
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_sleep(%s)", [seconds])
            else:
                time.sleep(seconds)
    return "held"


@task
def returns_object():
    return object()


@task(queue="emails", priority=0)
def send_email(to):
    return to


@task(takes_context=True, backoff=(0.3, 1, 1))
def fails_once(ctx):
    record("fails_once", ctx)
    if ctx.attempt == 1:
        raise ConnectionError("first try fails")
    return "second try"


def _broken_backoff(attempt):
    raise ZeroDivisionError("bad backoff")


@task(takes_context=True, backoff=_broken_backoff)
def broken_backoff(ctx):
    raise ValueError("handler failed")


@task
def raises_keyboard_interrupt():
    raise KeyboardInterrupt


@task(takes_context=True)
async def async_steps(ctx):
    async def fetch():
        return 20

    first = await ctx.astep("fetch", fetch)
    second = await ctx.astep("double", lambda: first * 2)
    job = await ctx.ajob()
    return {"steps": [first, second], "task": job.task_name}


@task(takes_context=True, backoff=(1.5, 1, 1.5))
def fails_once_later(ctx):
    if ctx.attempt == 1:
        raise ConnectionError("first try fails")
    return "second try"


@task
def nap(seconds):
    # Touches no database: it runs (and succeeds) through a database outage.
    time.sleep(seconds)
    return seconds


try:
    import django.tasks  # noqa: F401  (Django 6: register the django.tasks tasks too)
except ImportError:
    pass
else:
    from tests.testapp import django_tasks  # noqa: F401


# -- Handlers that misbehave (issue 15): each fails on its own, its slot goes on working. --
# Two attempts each, retried at once (no backoff), so that a burst worker sees both.
HOSTILE = {"max_attempts": 2, "backoff": (0, 1, 0), "takes_context": True}


@task(**HOSTILE)
def leaves_atomic_open(ctx):
    record("leaves_atomic_open", ctx)  # autocommit: this one stays
    transaction.atomic().__enter__()  # never left
    record("leaves_atomic_open:inside", ctx)  # rolled back by the worker
    return "left open"


@task(**HOSTILE)
def leaves_autocommit_off(ctx):
    record("leaves_autocommit_off", ctx)
    transaction.set_autocommit(False)
    record("leaves_autocommit_off:uncommitted", ctx)  # on SQLite this takes the write lock
    return "autocommit off"


@task(**HOSTILE)
def returns_nul(ctx):
    return {"text": "a\x00b"}


@task(**HOSTILE)
def returns_lone_surrogate(ctx):
    return ["\ud800"]


@task(**HOSTILE)
def returns_huge_int(ctx):
    return 10**5000


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("this exception has no text")


@task(**HOSTILE)
def raises_unprintable(ctx):
    raise Unprintable()


@task(**HOSTILE)
def raises_nul_message(ctx):
    raise ValueError("a NUL \x00 and a lone surrogate \udc80 in the message")


@task(**HOSTILE)
def raises_huge_message(ctx):
    raise ValueError("x" * 5_000_000)


@task(**HOSTILE)
def snoozes_forever(ctx):
    raise Snooze(1e12)


def _backoff_forever(attempt):
    return 1e12


@task(max_attempts=2, backoff=_backoff_forever)
def backs_off_forever():
    raise ValueError("failed; see you in 31,709 years")


def _current_span_ids():
    from opentelemetry import trace  # tests/tracing only; the test extra has it

    context = trace.get_current_span().get_span_context()
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


@task
def current_span():
    """The ids of the span current inside the handler (OpenTelemetry)."""
    return _current_span_ids()


@task
async def async_current_span():
    """The same from inside an async handler's coroutine."""
    await asyncio.sleep(0)
    return _current_span_ids()


@task
def enqueues_add():
    """Enqueue a job from a handler: its enqueue span is a child of this attempt's."""
    return add.enqueue(1, 1).id


@task(takes_context=True)
def until_cancelled(ctx, label="cancel", seconds=60):
    """Record a start, wait for ``ctx.cancelled``, record the moment it was seen, and then
    return anyway: a late success the fence must refuse."""
    record(f"{label}:start", ctx)
    if ctx.cancelled.wait(seconds):
        record(f"{label}:cancelled", ctx)
    return f"{label} finished late"


@task(takes_context=True)
async def async_until_cancelled(ctx, label="async-cancel", seconds=60):
    """Record a start and sleep; record the moment the coroutine is cancelled."""
    await asyncio.to_thread(record, f"{label}:start", ctx)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        await asyncio.to_thread(record, f"{label}:cancelled", ctx)
        raise
    return f"{label} slept"


# Flow control (tests/storage/test_limits.py, tests/process/test_limits.py).
from jobqueue import Concurrency, RateLimit  # noqa: E402


@task(queue="sync", concurrency=Concurrency(key="tenant", limit=2))
def per_tenant(tenant, n=0):
    return n


@task(rate_limit=RateLimit(key="account", limit=5, per=1.0))
def per_account(account, n=0):
    return n


@task(concurrency=Concurrency(key="account", limit=1, group="stripe"))
def refund(account, charge=""):
    return charge


@task(concurrency=Concurrency(key="account", limit=1, group="stripe"))
def charge(account, amount=0):
    return amount
