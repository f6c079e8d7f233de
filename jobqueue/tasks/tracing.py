"""OpenTelemetry spans for enqueues and attempts; nothing at all without opentelemetry-api.

The one module that imports OpenTelemetry, and only its API (``opentelemetry.trace``,
``.propagate``, ``.context``), lazily, at the first enqueue or attempt: without the package
every function here returns a shared object that does nothing. With the API and no SDK, the
API's own no-op tracer applies.

- ``enqueue_span`` (the enqueue side, in the caller's thread): a PRODUCER span around the
  INSERT of one call's batch, only when the caller is inside a trace (a valid current span);
  it gives the W3C carrier (``traceparent``, ``tracestate``, ``baggage``) that every job of
  the batch stores in ``Job.trace_context``; outside a trace, ``None``: NULL.
- ``execute_span`` (a worker's slot thread, or the test kit's): a CONSUMER span per attempt,
  the child of the stored context, current while the handler runs (an async handler's
  coroutine runs in a copy of that context).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobqueue.store.jobs import ClaimedJob

TRACER_NAME = "jobqueue"
# Outcomes of an attempt that are no error of its span: the handler's decisions, not failures.
NOT_ERRORS = frozenset({"succeeded", "snoozed", "discarded"})
SYSTEM = "jobqueue"
_Api = tuple[ModuleType, ModuleType, Any, Any]

logger = logging.getLogger("jobqueue.worker")


class EnqueueTrace:
    """What the enqueue learns from its span: the carrier to store, and a place for ids."""

    def __init__(self, span: Any = None, carrier: dict[str, str] | None = None) -> None:
        self.span = span
        self.carrier = carrier

    @property
    def stored(self) -> str | None:
        """The carrier as the insert writes it: JSON text, or None (NULL)."""
        return None if self.carrier is None else json.dumps(self.carrier)

    def inserted(self, rows: Sequence[tuple[Any, ...]], calls: int) -> None:
        """Tell the span which jobs the insert wrote: ``rows`` start with their ids (an
        idempotency key may have skipped some of the ``calls``)."""
        if self.span is None:
            return
        if calls == 1 and rows:
            self.span.set_attribute("jobqueue.job_id", rows[0][0])
            self.span.set_attribute("messaging.message.id", str(rows[0][0]))
        if len(rows) < calls:
            self.span.set_attribute("jobqueue.skipped", calls - len(rows))


_UNTRACED = EnqueueTrace()


@cache
def _api() -> _Api | None:
    """``(trace, propagate, Context, tracer)``, or None without opentelemetry-api."""
    try:
        from opentelemetry import propagate, trace
        from opentelemetry.context import Context
    except ImportError:
        return None
    # A ProxyTracer until an SDK's provider is set, which it then defers to.
    return trace, propagate, Context, trace.get_tracer(TRACER_NAME)


def enabled() -> bool:
    """Whether opentelemetry-api could be imported."""
    return _api() is not None


def enqueue_span(task_name: str, queue: str, calls: int) -> AbstractContextManager[EnqueueTrace]:
    """A PRODUCER span around the insert of ``calls`` jobs, if the caller is in a trace.

    Outside a trace (no valid current span), or without OpenTelemetry, no span is started
    and nothing is stored: an enqueue from a script or a schedule costs one context lookup.
    A batch (``enqueue_many``) is one span, and every job of it stores that span's context.
    """
    api = _api()
    if api is None:
        return nullcontext(_UNTRACED)
    trace = api[0]
    if not trace.get_current_span().get_span_context().is_valid:
        return nullcontext(_UNTRACED)
    return _enqueue(api, task_name, queue, calls)


@contextmanager
def _enqueue(api: _Api, task_name: str, queue: str, calls: int) -> Iterator[EnqueueTrace]:
    trace, propagate, _, tracer = api
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
        "jobqueue.task": task_name,
        "jobqueue.queue": queue,
    }
    if calls > 1:
        attributes["messaging.batch.message_count"] = calls
    span = tracer.start_span(
        f"jobqueue enqueue {task_name}", kind=trace.SpanKind.PRODUCER, attributes=attributes
    )
    with trace.use_span(span, end_on_exit=True):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)  # the enqueue span's context: the jobs become its children
        yield EnqueueTrace(span, carrier if span.get_span_context().is_valid else None)


def execute_span(
    job: ClaimedJob, outcome: Callable[[BaseException | None], str]
) -> AbstractContextManager[None]:
    """A CONSUMER span around one attempt's handler, current while it runs.

    Its parent is the context the job stored at enqueue (the enqueue span, in the trace of
    the request that enqueued it); a job enqueued outside a trace starts a trace of its own.
    ``outcome(raised)`` names how the attempt ends (the runtime's rule), its
    ``jobqueue.outcome``: past ``NOT_ERRORS`` the span records the exception and is ERROR.
    """
    api = _api()
    if api is None:
        return nullcontext()
    if job.trace_context is None and isinstance(
        api[0].get_tracer_provider(), api[0].ProxyTracerProvider
    ):
        # The API alone, no SDK's provider set, and no trace to pass on to what the
        # handler calls: the no-op span would cost an attempt ~15 us for nothing.
        return nullcontext()
    return _execute(api, job, outcome)


@contextmanager
def _execute(
    api: _Api, job: ClaimedJob, outcome: Callable[[BaseException | None], str]
) -> Iterator[None]:
    trace, propagate, Context, tracer = api

    # An empty base, not the current context: the attempt belongs to the enqueuer's trace,
    # never to whatever the running thread is in (the test kit runs jobs inside a test).
    parent = propagate.extract(_carrier(job.trace_context), context=Context())
    span = tracer.start_span(
        f"jobqueue execute {job.task_name}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.destination.name": job.queue,
            "messaging.operation.type": "process",
            "messaging.operation.name": "execute",
            "messaging.message.id": str(job.id),
            "jobqueue.job_id": job.id,
            "jobqueue.task": job.task_name,
            "jobqueue.queue": job.queue,
            "jobqueue.attempt": job.attempt,
            "jobqueue.max_attempts": job.max_attempts,
        },
    )
    # The status is this block's to set: use_span's own would make a snooze an error.
    with trace.use_span(
        span, end_on_exit=True, record_exception=False, set_status_on_exception=False
    ):
        try:
            yield
        except BaseException as exc:
            _ended(trace, span, outcome(exc), exc, job)
            raise
        _ended(trace, span, outcome(None), None, job)


def _ended(trace: ModuleType, span: Any, ended: str, exc: BaseException | None, job: Any) -> None:
    """Write the attempt's outcome on its span. Never raises: the span must not change how
    the attempt ends (a handler's exception whose ``__str__`` raises breaks
    ``record_exception``, which reads the message)."""
    try:
        span.set_attribute("jobqueue.outcome", ended)
        if exc is not None and ended not in NOT_ERRORS:
            span.set_status(trace.Status(trace.StatusCode.ERROR, _describe(exc)))
            span.record_exception(exc)
    except Exception:
        logger.warning("job %s: its span missed the outcome %s", job.id, ended, exc_info=True)


def _carrier(value: Any) -> Mapping[str, str]:
    # A row edited by hand may hold anything: only string pairs are a carrier.
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # a handler's exception whose __str__ raises
        return type(exc).__name__
