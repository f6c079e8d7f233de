"""OpenTelemetry: an enqueue span in the request's trace, and an execute span per attempt that
continues it, through the SDK's in-memory exporter (jobqueue imports only the API)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jobqueue.models import Job
from jobqueue.runtime.worker import EXIT_OK, Worker
from jobqueue.testing import run_jobs
from tests.testapp import tasks

UPSTREAM_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
UPSTREAM = f"00-{UPSTREAM_TRACE}-00f067aa0ba902b7-01"

tracer = trace.get_tracer("tests.tracing")


@pytest.fixture
def client(settings: Any) -> Client:
    settings.ROOT_URLCONF = "tests.tracing.server"
    settings.MIDDLEWARE = ["tests.tracing.server.ServerSpanMiddleware", *settings.MIDDLEWARE]
    return Client()


def of_kind(spans: InMemorySpanExporter, kind: SpanKind) -> list[ReadableSpan]:
    return [span for span in spans.get_finished_spans() if span.kind == kind]


def one(spans: InMemorySpanExporter, kind: SpanKind) -> ReadableSpan:
    [span] = of_kind(spans, kind)
    return span


def trace_hex(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


@pytest.mark.django_db(transaction=True)
def test_a_workers_execute_span_is_in_the_trace_of_the_request_that_enqueued_the_job(
    client: Client, spans: InMemorySpanExporter
) -> None:
    response = client.get("/signup/", headers={"traceparent": UPSTREAM})
    [job_id] = response.json()["jobs"]
    request = one(spans, SpanKind.SERVER)
    enqueue = one(spans, SpanKind.PRODUCER)
    assert trace_hex(request) == UPSTREAM_TRACE  # the middleware continued the header
    assert parent_id(enqueue) == span_id(request)
    assert enqueue.name == "jobqueue enqueue tests.testapp.tasks.add"
    assert dict(enqueue.attributes or {}) == {
        "messaging.system": "jobqueue",
        "messaging.destination.name": "emails",
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
        "jobqueue.task": "tests.testapp.tasks.add",
        "jobqueue.queue": "emails",
        "jobqueue.job_id": job_id,
        "messaging.message.id": str(job_id),
    }
    stored = Job.objects.get(pk=job_id).trace_context
    assert stored == {"traceparent": f"00-{UPSTREAM_TRACE}-{span_id(enqueue):016x}-01"}

    # A real worker in this process: the claim statement, a slot thread, the writer.
    assert Worker(burst=True, queues=["emails"]).run() == EXIT_OK
    execute = one(spans, SpanKind.CONSUMER)
    assert Job.objects.get(pk=job_id).status == "succeeded"
    assert trace_hex(execute) == trace_hex(request)
    assert parent_id(execute) == span_id(enqueue)
    assert execute.name == "jobqueue execute tests.testapp.tasks.add"
    assert dict(execute.attributes or {}) == {
        "messaging.system": "jobqueue",
        "messaging.destination.name": "emails",
        "messaging.operation.type": "process",
        "messaging.operation.name": "execute",
        "messaging.message.id": str(job_id),
        "jobqueue.job_id": job_id,
        "jobqueue.task": "tests.testapp.tasks.add",
        "jobqueue.queue": "emails",
        "jobqueue.attempt": 1,
        "jobqueue.max_attempts": 3,
        "jobqueue.outcome": "succeeded",
    }
    assert execute.status.status_code == StatusCode.UNSET


@pytest.mark.django_db
def test_enqueue_many_is_one_span_whose_context_every_job_of_the_batch_continues(
    client: Client, spans: InMemorySpanExporter
) -> None:
    ids = client.get("/signup/", {"many": 3}).json()["jobs"]
    enqueue = one(spans, SpanKind.PRODUCER)
    assert (enqueue.attributes or {})["messaging.batch.message_count"] == 3
    assert "jobqueue.job_id" not in (enqueue.attributes or {})
    stored = {str(job.trace_context) for job in Job.objects.filter(pk__in=ids)}
    assert len(stored) == 1 and f"{span_id(enqueue):016x}" in stored.pop()

    run_jobs()
    executes = of_kind(spans, SpanKind.CONSUMER)
    assert sorted((e.attributes or {})["jobqueue.job_id"] for e in executes) == sorted(ids)
    assert {parent_id(e) for e in executes} == {span_id(enqueue)}
    assert {trace_hex(e) for e in executes} == {trace_hex(enqueue)}


@pytest.mark.django_db
def test_a_duplicate_enqueue_says_so_on_its_span(spans: InMemorySpanExporter) -> None:
    keyed = tasks.add.using(idempotency_key="once")
    with tracer.start_as_current_span("request"):
        assert keyed.enqueue(1, 2) is not None
        assert keyed.enqueue(1, 2) is None
    first, second = of_kind(spans, SpanKind.PRODUCER)
    assert "jobqueue.skipped" not in (first.attributes or {})
    assert (second.attributes or {})["jobqueue.skipped"] == 1
    assert "jobqueue.job_id" not in (second.attributes or {})


@pytest.mark.django_db
@pytest.mark.parametrize("handler", [tasks.current_span, tasks.async_current_span])
def test_the_execute_span_is_current_inside_the_handler(
    handler: Any, spans: InMemorySpanExporter
) -> None:
    with tracer.start_as_current_span("request"):
        job = handler.enqueue()
    run_jobs()
    execute = one(spans, SpanKind.CONSUMER)
    assert Job.objects.get(pk=job.pk).result == {
        "trace_id": trace_hex(execute),
        "span_id": f"{span_id(execute):016x}",
    }


@pytest.mark.django_db
def test_a_job_enqueued_by_a_handler_continues_the_same_trace(
    spans: InMemorySpanExporter,
) -> None:
    with tracer.start_as_current_span("request") as request:
        tasks.enqueues_add.enqueue()
    run_jobs()
    first, second = sorted(of_kind(spans, SpanKind.CONSUMER), key=lambda s: s.start_time or 0)
    inner = [e for e in of_kind(spans, SpanKind.PRODUCER) if parent_id(e) == span_id(first)]
    assert first.name.endswith("enqueues_add") and second.name.endswith(".add")
    assert len(inner) == 1 and parent_id(second) == span_id(inner[0])
    assert {trace_hex(first), trace_hex(second)} == {f"{request.get_span_context().trace_id:032x}"}


@pytest.mark.django_db
def test_each_failed_attempt_records_its_exception_and_an_error_status(
    spans: InMemorySpanExporter,
) -> None:
    with tracer.start_as_current_span("request"):
        job = tasks.always_fails.enqueue()
    run_jobs()
    enqueue = one(spans, SpanKind.PRODUCER)
    executes = sorted(of_kind(spans, SpanKind.CONSUMER), key=lambda s: s.start_time or 0)
    assert [(e.attributes or {})["jobqueue.attempt"] for e in executes] == [1, 2, 3]
    outcomes = [(e.attributes or {})["jobqueue.outcome"] for e in executes]
    assert outcomes == ["retry", "retry", "failed"]  # as the Sentry tags say
    for number, execute in enumerate(executes, start=1):
        assert parent_id(execute) == span_id(enqueue)  # every attempt continues the request
        assert execute.status.status_code == StatusCode.ERROR
        assert execute.status.description == f"ValueError: broken on attempt {number}"
        [event] = execute.events
        assert event.name == "exception"
        assert (event.attributes or {})["exception.type"] == "ValueError"
        assert (event.attributes or {})["exception.message"] == f"broken on attempt {number}"
        assert "always_fails" in str((event.attributes or {})["exception.stacktrace"])
    assert Job.objects.get(pk=job.pk).status == "failed"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("handler", "outcomes"),
    [(tasks.snoozes_once, ["snoozed", "succeeded"]), (tasks.discards, ["discarded"])],
)
def test_a_snooze_or_a_discard_is_the_handlers_decision_not_an_error(
    handler: Any, outcomes: list[str], spans: InMemorySpanExporter
) -> None:
    with tracer.start_as_current_span("request"):
        handler.enqueue()
    run_jobs()
    executes = sorted(of_kind(spans, SpanKind.CONSUMER), key=lambda s: s.start_time or 0)
    assert [(e.attributes or {})["jobqueue.outcome"] for e in executes] == outcomes
    assert {e.status.status_code for e in executes} == {StatusCode.UNSET}
    assert all(not e.events for e in executes)


@pytest.mark.django_db
def test_outside_a_trace_nothing_is_stored_and_the_attempt_starts_a_trace_of_its_own(
    spans: InMemorySpanExporter,
) -> None:
    assert not trace.get_current_span().get_span_context().is_valid
    one_job = tasks.add.enqueue(1, 2)
    batch = tasks.add.enqueue_many([(1, 1), (2, 2)])
    ids = [one_job.pk, *(job.pk for job in batch if job is not None)]
    assert list(Job.objects.filter(pk__in=ids).values_list("trace_context", flat=True)) == [
        None,
        None,
        None,
    ]
    assert of_kind(spans, SpanKind.PRODUCER) == []
    run_jobs()
    executes = of_kind(spans, SpanKind.CONSUMER)
    assert len(executes) == 3 and all(e.parent is None for e in executes)
    assert len({trace_hex(e) for e in executes}) == 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    "stored",
    [{"traceparent": "not a traceparent"}, {"traceparent": 5}, ["a", "list"], "text"],
)
def test_a_trace_context_edited_by_hand_starts_a_new_trace_and_the_job_still_runs(
    stored: Any, spans: InMemorySpanExporter
) -> None:
    job = tasks.add.enqueue(2, 2)
    Job.objects.filter(pk=job.pk).update(trace_context=stored)
    run_jobs()
    assert Job.objects.get(pk=job.pk).status == "succeeded"
    assert one(spans, SpanKind.CONSUMER).parent is None


@pytest.mark.django_db
def test_the_test_kit_runs_the_job_outside_the_tests_own_span(
    spans: InMemorySpanExporter,
) -> None:
    with tracer.start_as_current_span("request") as request:
        tasks.add.enqueue(1, 1)
    with tracer.start_as_current_span("the test"):
        run_jobs()
    execute = one(spans, SpanKind.CONSUMER)
    assert trace_hex(execute) == f"{request.get_span_context().trace_id:032x}"


@pytest.mark.django_db
def test_a_permanent_error_fails_the_attempt_for_good_with_an_error_status(
    spans: InMemorySpanExporter,
) -> None:
    with tracer.start_as_current_span("request"):
        tasks.permanent.enqueue()
    run_jobs()
    execute = one(spans, SpanKind.CONSUMER)
    assert (execute.attributes or {})["jobqueue.outcome"] == "failed"
    assert execute.status.status_code == StatusCode.ERROR
    assert execute.status.description == "PermanentError: the card was declined"


@pytest.mark.django_db
def test_a_django_tasks_task_is_traced_as_a_jobqueue_task(spans: InMemorySpanExporter) -> None:
    pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")
    from tests.testapp import django_tasks

    with tracer.start_as_current_span("request"):
        result = django_tasks.add.enqueue(2, b=3)
    run_jobs()
    enqueue = one(spans, SpanKind.PRODUCER)
    execute = one(spans, SpanKind.CONSUMER)
    assert (enqueue.attributes or {})["jobqueue.job_id"] == int(result.id)
    assert parent_id(execute) == span_id(enqueue)
    assert execute.name == "jobqueue execute tests.testapp.django_tasks.add"
    assert (execute.attributes or {})["jobqueue.outcome"] == "succeeded"


@pytest.mark.django_db
def test_an_exception_whose_text_raises_still_fails_the_attempt_as_itself(
    spans: InMemorySpanExporter,
) -> None:
    with tracer.start_as_current_span("request"):
        job = tasks.raises_unprintable.enqueue()
    run_jobs()
    row = Job.objects.get(pk=job.pk)
    assert row.status == "failed"
    assert [error["type"] for error in row.errors] == ["tests.testapp.tasks.Unprintable"] * 2
    executes = of_kind(spans, SpanKind.CONSUMER)
    assert [e.status.description for e in executes] == ["Unprintable", "Unprintable"]
